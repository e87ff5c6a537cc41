"""Writing one part of a multi-writer save (spec/parts.md).

Each process of a job that holds part of the training state writes its own
part into the shared checkpoint directory: shard files under its own fresh
write id, then a part index published atomically under the part's name
[R-PART-001] [R-PART-002]. Nothing here talks to other processes; whoever
runs the job (torch.distributed, JAX, MPI, Ray) tells every process its part
number, the part count and the save id, and lets one process merge
(:func:`ocf.distributed.parts.merge_parts`) once every part is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any, Literal

import numpy as np

from ocf.distributed.parts.naming import check_save, part_file_name
from ocf.distributed.parts.strips import box_strip, strip_chunk_size
from ocf.distributed.parts.tiling import box_tile
from ocf.format import dtypes
from ocf.format.errors import InvalidError, OCFError
from ocf.format.index.decoding import PART_FEATURE
from ocf.format.object_graph import Node, encode_graph
from ocf.format.storage.backend import backend_of
from ocf.format.storage.location import StorageOptions, locate
from ocf.format.writer import Writer
from ocf.v1 import index_pb2


@dataclass(frozen=True)
class LocalBox:
    """The box of a partitioned tensor that one process holds: its elements and where
    they sit in the global tensor. (Not an index's stored slice,
    :class:`ocf.format.index.model.Slice`, whose shape is the box's own; until 0.3.0
    this class was named ``Slice`` too, a name kept as an alias.)

    ``value`` holds the elements of the box that starts at ``start`` in the
    tensor of global shape ``shape``; the parts of a save together hold every
    element exactly once [R-PART-005].

    Examples:
        >>> from ocf.distributed.parts import LocalBox
        >>> rows = LocalBox(table[4:8], start=(4, 0), shape=(8, 5))  # rows 4..7 of an 8 x 5 tensor
    """

    value: object  # an array, or anything np.asarray accepts
    start: Sequence[int]
    shape: Sequence[int]


Slice = LocalBox  # the name before 0.3.0

#: The tiles a part stores its boxes in: None (each box one slice), a grid of tiles
#: of about this many bytes, or ``"strips"`` (:mod:`ocf.distributed.parts.strips`).
TileBytes = int | Literal["strips"] | None


class PartWriter(Writer):
    """Writes part ``part`` of the ``parts`` parts of save ``save_id`` into ``path``.

    Use it like :class:`ocf.Writer` (``write``, ``write_slice``, then
    ``commit``, or as a context manager). A tensor may be written whole by
    one part, or in slices by one or several parts; only part 0 may carry
    metadata and an object graph, which may name tensors of any part
    [R-PART-005]. Options are those of :class:`ocf.Writer` for the directory
    form (compression, chunk_size, max_shard_size, threads, write_id), and
    ``tile_bytes``.

    ``tile_bytes="strips"`` stores every box of a tensor of rank 2 or more as
    strips the box's height, and every tensor in chunks of its own size, the
    power of two that cuts it into about 4,096 chunks, from 4 KiB up to
    ``chunk_size`` (:mod:`ocf.distributed.parts.strips`): the layout that a
    load partitioned otherwise than the writers reads least of, along any
    dimension (what ``ocf.distributed`` saves use by default).

    An int ``tile_bytes`` (default None: no tiles) stores every box of a tensor of
    rank 2 or more, and every such tensor written whole with more than one
    element, as a grid of tiles of about that many bytes, each tile a slice of
    its own (:mod:`ocf.distributed.parts.tiling`). The grid depends on the tensor's global
    shape only and splits every dimension into about the same number of
    tiles, so that a reader that wants any band of the tensor, along any
    dimension, reads the tiles it overlaps and not every chunk of the boxes
    (a box in C order is one run of chunks). A tensor gets at most
    :data:`~ocf.distributed.parts.tiling.MAX_GRID_TILES` tiles in its grid (larger tiles
    for larger tensors); a box at most its share of
    :data:`~ocf.distributed.parts.tiling.TILE_BUDGET`. The cost is in the index: one slice
    record per tile (a block row, its chunk checksums, and a start and an
    extent per dimension). Tensors of rank 0 or 1 and byte strings are not
    tiled; ``chunk_size`` still chunks each tile.

    It uses only the public extension points of :class:`ocf.Writer`: its
    slices need not tile (:attr:`slices_must_tile`), its index is published
    under its part file name (:attr:`index_name`) and deletes nothing, and
    :meth:`finish_index` marks it a part index.

    Examples:
        >>> from ocf.distributed.parts import PartWriter
        >>> with PartWriter("sharded", part=rank, parts=world, save_id=save_id) as writer:
        ...     writer.write_slice("table", rows, start=(4 * rank, 0), shape=(8, 5))
    """

    # Other parts hold the rest of a tensor: the boxes of this part need only be
    # disjoint; the merge checks that all parts tile the shape [R-PART-001].
    slices_must_tile = False

    def __init__(self, path: str | os.PathLike[str], *, part: int, parts: int, save_id: str,
                 metadata: Mapping[str, object] | None = None,
                 storage_options: StorageOptions | None = None, tile_bytes: TileBytes = None,
                 **options: object) -> None:
        check_save(save_id, parts)
        if tile_bytes is not None and tile_bytes != "strips" and (
                isinstance(tile_bytes, bool) or not isinstance(tile_bytes, int) or tile_bytes < 1):
            raise InvalidError(f"tile_bytes must be a positive int, 'strips' or None, "
                               f"not {tile_bytes!r}")
        self.tile_bytes = tile_bytes
        self._keys: set[str] = set()  # written so far, whole or in slices
        if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < parts:
            raise InvalidError(f"part number {part!r} is not in [0, {parts})",
                               requirement="R-PART-001")
        if metadata and part != 0:
            raise InvalidError("only part 0 carries the checkpoint's metadata", path=path,
                               requirement="R-PART-005")
        self.part, self.parts, self.save_id = part, parts, save_id
        self._part_graph: list[Node] | None = None
        target = locate(path, storage_options)
        backend_of(target).make_directory(target)  # every part may be the first to need it
        super().__init__(target, layout="directory", metadata=metadata,
                         **options)  # type: ignore[arg-type]

    @property
    def file_name(self) -> str:
        """The name under which this part's index is published."""
        return part_file_name(self.save_id, self.part)

    @property
    def index_name(self) -> str:
        return self.file_name

    def write(self, key: str, array: np.ndarray, *, chunk_size: int | None = None) -> None:
        """Store ``array`` whole under ``key``: in tiles when ``tile_bytes`` asks for them;
        in chunks of ``chunk_size`` bytes (None: the tensor's, with strips, or the
        writer's)."""
        array = np.asarray(array)
        origin = (0,) * array.ndim
        if key not in self._keys and _wants_tiles(self.tile_bytes, array, origin, array.shape):
            self.write_slice(key, array, origin, array.shape, chunk_size=chunk_size)
        else:
            super().write(key, array, chunk_size=chunk_size or _chunk_size_of(
                self, array, array.shape))
            self._keys.add(key)

    def write_slice(self, key: str, array: np.ndarray, start: Sequence[int],
                    shape: Sequence[int], *, chunk_size: int | None = None) -> None:
        """Store ``array`` as the box at ``start`` of the tensor ``key`` of global
        ``shape``; as tiles, each a slice, when ``tile_bytes`` asks for them; in chunks
        of ``chunk_size`` bytes (None: the tensor's, with strips, or the writer's).

        A box without elements (the local shard of a rank that an uneven split
        leaves empty) stores nothing: the other parts' boxes tile the tensor.
        Of a tensor without elements, which is stored whole by one part
        [R-PART-001], the box at the origin stores the whole tensor and any
        other box nothing, so the part holding the origin box holds it.
        """
        array = np.asarray(array)
        if array.size == 0 and _inside(array, start, shape):
            if prod(int(d) for d in shape) == 0 and not any(int(b) for b in start):
                self.write(key, np.empty(tuple(int(d) for d in shape), array.dtype))
            return
        chunk_size = chunk_size or _chunk_size_of(self, array, shape)
        if not _wants_tiles(self.tile_bytes, array, start, shape):
            super().write_slice(key, array, start, shape, chunk_size=chunk_size)
            self._keys.add(key)
            return
        origin = tuple(int(x) for x in start)
        box = (origin, array.shape)
        if self.tile_bytes == "strips":
            tile = box_strip(box, shape, array.dtype.itemsize, chunk_size or self.chunk_size)
        else:
            tile = box_tile(box, shape, array.dtype.itemsize, int(self.tile_bytes or 1))
        if tile is None:
            super().write_slice(key, array, start, shape, chunk_size=chunk_size)
        else:
            self.write_tiles(key, array, origin, shape, tile, chunk_size=chunk_size)
        self._keys.add(key)

    def write_tensors(self, tensors: Mapping[str, object]) -> None:
        """Write each value: whole for an array, as its box for a :class:`LocalBox`."""
        for key, value in tensors.items():
            if isinstance(value, LocalBox):
                self.write_slice(key, np.asarray(value.value), value.start, value.shape)
            else:
                self.write(key, np.asarray(value))

    def set_metadata(self, metadata: Mapping[str, object]) -> None:
        """Give the checkpoint its metadata (part 0 only) [R-PART-005]."""
        if metadata and self.part != 0:
            raise InvalidError("only part 0 carries the checkpoint's metadata",
                               path=self.target, requirement="R-PART-005")
        super().set_metadata(metadata)

    def set_object_graph(self, nodes: Sequence[Node]) -> None:
        """Give the checkpoint its object graph (part 0 only; checked at the merge)."""
        if self.part != 0:
            raise InvalidError("only part 0 carries the checkpoint's object graph",
                               path=self.target, requirement="R-PART-005")
        self._part_graph = list(nodes)

    def finish_index(self, index: index_pb2.Index) -> None:
        """Mark the index a part index of this save [R-PART-001]."""
        index.header.required_features.append(PART_FEATURE)
        index.part.save_id = self.save_id
        index.part.number = self.part
        index.part.count = self.parts
        if self._part_graph is not None:
            # Its attribute keys may name other parts' tensors: the merge checks it.
            encode_graph(self._part_graph, index.object_graph)


