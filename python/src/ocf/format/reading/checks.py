"""Checking the chunks of many small blocks at once (the strips of a distributed save).

A resharded load copies thousands of slices of a few chunks each. Checking all
of them before copying any reads every byte twice from memory, so the caller
checks a few blocks just before it copies them, while their bytes are in the
core's cache. Every chunk is checked on its own, against its own stored CRC
[R-CRC-001]: a check of a run of chunks as one string, against the combination
of their CRCs, would be cheaper in calls but lets damage spread over two chunks
of the run pass whenever the two changes cancel, which a check per chunk never
does for damage of up to three bits in each chunk.

Most checks are of neighbouring whole blocks of one chunk size (the strips of a
box, side by side in their file, their CRCs side by side in the index): their
chunks are then rows of one array over the held bytes, and their stored CRCs one
slice of the index's, with no array built per chunk. Other checks lay out the
byte range and stored CRC of every chunk first.
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
        if self.checked is not None and self.pending.any() and self.checked.any():
            todo = np.flatnonzero(self.pending)  # (a reader's first read checked none)
            self.pending[todo] = _any_unchecked(self.checked, self.row[todo], self.count[todo])
        offset = columns.offsets[blocks].astype(np.int64)  # below 2^63, checked at open
        self.begin = offset + self.size * self.first - held.offset
        self.end = np.minimum(offset + self.size * (self.first + self.count), offset + raw) - \
            held.offset
        self.joined = _Joined(self)

    def check(self, among: np.ndarray) -> None:
        """Check the chunks of blocks ``among`` (positions in ``blocks``), unless the reader
        checks nothing or checked them already; raise IntegrityError naming the first
        chunk that does not match."""
        if not self.reader.verify:
            return
        # In block order: a run is told by its first and last block, and a failing
        # chunk is named by its place among them.
        todo = np.sort(among[self.pending[among]])
        if not len(todo):
            return
        rows, got = self._checksums(todo)
        expected = self.columns.crcs[rows]
        wrong = np.flatnonzero(got != expected)
        if len(wrong):
            at = int(wrong[0])
            raise self._mismatch(todo, at, int(got[at]), int(expected[at]))
        self.pending[todo] = False
        if self.checked is not None:
            self.checked[rows] = True

    def _checksums(self, todo: np.ndarray) -> tuple[slice | np.ndarray, np.ndarray]:
        """The rows in ``columns.crcs`` of the chunks of blocks ``todo``, in order, and
        the CRC-32C of each chunk's bytes."""
        low, high = int(todo[0]), int(todo[-1]) + 1
        if high - low == len(todo) and self.joined.between(low, high):  # one run
            row, count = int(self.row[low]), self.joined.chunks(low, high)
            chunks = np.ndarray((count, int(self.size[low])), np.uint8, self.held.data,
                                int(self.begin[low]))  # NumPy checks it lies in the data
            return slice(row, row + count), np.fromiter(map(crc32c, chunks), np.uint32, count)
        count = self.count[todo]
        positions = _run_positions(count)
        size = np.repeat(self.size[todo], count)
        start = np.repeat(self.begin[todo], count) + size * positions
        stop = np.minimum(start + size, np.repeat(self.end[todo], count))
        data = self.held.data
        return np.repeat(self.row[todo], count) + positions, np.array(
            [crc32c(data[a:b]) for a, b in zip(start.tolist(), stop.tolist())], np.uint32)

    def _mismatch(self, todo: np.ndarray, at: int, got: int, expected: int) -> IntegrityError:
        """The error for chunk ``at`` of those of blocks ``todo``, in order."""
        count = self.count[todo]
        before = np.cumsum(count) - count  # the chunks of the blocks before each
        k = int(np.searchsorted(before + count, at, side="right"))
        block, position = int(todo[k]), at - int(before[k])
        begin = int(self.begin[block]) + int(self.size[block]) * position
        end = min(begin + int(self.size[block]), int(self.end[block]))
        return IntegrityError(
            f"slice {int(self.slices[block])}, chunk {int(self.first[block]) + position} "
            f"(bytes {begin + self.held.offset}...{end + self.held.offset} of "
            f"{self.reader.shards[self.held.shard].path.name}) has CRC-32C {got:#010x}, "
            f"the index says {expected:#010x}",
            path=self.reader.path, key=self.info.key, requirement="R-CRC-001")


class _Joined:
    """Which neighbouring blocks of a :class:`BlockChecks` are checked as one run of
    chunks: whole blocks of one chunk size, each starting where the one before ends, in
    the held bytes and in the index's CRCs. Prefix counts, so that any range of blocks
    is asked about with a few list lookups."""

    def __init__(self, checks: BlockChecks) -> None:
        size, count, row = checks.size, checks.count, checks.row
        whole = checks.end - checks.begin == size * count  # every chunk of the run full
        follows = np.zeros(len(size), bool)  # block k starts where block k - 1 ends
        follows[1:] = (size[1:] == size[:-1]) & (checks.begin[1:] == checks.end[:-1]) & (
            row[1:] == row[:-1] + count[:-1])
        self._partial: list[int] = [0, *np.cumsum(~whole).tolist()]
        self._breaks: list[int] = [0, *np.cumsum(~follows).tolist()]
        self._chunks: list[int] = [0, *np.cumsum(count).tolist()]

    def between(self, low: int, high: int) -> bool:
        """Whether blocks ``low`` to ``high - 1`` form one run."""
        return self._partial[high] == self._partial[low] and \
            self._breaks[high] == self._breaks[low + 1]

    def chunks(self, low: int, high: int) -> int:
        """The chunks of blocks ``low`` to ``high - 1``."""
        return self._chunks[high] - self._chunks[low]


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
