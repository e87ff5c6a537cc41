"""What one-file foreign formats (safetensors, npz) have in common: Source and Format.

Such a checkpoint is one local file: opened once without blocking on a FIFO
(:func:`ocf.interop.output.open_source`), its table of tensors read and
checked by the format's own code when it opens (the file is closed again if
that fails), then each tensor found by its key in that table. It has no
object graph, and nothing is mapped: every tensor is read into a new array,
so reading one is also how it is verified (what the format can check is
checked while reading). A format says how its table is read
(:meth:`FileSource._read_entries`) and how a tensor is described and read;
the rest of :class:`ocf.format.source.Source` is here. :class:`FileFormat`
is such a format's registry entry: found by its suffix, opened as its
FileSource, converted by its module's ``to_ocf`` and ``from_ocf``.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from ocf.format.errors import NotFoundError
from ocf.format.metadata import MetadataValue
from ocf.format.source import Source, TensorSummary
from ocf.interop.base import LocalFormat
from ocf.interop.output import open_source

EntryT = TypeVar("EntryT")


class FileSource(Source[TensorSummary], Generic[EntryT]):
    """A foreign checkpoint held in one file, as an :class:`ocf.format.source.Source`;
    ``EntryT`` is the format's record of one tensor."""

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        # Nothing to switch off: what the format can check is checked as it is read.
        del verify
        self.path: str = os.fspath(path)
        self.file = open_source(self.path)
        self._views: dict[str, TensorSummary] = {}
        try:
            self._entries = dict(self._read_entries())
        except BaseException:
            self.file.close()
            raise

    @abstractmethod
    def _read_entries(self) -> Mapping[str, EntryT]:
        """Read and check the table of tensors of :attr:`file`: each key's entry, in order."""

    @property
    @abstractmethod
    def metadata(self) -> dict[str, MetadataValue]: ...

    @property
    @abstractmethod
    def identity(self) -> tuple[int, int]: ...

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: str) -> TensorSummary:
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = self._view(key)
        return found

    @abstractmethod
    def _view(self, key: str) -> TensorSummary:
        """The key, OCF dtype and shape of tensor ``key``; NotFoundError if there is none."""

    def entry(self, key: str) -> EntryT:
        """The format's record of tensor ``key``; NotFoundError if there is none."""
        found = self._entries.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self.path, key=key)
        return found

    # get_tensor and verify_tensor read the tensor (Source's defaults): nothing is
    # mapped, and reading checks what the format can check.

    def close(self) -> None:
        self.file.close()


def has_suffix(path: str, suffix: str) -> bool:
    """Whether ``path`` is a regular file whose name ends with ``suffix``, in any case."""
    return path.lower().endswith(suffix) and os.path.isfile(path)



class FileFormat(LocalFormat):
    """A format held in one local file whose name ends with one of :attr:`suffixes`."""

    #: The Source a file of the format opens as.
    source: type[FileSource[Any]]

    def detect(self, path: str) -> bool:
        return any(has_suffix(path, suffix) for suffix in self.suffixes)
