"""Checking the chunks of many small blocks at once (the strips of a distributed save).

A resharded load copies thousands of slices of a few chunks each. Checking all
of them before copying any reads every byte twice from memory, so the caller
checks a few blocks just before it copies them, while their bytes are in the
core's cache. Every chunk is checked on its own, against its own stored CRC
[R-CRC-001]: a check of a run of chunks as one string, against the combination
of their CRCs, would be cheaper in calls but lets damage spread over two chunks
of the run pass whenever the two changes cancel, which a check per chunk never
does for damage of up to three bits in each chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.errors import IntegrityError
from ocf.format.index.model import BlockColumns, TensorInfo

if TYPE_CHECKING:
    from ocf.format.reading.blocks import BlockReader, HeldBytes


class BlockChecks:
    """The checksums of chunks of uncompressed blocks whose bytes ``held`` holds (see
    :meth:`BlockReader.checks`), checked a few blocks at a time (:meth:`check`)."""

    def __init__(self, reader: BlockReader, info: TensorInfo, columns: BlockColumns,
                 blocks: np.ndarray, slices: np.ndarray, held: HeldBytes,
                 runs: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.reader, self.info, self.columns, self.held = reader, info, columns, held
        self.blocks, self.slices = blocks, slices
        if not reader.verify:
            return
        raw = columns.raw_lengths[blocks].astype(np.int64)
        self.size: np.ndarray = np.where(columns.chunk_sizes[blocks] == 0, raw,
                                         columns.chunk_sizes[blocks]).astype(np.int64)
        # The first chunk and the count of each block's run: all its chunks, or ``runs``.
        self.first: np.ndarray = np.zeros(len(blocks), np.int64) if runs is None else \
            runs[0].astype(np.int64)
        self.count: np.ndarray = columns.chunk_counts[blocks].astype(np.int64) \
            if runs is None else runs[1].astype(np.int64)
        self.row = columns.crc_start[blocks].astype(np.int64) + self.first  # in columns.crcs
        # A mapped shard's chunks are checked once per reader.
        self.checked = reader.checked_chunks(columns) if held.mapped else None
        self.pending = self.count > 0
        if self.checked is not None and self.pending.any():
            todo = np.flatnonzero(self.pending)
            self.pending[todo] = _any_unchecked(self.checked, self.row[todo], self.count[todo])
        offset = columns.offsets[blocks].astype(np.int64)  # below 2^63, checked at open
        self.begin = offset + self.size * self.first - held.offset
        self.end = np.minimum(offset + self.size * (self.first + self.count), offset + raw) - \
            held.offset

    def check(self, among: np.ndarray) -> None:
        """Check the chunks of blocks ``among`` (positions in ``blocks``), unless the reader
        checks nothing or checked them already; raise IntegrityError naming the first
        chunk that does not match."""
        if not self.reader.verify:
            return
        todo = among[self.pending[among]]
        if not len(todo):
            return
        count = self.count[todo]
        positions = _run_positions(count)
        rows = np.repeat(self.row[todo], count) + positions
        size = np.repeat(self.size[todo], count)
        start = np.repeat(self.begin[todo], count) + size * positions
        stop = np.minimum(start + size, np.repeat(self.end[todo], count))
        data = self.held.data
        got = np.array([crc32c(data[a:b]) for a, b in zip(start.tolist(), stop.tolist())],
                       dtype=np.uint32)
        expected = self.columns.crcs[rows]
        wrong = np.flatnonzero(got != expected)
        if not len(wrong):
            self.pending[todo] = False
            if self.checked is not None:
                self.checked[rows] = True
            return
        at = int(wrong[0])
        block = int(todo[np.searchsorted(np.cumsum(count), at, side="right")])
        begin, end = (int(start[at]) + self.held.offset, int(stop[at]) + self.held.offset)
        raise IntegrityError(
            f"slice {int(self.slices[block])}, chunk {int(self.first[block] + positions[at])} "
            f"(bytes {begin}...{end} of {self.reader.shards[self.held.shard].path.name}) has "
            f"CRC-32C {int(got[at]):#010x}, the index says {int(expected[at]):#010x}",
            path=self.reader.path, key=self.info.key, requirement="R-CRC-001")


def _run_positions(count: np.ndarray) -> np.ndarray:
    """0 to ``count[k] - 1`` for every ``k``, in one array."""
    positions: np.ndarray = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count,
                                                                    count)
    return positions


def _chunk_rows(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The rows ``first[k]`` to ``first[k] + count[k] - 1`` of every ``k``, in one array."""
    rows: np.ndarray = np.repeat(first, count) + _run_positions(count)
    return rows


def _any_unchecked(checked: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Whether any of the rows ``first[k]`` to ``first[k] + count[k] - 1`` (every count
    at least 1) is not yet ``checked``, for every ``k``."""
    if not len(first):
        return np.zeros(0, dtype=bool)
    unchecked = (~checked[_chunk_rows(first, count)]).astype(np.int64)
    return np.add.reduceat(unchecked, np.cumsum(count) - count) > 0


__all__ = ["BlockChecks"]
