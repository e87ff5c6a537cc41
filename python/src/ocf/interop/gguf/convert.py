"""GGUF files to OCF checkpoints (the other way is not written: OCF does not write GGUF).

Every tensor of a plain type (F32, F16, BF16, F64, I8 ... I64) is written
under its GGUF name, with NumPy's shape (ocf.interop.gguf.source); the
header's key-value pairs become the OCF metadata ``gguf.metadata`` (and the
version ``gguf.version``). A file holding a quantized tensor is refused,
naming it and its type, before anything is written: OCF does not dequantize.
"""

from __future__ import annotations

import os
from typing import Any

from ocf.format.errors import InvalidError
from ocf.interop.gguf.source import GGUFSource, not_dequantized
from ocf.interop.source_writing import write_source


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the GGUF file ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    with GGUFSource(src) as source:
        quantized = next((t for t in source.header.tensors if t.ggml.quantized), None)
        if quantized is not None:
            raise not_dequantized(source.path, quantized)
        write_source(source, dst, **options)


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Refused: OCF reads GGUF files but does not write them."""
    raise InvalidError("OCF reads GGUF files but does not write them; convert to "
                       "safetensors and use llama.cpp's own conversion scripts",
                       path=os.fspath(dst))
