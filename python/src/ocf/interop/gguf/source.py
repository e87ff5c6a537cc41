"""A GGUF file as a :class:`ocf.format.source.Source`.

``ocf.open``, ``ocf.load_file`` and every ``ocf`` command read it through
this class. The header is parsed and checked first (ocf.interop.gguf.header);
tensors are then read with ``pread``, never mapped, a piece reading only its
bytes. Shapes are NumPy's (outermost dimension first): GGUF stores them
innermost first, and llama.cpp's tools print them so. Tensors of a
quantized type (Q4_0, Q8_0, the K-quants, ...) are listed with a dtype of
that type's name (``q4_0``) and no NumPy type; asking for their values is an
InvalidError naming the type, as OCF does not dequantize.

The metadata, as OCF holds it (and converting to OCF writes it):
``gguf.metadata``, the key-value pairs of the header, and ``gguf.version``.
"""

from __future__ import annotations

import os

import numpy as np

from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.errors import InvalidError, MalformedError
from ocf.format.memory import allocate
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import TensorSummary
from ocf.interop.file_source import FileSource
from ocf.interop.gguf.header import Header, TensorInfo, read_header

METADATA_KEY = "gguf.metadata"
VERSION_KEY = "gguf.version"


def ocf_dtype(info: TensorInfo) -> dtypes.Dtype:
    """OCF's dtype of a plain type; for a quantized one, its name and no NumPy type."""
    if info.ggml.ocf_dtype is not None:
        return dtypes.BY_NAME[info.ggml.ocf_dtype]
    return dtypes.foreign(info.ggml.name.lower(), None)


def not_dequantized(path: str, info: TensorInfo) -> InvalidError:
    return InvalidError(f"{info.ggml.name} is a quantized ggml type (blocks of "
                        f"{info.ggml.block_elements} values in {info.ggml.block_bytes} bytes); "
                        "OCF lists such tensors but does not dequantize them, so their values "
                        "cannot be read as numbers", path=path, key=info.name)


def read_elements(fd: int, header: Header, info: TensorInfo, path: str, begin: int,
                  end: int) -> np.ndarray:
    """Elements ``begin`` to ``end`` (C order, flattened) of a plain-typed tensor."""
    if info.ggml.ocf_dtype is None:
        raise not_dequantized(path, info)
    dtype = dtypes.BY_NAME[info.ggml.ocf_dtype].numpy
    assert dtype is not None  # a plain type
    out = allocate((end - begin) * dtype.itemsize, np.uint8, "reading this tensor", path=path,
                   key=info.name)
    offset = header.data_start + info.offset + begin * dtype.itemsize
    got = os.preadv(fd, [out.data], offset) if out.size else 0
    if got != out.size:
        raise MalformedError(f"read {got} of {out.size} bytes at offset {offset}; the file "
                             "shrank", path=path, key=info.name)
    return out.view(dtype)


def ocf_metadata(header: Header) -> dict[str, MetadataValue]:
    return {VERSION_KEY: header.version, METADATA_KEY: dict(header.metadata)}


class GGUFSource(FileSource[TensorInfo]):
    """A GGUF file as an :class:`ocf.format.source.Source`."""

    format_name = "GGUF"

    def _read_entries(self) -> dict[str, TensorInfo]:
        self.size = os.fstat(self.file.fileno()).st_size
        self.header = read_header(self.file, self.path, self.size)
        return {t.name: t for t in self.header.tensors}

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return ocf_metadata(self.header)

    def _view(self, key: str) -> TensorSummary:
        info = self.entry(key)
        return TensorSummary(key, ocf_dtype(info), info.shape)

    def read_tensor(self, key: str) -> np.ndarray:
        info = self.entry(key)
        count = int(np.prod(info.shape, dtype=object))
        return read_elements(self.file.fileno(), self.header, info, self.path, 0,
                             count).reshape(info.shape)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        flat = read_elements(self.file.fileno(), self.header, self.entry(key), self.path,
                             piece.begin, piece.end)
        return flat.reshape(piece.shape)

    @property
    def identity(self) -> tuple[int, int]:
        head = os.pread(self.file.fileno(), min(self.header.data_start, 1 << 20), 0)
        return self.size, crc32c(head)