def write_part(path: str | os.PathLike[str], tensors: Mapping[str, object], *, part: int,
               parts: int, save_id: str, metadata: Mapping[str, object] | None = None,
               object_graph: Sequence[Node] | None = None, **options: Any) -> None:
    """Write and publish one part: ``tensors`` maps keys to arrays or :class:`LocalBox`.

    Examples:
        >>> from ocf.distributed.parts import LocalBox, write_part
        >>> write_part("sharded", {"table": LocalBox(table[4:8], start=(4, 0), shape=(8, 5))},
        ...            part=1, parts=2, save_id=save_id)
    """
    writer = PartWriter(path, part=part, parts=parts, save_id=save_id, metadata=metadata,
                        **options)
    with writer:
        writer.write_tensors(tensors)
        if object_graph is not None:
            writer.set_object_graph(object_graph)


def _chunk_size_of(writer: PartWriter, array: np.ndarray, shape: Sequence[int]) -> int | None:
    """The chunk size of the tensor of global ``shape`` that ``array`` is a box of:
    its own with strips (:func:`~ocf.distributed.parts.strips.strip_chunk_size`),
    the writer's otherwise (None) and for byte strings."""
    if writer.tile_bytes != "strips" or not _fixed_size(array):
        return None
    try:
        nbytes = prod(int(d) for d in shape) * array.dtype.itemsize
    except (TypeError, ValueError):  # refused by the write as ever
        return None
    return strip_chunk_size(nbytes, writer.chunk_size)


