"""What the Sources of one-file foreign formats (safetensors, npz) have in common.

Such a checkpoint is one local file: opened once without blocking on a FIFO
(:func:`ocf.formats.output.open_source`), its table of tensors read and
checked by the format's own code when it opens (the file is closed again if
that fails), then each tensor found by its key in that table. It has no
object graph, and nothing is mapped: every tensor is read into a new array,
so reading one is also how it is verified (what the format can check is
checked while reading). A format says how its table is read
(:meth:`FileSource._read_entries`) and how a tensor is described and read;
the rest of :class:`ocf.objects.sources.Source` is here.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

import numpy as np

from ocf.format.errors import NotFoundError
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.formats.output import open_source
from ocf.objects.pieces import Piece
from ocf.objects.sources import TensorSummary

EntryT = TypeVar("EntryT")
SourceT = TypeVar("SourceT", bound="FileSource[Any]")


class FileSource(ABC, Generic[EntryT]):
    """A foreign checkpoint held in one file, as an :class:`ocf.objects.sources.Source`;
    ``EntryT`` is the format's record of one tensor."""

    format_name: str

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        # Nothing to switch off: what the format can check is checked as it is read.
        del verify
        self._path = os.fspath(path)
        self.file = open_source(self._path)
        try:
            self._entries = dict(self._read_entries())
        except BaseException:
            self.file.close()
            raise

    @classmethod
    def opened(cls: type[SourceT], path: str, verify: bool) -> SourceT:
        """The file at ``path`` open as this source: a ForeignFormat's ``open``."""
        return cls(path, verify=verify)

    @abstractmethod
    def _read_entries(self) -> Mapping[str, EntryT]:
        """Read and check the table of tensors of :attr:`file`: each key's entry, in order."""

    @property
    def path(self) -> str:
        return self._path

    @property
    def object_graph(self) -> ObjectGraph | None:
        return None

    @property
    @abstractmethod
    def metadata(self) -> dict[str, MetadataValue]: ...

    @property
    @abstractmethod
    def identity(self) -> tuple[int, int]: ...

    def keys(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def entry(self, key: str) -> EntryT:
        """The format's record of tensor ``key``; NotFoundError if there is none."""
        found = self._entries.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self._path, key=key)
        return found

    @abstractmethod
    def summary(self, key: str) -> TensorSummary: ...

    @abstractmethod
    def read_tensor(self, key: str) -> np.ndarray: ...

    @abstractmethod
    def read_piece(self, key: str, piece: Piece) -> np.ndarray: ...

    def get_tensor(self, key: str) -> np.ndarray:
        return self.read_tensor(key)  # read, never mapped

    def verify_tensor(self, key: str) -> None:
        self.read_tensor(key)  # reading checks what the format can check

    def close(self) -> None:
        self.file.close()

    def __enter__(self: SourceT) -> SourceT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def has_suffix(path: str, suffix: str) -> bool:
    """Whether ``path`` is a regular file whose name ends with ``suffix``, in any case."""
    return path.lower().endswith(suffix) and os.path.isfile(path)

