"""Encoding a checkpoint index: tensors and their blocks as the index's columns.

The one encoder of the tensor table and the block table (spec/format.md,
"The index"), used by the writer for the tensors it stores and by the merge
of parts for the tensors the parts stored (spec/parts.md).
:class:`TableBuilder` gathers the columns in plain lists, so that a writer
of many small tensors appends numbers instead of building an object per
tensor; blocks come as the decoder's :class:`Block` (what is encoded is
what a reader gets back) or, for many small ones, as columns. Nothing is
checked here: callers encode only what they checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, pairwise
from typing import Any, TypeVar

import numpy as np

from ocf.format.codecs.none import NONE
from ocf.format.errors import OutOfMemoryError
from ocf.format.index.model import Block
from ocf.format.slicing import Box
from ocf.v1 import index_pb2

_Item = TypeVar("_Item", int, bool)


class TableBuilder:
    """The tensor and block tables of an index, gathered column by column.

    Tensors are rows numbered in the order they are added; blocks may be
    added in any order (the slices of one tensor written between other
    tensors), each naming its tensor's row. :meth:`fill` lays the blocks out
    in the order of their tensors, and a tensor's slices in the order they
    were added, which is the order the index requires.
    """

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.dtype_codes: list[int] = []
        self.shapes: list[tuple[int, ...]] = []
        self._sliced: list[bool] = []
        # One entry per block, in the order blocks were added.
        self._owners: list[int] = []
        self._shards: list[int] = []
        self._offsets: list[int] = []
        self._stored_lengths: list[int] = []
        self._raw_lengths: list[int] = []
        self._codecs: list[int] = []
        self._shuffles: list[bool] = []
        self._chunk_sizes: list[int] = []
        # Variable-length lists per block, flattened, with their lengths.
        self._crcs = _Ragged()
        self._stored_chunk_lengths = _Ragged()
        self._starts = _Ragged()
        self._extents = _Ragged()

    def __len__(self) -> int:
        return len(self.keys)

    def add_tensor(self, key: str, dtype_code: int, shape: tuple[int, ...],
                   sliced: bool = False) -> int:
        """Add a tensor row, stored whole or (``sliced``) in slices; its row number."""
        self.keys.append(key)
        self.dtype_codes.append(dtype_code)
        self.shapes.append(shape)
        self._sliced.append(sliced)
        return len(self.keys) - 1

    def add_tensors(self, keys: list[str], dtype_codes: list[int],
                    shapes: list[tuple[int, ...]]) -> int:
        """Add rows of tensors stored whole; the row number of the first."""
        first = len(self.keys)
        self.keys.extend(keys)
        self.dtype_codes.extend(dtype_codes)
        self.shapes.extend(shapes)
        self._sliced.extend([False] * len(keys))
        return first

    def add_block(self, row: int, block: Block, box: tuple[Sequence[int], Sequence[int]]
                  | None = None, shard_base: int = 0) -> None:
        """Add ``block`` of the tensor at ``row``: the whole tensor, or the slice whose
        ``box`` is (start, extent); its shard number plus ``shard_base`` (the merge of
        parts lists the shards of every part in one table)."""
        self._owners.append(row)
        self._shards.append(block.shard + shard_base)
        self._offsets.append(block.offset)
        self._stored_lengths.append(block.stored_length)
        self._raw_lengths.append(block.raw_length)
        self._codecs.append(block.compression.value)
        self._shuffles.append(block.byte_shuffle)
        self._chunk_sizes.append(block.chunk_size)
        self._crcs.add(block.chunk_crcs)
        # Compressed blocks: where each chunk starts, then the block's end; raw ones: none.
        self._stored_chunk_lengths.add([end - start for start, end
                                        in pairwise(block.chunk_starts)])
        self._starts.add(box[0] if box is not None else ())
        self._extents.add(box[1] if box is not None else ())

    def add_plain_blocks(self, rows: Sequence[int], shard: int, offsets: Sequence[int],
                         sizes: Sequence[int], crcs: Sequence[int],
                         boxes: Sequence[Box | None]) -> None:
        """Add uncompressed blocks of one chunk each (a checksum each), all in ``shard``:
        the many small tensors of a batch; ``boxes`` holds the (start, extent) of each
        block that is a slice, None for a tensor stored whole."""
        count = len(rows)
        self._owners.extend(rows)
        self._shards.extend([shard] * count)
        self._offsets.extend(offsets)
        self._stored_lengths.extend(sizes)
        self._raw_lengths.extend(sizes)
        self._codecs.extend([NONE.value] * count)
        self._shuffles.extend([False] * count)
        self._chunk_sizes.extend([0] * count)
        self._crcs.add_each(crcs, 1, count)
        self._stored_chunk_lengths.add_each((), 0, count)
        if not any(boxes):  # tensors stored whole, the common batch
            self._starts.add_each((), 0, count)
            self._extents.add_each((), 0, count)
            return
        for box in boxes:
            self._starts.add(box[0] if box is not None else ())
            self._extents.add(box[1] if box is not None else ())

    def add_tile_blocks(self, row: int, shard: int, offsets: np.ndarray, size: int,
                        chunk_size: int, crcs: Sequence[int], starts: np.ndarray,
                        extents: np.ndarray) -> None:
        """Add uncompressed slices of the tensor at ``row``, all in ``shard`` and of
        ``size`` bytes each, in chunks of ``chunk_size`` (0: one chunk): ``crcs`` holds
        the checksums of all their chunks in order, ``starts`` and ``extents`` a row
        per slice."""
        count = len(offsets)
        self._owners.extend([row] * count)
        self._shards.extend([shard] * count)
        self._offsets.extend(offsets.tolist())
        self._stored_lengths.extend([size] * count)
        self._raw_lengths.extend([size] * count)
        self._codecs.extend([NONE.value] * count)
        self._shuffles.extend([False] * count)
        self._chunk_sizes.extend([chunk_size] * count)
        self._crcs.add_each(crcs, len(crcs) // max(1, count), count)
        self._stored_chunk_lengths.add_each((), 0, count)
        self._starts.add_each(starts.ravel().tolist(), starts.shape[1], count)
        self._extents.add_each(extents.ravel().tolist(), extents.shape[1], count)

    def fill(self, index: index_pb2.Index) -> None:
        """Append the gathered tensors and blocks to the tables of ``index``."""
        owners = np.asarray(self._owners, dtype=np.int64)
        # Blocks by tensor, each tensor's in the order added (a stable sort); written
        # tensor after tensor they already are, and nothing moves.
        order = None
        if owners.size > 1 and bool((owners[1:] < owners[:-1]).any()):
            order = np.argsort(owners, kind="stable")
        table = index.tensors
        counts = np.bincount(owners, minlength=len(self.keys)) if owners.size else \
            np.zeros(len(self.keys), np.int64)
        columns = index.blocks
        for field, values, name in (
            (table.keys, self.keys, "tensor keys"),
            (table.dtypes, self.dtype_codes, "tensor dtypes"),
            (table.ranks, [len(shape) for shape in self.shapes], "tensor ranks"),
            (table.dims, list(chain.from_iterable(self.shapes)), "tensor dims"),
            (table.slice_counts, np.where(self._sliced, counts, 0).tolist(), "slice counts"),
            (columns.shards, _ordered(self._shards, order), "block shards"),
            (columns.offsets, _ordered(self._offsets, order), "block offsets"),
            (columns.stored_lengths, _ordered(self._stored_lengths, order), "stored lengths"),
            (columns.raw_lengths, _ordered(self._raw_lengths, order), "raw lengths"),
            (columns.codecs, _ordered(self._codecs, order), "block codecs"),
            (columns.byte_shuffles, _ordered(self._shuffles, order), "byte shuffles"),
            (columns.chunk_sizes, _ordered(self._chunk_sizes, order), "chunk sizes"),
            (columns.chunk_crcs, self._crcs.ordered(order), "chunk checksums"),
            (columns.chunk_stored_lengths, self._stored_chunk_lengths.ordered(order),
             "chunk stored lengths"),
            (columns.slice_starts, self._starts.ordered(order), "slice starts"),
            (columns.slice_extents, self._extents.ordered(order), "slice extents"),
        ):
            extend_fully(field, values, name)


def extend_fully(field: Any, values: Sequence[object], name: str) -> None:
    """``field.extend(values)`` for a repeated field of the index, all of them or
    OutOfMemoryError: protobuf's extend (upb) can stop short without raising when
    memory runs out, and the index would then be committed truncated, a checkpoint
    every reader refuses."""
    before = len(field)
    field.extend(values)
    if len(field) != before + len(values):
        raise OutOfMemoryError(f"memory ran out while the index's {name} were encoded "
                               f"({len(field) - before} of {len(values)} kept)",
                               needed=8 * len(values))


class _Ragged:
    """A list of lists of ints, kept flat with the length of each."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.lengths: list[int] = []

    def add(self, values: Sequence[int]) -> None:
        self.values.extend(values)
        self.lengths.append(len(values))

    def add_each(self, values: Sequence[int], length: int, count: int) -> None:
        """Add ``count`` lists of ``length`` values each, ``values`` holding them all."""
        self.values.extend(values)
        self.lengths.extend([length] * count)

    def ordered(self, order: np.ndarray | None) -> list[int]:
        """The values, the lists taken in ``order`` (None: as added)."""
        if order is None or not self.values:
            return self.values
        lengths = np.asarray(self.lengths, dtype=np.int64)
        ends = np.cumsum(lengths)
        taken = lengths[order]
        # For each value of the reordered lists, its place in the flat values.
        shift = np.repeat(ends[order] - taken - (np.cumsum(taken) - taken), taken)
        flat = np.asarray(self.values, dtype=np.uint64)
        return flat[np.arange(shift.size) + shift].tolist()  # type: ignore[no-any-return]


def _ordered(column: list[_Item], order: np.ndarray | None) -> list[_Item]:
    if order is None:
        return column
    return np.asarray(column)[order].tolist()  # type: ignore[no-any-return]
