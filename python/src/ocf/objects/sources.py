"""What restoring and name-based loading read from: an OCF checkpoint or a foreign one.

:func:`ocf.restore`, :class:`ocf.Saver`, :func:`ocf.list_variables` and
:func:`ocf.load_variable` need only a few things of a checkpoint: its
tensor keys, each tensor's dtype and shape, the tensors themselves, and
the object graph (spec/objects.md) when there is one. :class:`Source` is
that interface. An OCF checkpoint provides it through :class:`ocf.Reader`;
a TensorFlow checkpoint through ``ocf.tensorflow.source``, which maps
TensorFlow's object graph onto OCF's, so the same restore code, with the
same status assertions, serves both; safetensors files and npz archives
through ``ocf.formats.safetensors_source`` and ``ocf.formats.npz_source``.
``ocf.open``, ``ocf.load_file`` and every ``ocf`` command read through it
too, the commands piece by piece (:meth:`Source.read_piece`,
ocf.objects.pieces) so that memory stays bounded.

:func:`open_source` picks by what is at the path: an OCF file (its magic
bytes) or directory (``index.ocf``) is OCF; otherwise a TensorFlow prefix
(``PREFIX.index`` exists) or a directory with TensorFlow's ``checkpoint``
state file is TensorFlow; a ``.safetensors`` or ``.npz`` file is what its
suffix says. Foreign formats are registered by their adapters
(:func:`register_foreign_format`, done by ``import ocf``); this module
knows none of them. A URL (``s3://...``) is always OCF, read through fsspec
with the ``storage_options`` given: other formats are read from local files only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE_MAGIC
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.format.reader import Reader
from ocf.format.storage.location import StorageOptions, url_scheme
from ocf.objects.pieces import Piece


@dataclass(frozen=True)
class TensorSummary:
    """What a tensor is without reading it."""

    dtype: str  # an OCF dtype name ("float32", "bytes"), or the source's own for others
    shape: tuple[int, ...]
    numpy: np.dtype[np.generic] | None  # the dtype read_tensor returns; None for byte strings


class Source(Protocol):
    """A checkpoint opened for restoring and loading by name."""

    @property
    def path(self) -> str:
        """The checkpoint's path, for messages."""

    @property
    def object_graph(self) -> ObjectGraph | None:
        """The checked object graph, or None for a name-based checkpoint."""

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        """The checkpoint's metadata as OCF holds it (converting the checkpoint to
        OCF writes exactly this); empty when the format has none."""

    @property
    def format_name(self) -> str:
        """The checkpoint's format, for people: "OCF", "TensorFlow", "safetensors"..."""

    def keys(self) -> list[str]:
        """Every tensor key."""

    def __contains__(self, key: object) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...

    def summary(self, key: str) -> TensorSummary:
        """The dtype and shape of ``key``; NotFoundError if there is no such tensor."""

    def read_tensor(self, key: str) -> np.ndarray:
        """A new, writable array holding tensor ``key``."""

    def get_tensor(self, key: str) -> np.ndarray:
        """Tensor ``key``, possibly a read-only view of the file (no copy)."""

    def verify_tensor(self, key: str) -> None:
        """Raise what reading ``key`` would raise for its stored bytes (a checksum),
        keeping nothing in memory."""

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        """``tensor[piece.index]`` as a new array, reading little more than its bytes
        (see ocf.objects.pieces). Reading a tensor's pieces in order checks what
        reading it whole checks."""

    @property
    def identity(self) -> tuple[int, int]:
        """The length and CRC-32C of the index as opened: equal for every opening of
        one checkpoint, different (but for a CRC collision) once it is replaced."""

    def close(self) -> None: ...

    def __enter__(self) -> Source: ...

    def __exit__(self, *exc: object) -> None: ...


class OCFSource:
    """An OCF checkpoint as a :class:`Source`."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    @property
    def path(self) -> str:
        return str(self.reader.path)

    @property
    def object_graph(self) -> ObjectGraph | None:
        return self.reader.object_graph

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return self.reader.metadata

    format_name = "OCF"

    def keys(self) -> list[str]:
        return list(self.reader)

    def __contains__(self, key: object) -> bool:
        return key in self.reader

    def __iter__(self) -> Iterator[str]:
        return iter(self.reader)

    def summary(self, key: str) -> TensorSummary:
        info = self.reader[key]
        return TensorSummary(info.dtype.name, info.shape, info.dtype.numpy)

    def read_tensor(self, key: str) -> np.ndarray:
        return self.reader.read_tensor(key)

    def get_tensor(self, key: str) -> np.ndarray:
        return self.reader.get_tensor(key)

    def verify_tensor(self, key: str) -> None:
        self.reader.verify_tensor(key)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        return self.reader.get_slice(key, piece.index, mapped=False)

    @property
    def identity(self) -> tuple[int, int]:
        return self.reader.index_identity

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> OCFSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_ocf_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an OCF file (by its magic bytes) or checkpoint directory."""
    target = Path(path)
    if target.is_dir():
        return (target / INDEX_FILE_NAME).is_file()
    if not target.is_file():  # opening a FIFO to peek at it would block
        return False
    try:
        with target.open("rb") as f:
            return f.read(len(PREAMBLE_MAGIC)) == PREAMBLE_MAGIC
    except OSError:
        return False


@dataclass(frozen=True)
class ForeignFormat:
    """A checkpoint format other than OCF that restoring and loading by name read.

    Registered by the adapter that reads it (``ocf.tensorflow`` registers
    TensorFlow's prefixes when imported, which ``import ocf`` does), so this
    layer needs no knowledge of any foreign format.
    """

    name: str
    is_checkpoint: Callable[[str], bool]  # called with a local path that is not OCF
    open: Callable[[str, bool], Source]  # (path, verify)
    # The latest checkpoint a directory's own state file names (TensorFlow's
    # ``checkpoint``), for ocf.latest_checkpoint; None for a format without one.
    latest: Callable[[str], str | None] | None = None


_FOREIGN_FORMATS: list[ForeignFormat] = []


def register_foreign_format(found: ForeignFormat) -> None:
    """Let :func:`open_source` open checkpoints of ``found``'s format (once per name)."""
    if all(f.name != found.name for f in _FOREIGN_FORMATS):
        _FOREIGN_FORMATS.append(found)


def foreign_format(path: str | os.PathLike[str]) -> ForeignFormat | None:
    """The registered foreign format of the local checkpoint at ``path``, if it is one.

    URLs and OCF checkpoints are never foreign.
    """
    if url_scheme(path) is not None or is_ocf_checkpoint(path):
        return None
    text = os.fspath(path)
    return next((f for f in _FOREIGN_FORMATS if f.is_checkpoint(text)), None)


def foreign_latest(directory: str) -> str | None:
    """The latest checkpoint a registered format's state file in ``directory`` names."""
    for found in _FOREIGN_FORMATS:
        latest = None if found.latest is None else found.latest(directory)
        if latest is not None:
            return latest
    return None


def open_source(path: str | os.PathLike[str], *, verify: bool = True,
                storage_options: StorageOptions | None = None) -> Source:
    """The checkpoint at ``path``, OCF or a registered foreign one, opened as a :class:`Source`.

    ``storage_options`` go to fsspec when ``path`` is a URL (``s3://...``).
    """
    found = foreign_format(path)
    if found is not None:
        return found.open(os.fspath(path), verify)
    # Also when nothing is there: the OCF reader reports what is missing.
    return OCFSource(Reader(path, verify=verify, storage_options=storage_options))