def seal_part(path: str | os.PathLike[str], tensors: Mapping[str, object], *, part: int,
              parts: int, save_id: str, metadata: Mapping[str, object] | None = None,
              object_graph: Sequence[Node] | None = None, **options: Any) -> bytes:
    """Write one part's shards durably and return its part index unpublished: the bytes
    the merger receives in-band (``merge_parts(..., part_indexes=...)``) instead of a
    part file [R-PART-009]. ``tensors`` and the options are those of :func:`write_part`.

    Examples:
        >>> from ocf.distributed.parts import seal_part
        >>> part_index = seal_part("sharded", {"w": w}, part=rank, parts=world, save_id=save_id)
    """
    writer = PartWriter(path, part=part, parts=parts, save_id=save_id, metadata=metadata,
                        **options)
    try:
        writer.write_tensors(tensors)
        if object_graph is not None:
            writer.set_object_graph(object_graph)
    except BaseException:
        writer.abort()
        raise
    return writer.seal()


def _wants_tiles(tile_bytes: TileBytes, array: np.ndarray, start: Sequence[int],
                 shape: Sequence[int]) -> bool:
    """Whether to store this box in tiles: asked for, rank 2 or more, a fixed-size
    dtype, and a valid box of more than one element (anything else goes to
    :class:`ocf.Writer` untouched, which stores it or refuses it as ever)."""
    if tile_bytes is None or array.ndim < 2 or array.size <= 1:
        return False
    return _fixed_size(array) and _inside(array, start, shape)


def _fixed_size(array: np.ndarray) -> bool:
    """Whether ``array`` has a dtype of fixed-size elements (not byte strings)."""
    try:
        return not dtypes.for_array(array).is_bytes
    except (OCFError, TypeError, ValueError):
        return False


def _inside(array: np.ndarray, start: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether ``array`` is a box (possibly empty) inside ``shape`` at ``start``."""
    try:
        start, shape = tuple(int(x) for x in start), tuple(int(x) for x in shape)
    except (TypeError, ValueError):
        return False
    return len(start) == len(shape) == array.ndim and all(
        b >= 0 and d >= 0 and b + e <= d for b, e, d in zip(start, array.shape, shape))
