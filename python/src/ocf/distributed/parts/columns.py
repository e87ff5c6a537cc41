"""The tables of part indexes as NumPy columns, and the merged tables built from them.

A save by many writers has thousands of slices per part (every tile is
one), so the merge works on the index's own columns (spec/format.md, "Tensor
table" and "Block table"): a part's block columns are concatenated with
the other parts', shard numbers rebased by one addition, and the merged
block table is one gather in merged order. Nothing here builds a Python
object per block or per slice. The columns come from part indexes that
passed every check of one part (step M2 of spec/parts.md), so their values
are in range; the checks across parts are the merge's
(:mod:`ocf.distributed.parts.merging`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ocf.format.codecs.registry import BY_VALUE
from ocf.format.index.encoding import extend_fully
from ocf.v1 import index_pb2, tensor_pb2

# Whether each codec value stores chunks raw (those blocks list no chunk stored lengths).
_STORES_RAW = np.zeros(max(BY_VALUE) + 1, dtype=bool)
for _value, _codec in BY_VALUE.items():
    _STORES_RAW[_value] = _codec.stores_raw


@dataclass
class Ragged:
    """Lists of numbers kept flat: list ``j`` is ``values[starts[j] : starts[j] + lengths[j]]``."""

    values: np.ndarray
    lengths: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        starts: np.ndarray = np.cumsum(self.lengths) - self.lengths
        return starts

    def taken(self, order: np.ndarray) -> np.ndarray:
        """The values of lists ``order``, one list after the other."""
        lengths = self.lengths[order]
        if not lengths.size or not int(lengths.sum()):
            return self.values[:0]
        # Each value's place in the flat values: its list's start plus its place in it.
        shift = np.repeat(self.starts[order] - (np.cumsum(lengths) - lengths), lengths)
        values: np.ndarray = self.values[np.arange(shift.size) + shift]
        return values


@dataclass
class BlockColumns:
    """A block table's columns; ``shards`` as numbers in the merged shard list once
    :func:`joined`."""

    shards: np.ndarray
    offsets: np.ndarray
    stored_lengths: np.ndarray
    raw_lengths: np.ndarray
    codecs: np.ndarray
    byte_shuffles: np.ndarray
    chunk_sizes: np.ndarray
    crcs: Ragged
    chunk_stored_lengths: Ragged
    slice_starts: Ragged
    slice_extents: Ragged


@dataclass
class PartTables:
    """The tensor and block tables of one checked part index, as columns."""

    keys: list[str]
    dtypes: list[int]
    shapes: list[tuple[int, ...]]
    slice_counts: list[int]
    first_block: list[int]  # by tensor row: its first block
    blocks: BlockColumns

    def boxes(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """Starts and extents (int64, a row per slice) of the slices of tensor ``row``."""
        rank, count = len(self.shapes[row]), self.slice_counts[row]
        at = int(self.blocks.slice_starts.starts[self.first_block[row]]) if count else 0
        span = slice(at, at + count * rank)
        return (self.blocks.slice_starts.values[span].astype(np.int64).reshape(count, rank),
                self.blocks.slice_extents.values[span].astype(np.int64).reshape(count, rank))


def part_tables(message: index_pb2.Index) -> PartTables:
    """The columns of a part index that passed the checks of one part (step M2)."""
    t, b = message.tensors, message.blocks
    ranks = np.array(t.ranks, dtype=np.int64)
    counts = np.array(t.slice_counts, dtype=np.int64)
    dims = list(t.dims)
    ends = np.cumsum(ranks).tolist()
    shapes = [tuple(dims[end - rank : end]) for end, rank in zip(ends, ranks.tolist())]
    blocks_of = np.maximum(counts, 1)
    raw = np.array(b.raw_lengths, dtype=np.uint64)
    sizes = np.array(b.chunk_sizes, dtype=np.uint64)
    codecs = np.array(b.codecs, dtype=np.int64)
    # Chunks per block: none when empty, one when chunk_size is 0, else raw / chunk_size
    # rounded up (spec/format.md, "Chunks").
    divisor = np.where(sizes == 0, np.maximum(raw, 1), sizes)
    chunks = np.where(raw == 0, 0, (raw + divisor - 1) // divisor).astype(np.int64)
    # Box values per block: the rank of its tensor for the slices of a sliced tensor.
    box_values = np.repeat(np.where(counts > 0, ranks, 0), blocks_of)
    columns = BlockColumns(
        shards=np.array(b.shards, dtype=np.int64),
        offsets=np.array(b.offsets, dtype=np.uint64),
        stored_lengths=np.array(b.stored_lengths, dtype=np.uint64),
        raw_lengths=raw, codecs=codecs,
        byte_shuffles=np.array(b.byte_shuffles, dtype=bool),
        chunk_sizes=sizes,
        crcs=Ragged(np.array(b.chunk_crcs, dtype=np.uint32), chunks),
        chunk_stored_lengths=Ragged(np.array(b.chunk_stored_lengths, dtype=np.uint64),
                                    np.where(_STORES_RAW[codecs], 0, chunks)),
        slice_starts=Ragged(np.array(b.slice_starts, dtype=np.uint64), box_values),
        slice_extents=Ragged(np.array(b.slice_extents, dtype=np.uint64), box_values),
    )
    return PartTables(list(t.keys), list(t.dtypes), shapes, counts.tolist(),
                      (np.cumsum(blocks_of) - blocks_of).tolist(), columns)


def joined(parts: Sequence[PartTables], shard_bases: Sequence[int]) -> BlockColumns:
    """The block columns of all parts one after the other, each part's shard numbers
    moved up by its base (its first shard's place in the merged shard list)."""
    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p.blocks, name) for p in parts])

    def ragged(name: str) -> Ragged:
        lists = [getattr(p.blocks, name) for p in parts]
        return Ragged(np.concatenate([r.values for r in lists]),
                      np.concatenate([r.lengths for r in lists]))

    return BlockColumns(
        shards=np.concatenate([p.blocks.shards + base for p, base in zip(parts, shard_bases)]),
        offsets=cat("offsets"), stored_lengths=cat("stored_lengths"),
        raw_lengths=cat("raw_lengths"), codecs=cat("codecs"),
        byte_shuffles=cat("byte_shuffles"), chunk_sizes=cat("chunk_sizes"),
        crcs=ragged("crcs"), chunk_stored_lengths=ragged("chunk_stored_lengths"),
        slice_starts=ragged("slice_starts"), slice_extents=ragged("slice_extents"))


