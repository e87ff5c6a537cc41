"""A NumPy ``.npz`` archive as a :class:`ocf.format.source.Source`.

``ocf.open``, ``ocf.load_file``, ``ocf.list_variables`` and every ``ocf``
command read it through this class (the format's registry entry,
ocf.interop.npz, opens it). The archive and each member are checked as the
converter checks them (ocf.interop.npz.convert): sizes against the file, never pickle. A piece
of a tensor is read from the member's stream; pieces read in order share
one stream, so going through a deflated member piece by piece decompresses
it once. A Fortran-ordered member, whose C-order runs are not contiguous in
the file, is read whole once and kept for its next pieces. An npz archive has no checksums
beyond ZIP's CRC-32 of each member, which zipfile checks at the member's end.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from math import prod
from typing import IO, Any

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import MalformedError
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import TensorSummary
from ocf.interop.file_source import FileSource
from ocf.interop.npz.convert import (
    MEMBER_SUFFIX,
    ZIP_ERRORS,
    checked_members,
    read_member,
    read_npy_header,
)


@dataclass(frozen=True)
class _Member:
    info: zipfile.ZipInfo
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran: bool


@dataclass
class _Stream:
    """A member open for reading pieces in order: the next element it yields."""

    key: str
    file: IO[bytes]
    position: int


class NpzSource(FileSource[zipfile.ZipInfo]):
    """An ``.npz`` archive as an :class:`ocf.format.source.Source`."""

    format_name = "npz"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        # verify has nothing to switch off: zipfile checks each member's CRC-32 at its end
        super().__init__(path, verify=verify)
        self._members: dict[str, _Member] = {}
        self._stream: _Stream | None = None
        self._whole: tuple[str, np.ndarray] | None = None  # the last Fortran-ordered member

    def _read_entries(self) -> dict[str, zipfile.ZipInfo]:
        with self._guard():
            stat = os.fstat(self.file.fileno())
            self._identity = (stat.st_size, stat.st_mtime_ns & 0xFFFFFFFF)
            self._archive = zipfile.ZipFile(self.file)
            infos = checked_members(self._archive, self.path, stat.st_size)
        return {i.filename[: -len(MEMBER_SUFFIX)]: i for i in infos}

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return {}  # an npz archive holds none

    def _member(self, key: str) -> _Member:
        found = self._members.get(key)
        if found is not None:
            return found
        info = self.entry(key)
        with self._guard(key), self._archive.open(info) as f:
            dtype, shape, fortran = read_npy_header(f, self.path, key)
        self._members[key] = found = _Member(info, dtype, shape, fortran)
        return found

    @contextlib.contextmanager
    def _guard(self, key: str | None = None) -> Iterator[None]:
        """What a damaged archive makes zipfile raise, as MALFORMED naming the member."""
        try:
            yield
        except ZIP_ERRORS as exc:
            raise MalformedError(f"not a readable .npz (ZIP) archive: {exc}", path=self.path,
                                 key=key) from None

    def _view(self, key: str) -> TensorSummary:
        member = self._member(key)
        little = member.dtype.newbyteorder("<")
        return TensorSummary(key, dtypes.for_array(np.empty(0, little)), member.shape)

    def read_tensor(self, key: str) -> np.ndarray:
        member = self._member(key)
        with self._guard(key):
            return read_member(self._archive, member.info, self.path)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        member = self._member(key)
        if piece.size == prod(member.shape):
            return self.read_tensor(key)
        if member.fortran:  # C-order runs are scattered in the file: read it whole once
            if self._whole is None or self._whole[0] != key:
                self._whole = None  # freed before the next one is read
                self._whole = (key, self.read_tensor(key))
            result: np.ndarray = self._whole[1][piece.index].copy()
            return result
        with self._guard(key):
            stream = self._stream_at(key, member, piece.begin)
            length = piece.size * member.dtype.itemsize
            data = stream.file.read(length)
            if len(data) != length:
                raise MalformedError(f"member data ends before element {piece.end}",
                                     path=self.path, key=key)
            stream.position = piece.end
            if piece.end == prod(member.shape):  # zipfile checks the CRC-32 at the end
                stream.file.read(1)
        values = np.frombuffer(data, member.dtype).astype(member.dtype.newbyteorder("<"))
        return values.reshape(piece.shape)

    def _stream_at(self, key: str, member: _Member, element: int) -> _Stream:
        """The member's stream positioned at ``element``; reused when reading in order."""
        stream = self._stream
        if stream is None or stream.key != key or stream.position != element:
            self._close_stream()
            f = self._archive.open(member.info)
            read_npy_header(f, self.path, key)
            f.seek(f.tell() + element * member.dtype.itemsize)
            self._stream = stream = _Stream(key, f, element)
        return stream

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.file.close()
            self._stream = None

    @property
    def identity(self) -> tuple[int, int]:
        return self._identity

    def close(self) -> None:
        self._whole = None
        self._close_stream()
        self._archive.close()
        super().close()

