"""One read interface for every checkpoint format OCF reads.

:class:`Source` is what ``ocf.open`` returns, for an OCF checkpoint
(:class:`ocf.Reader` is a Source) and for every foreign format
(ocf.interop: safetensors files, npz archives, TensorFlow bundles): a
read-only mapping from tensor key to a :class:`TensorView` (its key, its
dtype as an OCF :class:`~ocf.format.dtypes.Dtype`, its shape), the
checkpoint's ``metadata`` and object graph, and the tensors themselves
(``get_tensor``, ``read_tensor``, ``get_slice``, piece by piece with
``read_piece``). Restoring, loading by name and every ``ocf`` command read
through it, so the same code serves every format.

A format that has no OCF dtype for a tensor (TensorFlow's quantized and
sub-byte types) describes it with :func:`ocf.format.dtypes.foreign`: a
Dtype with TensorFlow's name and the NumPy dtype its values are read as.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from types import TracebackType
from typing import Protocol, TypeVar

import numpy as np

from ocf.format.dtypes import Dtype
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.format.pieces import Piece
from ocf.format.slicing import as_array_index, select
from ocf.format.storage.location import ObjectPath

SourceT = TypeVar("SourceT", bound="Source[TensorView]")


class TensorView(Protocol):
    """What a tensor is without reading it: ``source[key]``."""

    @property
    def key(self) -> str: ...

    @property
    def dtype(self) -> Dtype: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class TensorSummary:
    """A :class:`TensorView` of a format that keeps nothing more of a tensor."""

    key: str
    dtype: Dtype
    shape: tuple[int, ...]


ViewT = TypeVar("ViewT", bound=TensorView, covariant=True)


class Source(Mapping[str, ViewT]):
    """A checkpoint open for reading: a read-only mapping from key to :class:`TensorView`.

    A format whose views carry more (:class:`ocf.Reader`'s are
    :class:`~ocf.format.index.model.TensorInfo`) names their type as ``ViewT``;
    code that reads any format takes a ``Source[TensorView]``.

    Examples:
        >>> with ocf.open("model.safetensors") as checkpoint:  # or .ocf, .npz, a TF prefix
        ...     print(checkpoint["step"].dtype.name, checkpoint["step"].shape)
        ...     step = int(checkpoint.get_tensor("step"))
    """

    #: The checkpoint's format, for people: "OCF", "TensorFlow", "safetensors", "npz".
    format_name: str

    #: The checkpoint's path (for OCF, maybe a URL), for messages.
    path: str | os.PathLike[str] | ObjectPath

    @property
    @abstractmethod
    def metadata(self) -> dict[str, MetadataValue]:
        """The checkpoint's metadata as OCF holds it (converting the checkpoint to
        OCF writes exactly this); empty when the format has none."""

    @property
    def object_graph(self) -> ObjectGraph | None:
        """The checked object graph, or None for a name-based checkpoint."""
        return None

    @property
    @abstractmethod
    def identity(self) -> tuple[int, int]:
        """Two numbers equal for every opening of one checkpoint and different (but
        for a collision) once it is replaced (ocf.objects.read_ahead)."""

    def summary(self, key: str) -> ViewT:
        """The key, dtype and shape of ``key``: ``self[key]``; NotFoundError if there is
        no such tensor."""
        return self[key]

    @abstractmethod
    def read_tensor(self, key: str) -> np.ndarray:
        """A new, writable array holding tensor ``key``."""

    def get_tensor(self, key: str) -> np.ndarray:
        """Tensor ``key``, possibly a read-only view of the file (no copy)."""
        return self.read_tensor(key)

    def verify_tensor(self, key: str) -> None:
        """Raise what reading ``key`` would raise for its stored bytes (a checksum),
        keeping nothing in memory."""
        self.read_tensor(key)

    @abstractmethod
    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        """``tensor[piece.index]`` as a new array, reading little more than its bytes
        (ocf.format.pieces). Reading a tensor's pieces in order checks what reading
        it whole checks."""

    def get_slice(self, key: str, index: object) -> np.ndarray:
        """``tensor[index]`` for basic NumPy indices (ints, slices, Ellipsis), as a new
        array, reading only the rows of the first axis that the index spans."""
        shape = self[key].shape
        selection = select(index, shape)
        start, extent = selection.box
        if not shape or prod(extent) == 0:
            whole: np.ndarray = self.read_tensor(key)[as_array_index(tuple(
                slice(s, s + e) for s, e in zip(start, extent)))]
            small: np.ndarray = selection.apply(whole).copy()
            return small
        inner = prod(shape[1:])
        first, count = start[0], extent[0]
        piece = Piece(first * inner, (first + count) * inner, (slice(first, first + count),),
                      (count, *shape[1:]))
        rows = self.read_piece(key, piece)
        box = rows[as_array_index((slice(None), *(slice(s, s + e) for s, e in
                                                   zip(start[1:], extent[1:]))))]
        result: np.ndarray = selection.apply(box).copy()
        return result

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self: SourceT) -> SourceT:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


#: A Source of any format, for code that reads them all.
AnySource = Source[TensorView]