def fill_blocks(table: tensor_pb2.BlockTable, blocks: BlockColumns, order: np.ndarray) -> None:
    """Append blocks ``order`` of ``blocks`` to the block table, in that order."""
    for field, values, name in (
        (table.shards, blocks.shards[order], "block shards"),
        (table.offsets, blocks.offsets[order], "block offsets"),
        (table.stored_lengths, blocks.stored_lengths[order], "stored lengths"),
        (table.raw_lengths, blocks.raw_lengths[order], "raw lengths"),
        (table.codecs, blocks.codecs[order], "block codecs"),
        (table.byte_shuffles, blocks.byte_shuffles[order], "byte shuffles"),
        (table.chunk_sizes, blocks.chunk_sizes[order], "chunk sizes"),
        (table.chunk_crcs, blocks.crcs.taken(order), "chunk checksums"),
        (table.chunk_stored_lengths, blocks.chunk_stored_lengths.taken(order),
         "chunk stored lengths"),
        (table.slice_starts, blocks.slice_starts.taken(order), "slice starts"),
        (table.slice_extents, blocks.slice_extents.taken(order), "slice extents"),
    ):
        extend_fully(field, values.tolist(), name)


def block_ranges(firsts: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The numbers ``first, first + 1, ..., first + count - 1`` of each pair, in order."""
    first = np.asarray(firsts, dtype=np.int64)
    count = np.asarray(counts, dtype=np.int64)
    if not count.size:
        return count
    return np.repeat(first - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
