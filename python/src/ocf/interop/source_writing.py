"""Writing any open Source as an OCF checkpoint: how formats read through a Source (GGUF,
sharded safetensors, Orbax) convert to OCF.

Every tensor is read whole and written under its key, in the Source's
order, with the Source's metadata; the bytes of each are reported to
``ocf convert``'s progress bar, and an OCF error names the source file and
the tensor being written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ocf.format.errors import OCFError
from ocf.format.source import AnySource
from ocf.format.writer import Writer
from ocf.interop.output import with_path, written


def write_source(source: AnySource, dst: str | os.PathLike[str],
                 tensors: Iterable[tuple[str, np.ndarray]] | None = None,
                 **options: Any) -> None:
    """Write ``source`` (its ``tensors``, by default read one by one) as the OCF
    checkpoint ``dst``; ``options`` go to :class:`ocf.Writer`."""
    values = tensors if tensors is not None else ((k, source.read_tensor(k)) for k in source)
    key = None
    try:
        with Writer(dst, metadata=source.metadata, **options) as writer:
            for key, value in values:
                writer.write(key, value)
                written(value.nbytes)
            key = None  # what commit refuses concerns no one tensor
    except OCFError as exc:
        raise with_path(exc, str(source.path), key) from None
