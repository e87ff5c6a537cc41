"""A safetensors file as a :class:`ocf.format.source.Source`.

``ocf.open``, ``ocf.load_file``, ``ocf.list_variables``, ``ocf.restore``
by name and every ``ocf`` command read it through this class (the format's
registry entry, ocf.interop.safetensors, opens it). The header is checked as the
converter checks it (ocf.interop.safetensors.convert) before any tensor is read;
tensors are read with ``pread``, never mapped, and a piece of a tensor
reads only its bytes. safetensors has no checksums, so ``verify`` checks
structure only.
"""

from __future__ import annotations

import os

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import TensorSummary
from ocf.interop.file_source import FileSource
from ocf.interop.safetensors.convert import (
    Entry,
    ocf_metadata,
    read_elements,
    read_header,
    read_tensor,
)


class SafetensorsSource(FileSource[Entry]):
    """A safetensors file as an :class:`ocf.format.source.Source`."""

    format_name = "safetensors"

    def _read_entries(self) -> dict[str, Entry]:
        self.size = os.fstat(self.file.fileno()).st_size
        self.header = read_header(self.file, self.path, self.size)
        self._raw_header = os.pread(self.file.fileno(), self.header.data_start, 0)
        return {e.name: e for e in self.header.entries}

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return ocf_metadata(self.header)

    def _view(self, key: str) -> TensorSummary:
        entry = self.entry(key)
        return TensorSummary(key, entry.dtype, entry.shape)

    def read_tensor(self, key: str) -> np.ndarray:
        return read_tensor(self.file.fileno(), self.entry(key), self.header, self.path)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        flat = read_elements(self.file.fileno(), self.entry(key), self.header, self.path,
                             piece.begin, piece.end)
        return flat.reshape(piece.shape)

    @property
    def identity(self) -> tuple[int, int]:
        return len(self._raw_header), crc32c(self._raw_header)

