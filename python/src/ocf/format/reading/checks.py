"""Checking the chunks of many small blocks at once (the strips of a distributed save).

A resharded load copies thousands of slices of a few chunks each. Checking
their chunks one checksum call each costs more in calls than in checksums, and
checking all before copying any reads every byte twice from memory. So each
block's run of chunks is checked with one call, against the fold of its
chunks' stored CRCs (:mod:`ocf.format.crc_folding`), and the caller checks a
few blocks just before it copies them, while they are in the core's cache. A
run that fails is checked chunk by chunk, to name the chunk [R-CRC-001].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.crc_folding import fold
from ocf.format.errors import IntegrityError
from ocf.format.index.model import BlockColumns, TensorInfo

if TYPE_CHECKING:
    from ocf.format.reading.blocks import BlockReader, HeldBytes


class BlockChecks:
    """The checksums of chunks of uncompressed blocks whose bytes ``held`` holds (see
    :meth:`BlockReader.verify_blocks`): the expected CRC of each block's run of chunks
    folded at once, the runs checked a few blocks at a time (:meth:`check`)."""

    def __init__(self, reader: BlockReader, info: TensorInfo, columns: BlockColumns,
                 blocks: np.ndarray, slices: np.ndarray, held: HeldBytes,
                 runs: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.reader, self.info, self.columns, self.held = reader, info, columns, held
        self.blocks, self.slices = blocks, slices
        if not reader.verify:
            return
        raw = columns.raw_lengths[blocks].astype(np.int64)
        size = np.where(columns.chunk_sizes[blocks] == 0, raw,
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
        self.begin = offset + size * self.first - held.offset
        self.end = np.minimum(offset + size * (self.first + self.count), offset + raw) - \
            held.offset
        todo = np.flatnonzero(self.pending)
        self.expected = np.zeros(len(blocks), dtype=np.uint32)
        last = self.end[todo] - self.begin[todo] - size[todo] * (self.count[todo] - 1)
        self.expected[todo] = _folded(columns.crcs, self.row[todo], self.count[todo],
                                      size[todo], last)

    def check(self, among: np.ndarray) -> None:
        """Check the chunks of blocks ``among`` (positions in ``blocks``), unless the reader
        checks nothing or checked them already; raise IntegrityError naming the first
        chunk that does not match."""
        if not self.reader.verify:
            return
        todo = among[self.pending[among]]
        if not len(todo):
            return
        data = self.held.data
        got = np.array([crc32c(data[a:b]) for a, b in zip(self.begin[todo].tolist(),
                                                          self.end[todo].tolist())],
                       dtype=np.uint32)
        matches = got == self.expected[todo]
        self.pending[todo[matches]] = False
        if self.checked is not None:
            good = todo[matches]
            self.checked[_chunk_rows(self.row[good], self.count[good])] = True
        if matches.all():
            return
        bad = todo[~matches]
        self.reader.verify_chunks(self.info, self.columns, self.blocks[bad], self.slices[bad],
                                  self.held, (self.first[bad], self.count[bad]))
        raise IntegrityError(  # cannot happen: a run that fails has a chunk that does
            f"slice {int(self.slices[bad[0]])}: chunks {int(self.first[bad[0]])} to "
            f"{int(self.first[bad[0]] + self.count[bad[0]] - 1)} do not match their CRC-32Cs",
            path=self.reader.path, key=self.info.key, requirement="R-CRC-001")


def _chunk_rows(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The rows ``first[k]`` to ``first[k] + count[k] - 1`` of every ``k``, in one array."""
    return np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))


def _any_unchecked(checked: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Whether any of the rows ``first[k]`` to ``first[k] + count[k] - 1`` (every count
    at least 1) is not yet ``checked``, for every ``k``."""
    if not len(first):
        return np.zeros(0, dtype=bool)
    unchecked = (~checked[_chunk_rows(first, count)]).astype(np.int64)
    return np.add.reduceat(unchecked, np.cumsum(count) - count) > 0


def _folded(crcs: np.ndarray, first: np.ndarray, count: np.ndarray, size: np.ndarray,
            last: np.ndarray) -> np.ndarray:
    """For every ``k``, the CRC of the run of chunks whose CRCs are rows ``first[k]`` on of
    ``crcs``: ``count[k]`` chunks of ``size[k]`` bytes, the last ``last[k]``; runs of one
    shape are folded together."""
    if not len(first):
        return np.zeros(0, dtype=np.uint32)
    runs = np.stack([count, size, last], axis=1)
    if (runs == runs[0]).all():  # the usual case: every strip of a tensor alike
        shapes, group = runs[:1], np.zeros(len(first), dtype=np.int64)
    else:
        shapes, group = np.unique(runs, axis=0, return_inverse=True)
        group = group.reshape(-1)
    out = np.empty(len(first), dtype=np.uint32)
    for g, (n, chunk, tail) in enumerate(shapes.tolist()):
        members = np.flatnonzero(group == g)
        table = crcs[first[members][:, None] + np.arange(n)].astype(np.uint32)
        out[members] = fold(table, chunk, tail)
    return out


__all__ = ["BlockChecks"]
