"""A safetensors file read the way OCF reads its own (see ocf.objects.sources).

Importing this module registers ``.safetensors`` files as a foreign format,
so ``ocf.open``, ``ocf.load_file``, ``ocf.list_variables``, ``ocf.restore``
by name and every ``ocf`` command read them. The header is checked as the
converter checks it (ocf.formats.safetensors) before any tensor is read;
tensors are read with ``pread``, never mapped, and a piece of a tensor
reads only its bytes. safetensors has no checksums, so ``verify`` checks
structure only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.errors import NotFoundError
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.formats.output import open_source
from ocf.formats.safetensors import (
    Entry,
    ocf_metadata,
    read_elements,
    read_header,
    read_tensor,
)
from ocf.objects.pieces import Piece
from ocf.objects.sources import ForeignFormat, TensorSummary, register_foreign_format

SUFFIX = ".safetensors"


class SafetensorsSource:
    """A safetensors file as an :class:`ocf.objects.sources.Source`."""

    format_name = "safetensors"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        del verify  # nothing to checksum
        self._path = os.fspath(path)
        self._file = open_source(self._path)
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            self.header = read_header(self._file, self._path, self.size)
            self._raw_header = os.pread(self._file.fileno(), self.header.data_start, 0)
        except BaseException:
            self._file.close()
            raise
        self._entries = {e.name: e for e in self.header.entries}

    @property
    def path(self) -> str:
        return self._path

    @property
    def object_graph(self) -> ObjectGraph | None:
        return None

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return ocf_metadata(self.header)

    def keys(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def entry(self, key: str) -> Entry:
        found = self._entries.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self._path, key=key)
        return found

    def summary(self, key: str) -> TensorSummary:
        entry = self.entry(key)
        return TensorSummary(entry.dtype.name, entry.shape, entry.dtype.numpy)

    def verify_tensor(self, key: str) -> None:
        self.read_tensor(key)  # safetensors holds no checksums: reading checks what can be checked

    def read_tensor(self, key: str) -> np.ndarray:
        return read_tensor(self._file.fileno(), self.entry(key), self.header, self._path)

    def get_tensor(self, key: str) -> np.ndarray:
        return self.read_tensor(key)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        flat = read_elements(self._file.fileno(), self.entry(key), self.header, self._path,
                             piece.begin, piece.end)
        return flat.reshape(piece.shape)

    @property
    def identity(self) -> tuple[int, int]:
        return len(self._raw_header), crc32c(self._raw_header)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SafetensorsSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_safetensors(path: str) -> bool:
    return path.lower().endswith(SUFFIX) and os.path.isfile(path)


def _open(path: str, verify: bool) -> SafetensorsSource:
    return SafetensorsSource(path, verify=verify)


SAFETENSORS = ForeignFormat("safetensors", is_safetensors, _open)
register_foreign_format(SAFETENSORS)
