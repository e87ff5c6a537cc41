"""Reading a region of a tensor stored in many slices: the tiles of a distributed save.

A resharded load asks each rank for a box of every tensor; a save stored
each tensor as a grid of tiles (thousands of slices). The slices the box
meets are found with one array test over the tensor's slice table
(:func:`plan_region`), not one Python object per slice. The uncompressed
slices that lie wholly inside the box are then copied in groups
(:func:`copy_tiles`): from the memory map of a local file, or from one read
of each run of neighbouring tiles of an object (one request, not one per
tile). Tiles a save wrote one after another form a strided array of the
file, so a row of them is one NumPy copy, made once their checksums are
checked, while the row is still in the core's cache [R-CRC-001]. The
uncompressed slices that the box cuts along the first dimension only (the
strips of a distributed save, for a reader of other rows) hold what the box
needs of them as one run of rows, bytes in a row: those runs are copied the
same way, in groups, after their chunks are checked (:func:`copy_row_runs`).
Every other slice (cut by the box along another dimension, or compressed) is
read on its own by the caller.
"""

from __future__ import annotations

from itertools import pairwise
from math import prod
from typing import NamedTuple

import numpy as np

from ocf.format.index.model import BlockColumns, SliceBoxes, TensorInfo
from ocf.format.reading.blocks import _RUN_GAP, READ_GROUP, BlockReader, HeldBytes
from ocf.format.reading.checks import BlockChecks
from ocf.format.workers import reader_workers

# A grid row of tiles is checked and copied this many bytes at a time, so that the
# copy reads what the checks just read while it is still cached (in L3, at least).
# Measured, not derived: pieces of 4 MiB took 4-15% less CPU than pieces of 1 MiB in
# every resharded load of bench_region_reads.py's checkpoint (medians and minima of 40)
# on the 2-core EPYC of the benchmarks (L2 2 MiB a core, L3 32 MiB); 16 MiB, no better.
CHECKED_PIECE = 4 << 20


class RegionPlan(NamedTuple):
    """The slices a box meets, split by how they are read. Positions are slice numbers
    of the tensor (rows of its :class:`SliceBoxes`)."""

    tiles: np.ndarray  # wholly inside the box, uncompressed
    rows: np.ndarray  # uncompressed, cut by the box along the first dimension only
    others: np.ndarray  # every other slice the box meets


def plan_region(boxes: SliceBoxes, columns: BlockColumns, start: tuple[int, ...],
                extent: tuple[int, ...]) -> RegionPlan:
    """The slices of ``boxes`` that share an element with the box ``start, extent``."""
    lo = np.array(start, dtype=np.int64)
    hi = lo + np.array(extent, dtype=np.int64)
    meets = np.flatnonzero(((boxes.lo < hi) & (lo < boxes.hi)).all(axis=1))
    inside = (boxes.lo[meets] >= lo) & (boxes.hi[meets] <= hi)
    across = inside[:, 1:].all(axis=1)  # inside along every dimension but the first
    # A scalar's one slice is read on its own: a tile has at least one dimension.
    raw = columns.stores_raw[boxes.blocks[meets]] & (len(start) > 0)
    tile = raw & across & inside[:, :1].all(axis=1)
    rows = raw & across & ~tile
    return RegionPlan(meets[tile], meets[rows], meets[~(tile | rows)])


def copy_tiles(reader: BlockReader, columns: BlockColumns, info: TensorInfo,
               boxes: SliceBoxes, tiles: np.ndarray, start: tuple[int, ...],
               out: np.ndarray, may_map: bool) -> None:
    """Copy the slices ``tiles`` (of fixed-size elements, uncompressed, each wholly inside
    the box at ``start`` that ``out`` holds) into ``out``, checking each chunk's
    checksum before its bytes are used; mapped when ``may_map`` and the file can be."""
    if not len(tiles):
        return
    blocks = boxes.blocks[tiles]
    order = np.lexsort((columns.offsets[blocks], columns.shards[blocks]))
    tiles, blocks = tiles[order], blocks[order]
    shards = columns.shards[blocks]
    first = columns.offsets[blocks].astype(np.int64)  # below 2^63, checked at open
    end = first + columns.raw_lengths[blocks].astype(np.int64)
    mapped = [reader.shards[s].mappable and may_map for s in range(len(reader.shards))]
    runs = _runs(shards, first, end, mapped)
    reader.bytes_read += int((end - first).sum())  # here: runs may go to worker threads
    origin = np.array(start, dtype=np.int64)

    def copy(run: tuple[int, int]) -> None:
        a, b = run
        held = reader.hold(info, int(shards[a]), int(first[a]), int(end[b - 1]), may_map)
        mine = tiles[a:b]
        checks = reader.checks(info, columns, blocks[a:b], mine, held)
        extents = boxes.hi[mine] - boxes.lo[mine]
        by_extent = np.lexsort(extents.T[::-1])
        change = np.ones(len(mine), dtype=bool)
        change[1:] = (extents[by_extent][1:] != extents[by_extent][:-1]).any(axis=1)
        for c, d in pairwise([*np.flatnonzero(change).tolist(), len(mine)]):
            chosen = by_extent[c:d]
            chosen_blocks = blocks[a:b][chosen]
            group = _Group(held, boxes.lo[mine[chosen]] - origin,
                           columns.offsets[chosen_blocks].astype(np.int64) - held.offset,
                           tuple(extents[chosen[0]].tolist()), checks, chosen)
            if not group.copy_as_grid(out):
                group.copy_one_by_one(out)

    if len(runs) > 1 and not any(mapped[int(shards[a])] for a, _ in runs):
        reader_workers().map(copy, runs)  # reads of an object overlap
    else:
        for run in runs:
            copy(run)


def copy_row_runs(reader: BlockReader, columns: BlockColumns, info: TensorInfo,
                  boxes: SliceBoxes, slices: np.ndarray, start: tuple[int, ...],
                  out: np.ndarray, may_map: bool) -> np.ndarray:
    """Copy into ``out`` (the box at ``start``) what it needs of the slices ``slices``
    (uncompressed, of fixed-size elements, inside the box along every dimension but
    the first): a run of each one's rows, read as the whole chunks that hold it, each
    checked before its bytes are used. Only slices of mapped shards (when
    ``may_map``); the others are returned, for the caller to read one by one."""
    mappable = np.array([may_map and s.mappable for s in reader.shards], dtype=bool)
    blocks = boxes.blocks[slices]
    shards = columns.shards[blocks]
    here = mappable[shards] if len(slices) else np.zeros(0, dtype=bool)
    left: np.ndarray = slices[~here]
    slices, blocks, shards = slices[here], blocks[here], shards[here]
    if not len(slices):
        return left
    lo, hi = boxes.lo[slices], boxes.hi[slices]
    top = np.maximum(lo[:, 0], start[0]) - lo[:, 0]  # the rows wanted, in each slice
    bottom = np.minimum(hi[:, 0], start[0] + out.shape[0]) - lo[:, 0]
    row_bytes = np.prod(hi[:, 1:] - lo[:, 1:], axis=1, dtype=np.int64) * out.dtype.itemsize
    first, end = top * row_bytes, bottom * row_bytes  # bytes wanted, in each block
    raw = columns.raw_lengths[blocks].astype(np.int64)
    size = np.where(columns.chunk_sizes[blocks] == 0, raw,
                    columns.chunk_sizes[blocks]).astype(np.int64)
    chunk, past = first // size, -(-end // size)  # the chunks holding them
    reader.bytes_read += int((np.minimum(past * size, raw) - chunk * size).sum())
    corner = lo - np.array(start, dtype=np.int64)
    corner[:, 0] += top
    extents = hi - lo
    extents[:, 0] = bottom - top
    offsets = columns.offsets[blocks].astype(np.int64) + first
    for shard in np.unique(shards).tolist():
        mine = np.flatnonzero(shards == shard)
        held = reader.hold(info, shard, 0, 0, True)
        checks = reader.checks(info, columns, blocks[mine], slices[mine], held,
                               (chunk[mine], past[mine] - chunk[mine]))
        by_extent = np.lexsort(extents[mine].T[::-1])
        ordered = mine[by_extent]
        change = np.ones(len(ordered), dtype=bool)
        change[1:] = (extents[ordered][1:] != extents[ordered][:-1]).any(axis=1)
        for c, d in pairwise([*np.flatnonzero(change).tolist(), len(ordered)]):
            chosen = ordered[c:d]
            group = _Group(held, corner[chosen], offsets[chosen] - held.offset,
                           tuple(extents[chosen[0]].tolist()), checks, by_extent[c:d])
            if not group.copy_as_grid(out):
                group.copy_one_by_one(out)
    return left


def _runs(shards: np.ndarray, first: np.ndarray, end: np.ndarray, mapped: list[bool]
          ) -> list[tuple[int, int]]:
    """Index ranges [a, b) of the tiles (sorted by shard and offset) held together: all
    those of a mapped shard; in other shards, neighbours at most _RUN_GAP bytes apart,
    up to READ_GROUP bytes a run, read with one request."""
    cut = np.ones(len(shards), dtype=bool)
    cut[1:] = shards[1:] != shards[:-1]
    unmapped = ~np.array(mapped, dtype=bool)[shards]
    cut[1:] |= unmapped[1:] & (first[1:] - end[:-1] > _RUN_GAP)
    starts = np.flatnonzero(cut).tolist()
    runs: list[tuple[int, int]] = []
    for a, b in pairwise([*starts, len(shards)]):
        while unmapped[a] and end[b - 1] - first[a] > READ_GROUP:  # split a long run
            c = max(a + 1, int(np.searchsorted(end[a:b], first[a] + READ_GROUP, "right")) + a)
            runs.append((a, c))
            a = c
        runs.append((a, b))
    return runs


class _Group:
    """Slices of one extent whose bytes ``held`` holds: their boxes relative to the
    region (``lo``), where each one's bytes to copy start in ``held.data``
    (``offsets``), and their positions in ``checks``, which checks their chunks."""

    def __init__(self, held: HeldBytes, lo: np.ndarray, offsets: np.ndarray,
                 extent: tuple[int, ...], checks: BlockChecks, positions: np.ndarray) -> None:
        self.held, self.lo, self.offsets, self.extent = held, lo, offsets, extent
        self.checks, self.positions = checks, positions

    def verify(self, among: np.ndarray) -> None:
        self.checks.check(self.positions[among])

    def copy_one_by_one(self, out: np.ndarray) -> None:
        self.verify(np.arange(len(self.lo)))
        dtype, shape, data = out.dtype, self.extent, self.held.data
        for lo, offset in zip(self.lo.tolist(), self.offsets.tolist()):
            window = tuple(slice(s, s + e) for s, e in zip(lo, shape))
            out[window] = np.ndarray(shape, dtype, data, offset)

    def copy_as_grid(self, out: np.ndarray) -> bool:
        """Copy the slices as one strided array, a grid row at a time; False (nothing
        done) unless they are the cells of a full grid laid out in the file with a
        constant step along each grid dimension."""
        extent = np.array(self.extent, dtype=np.int64)
        corner = self.lo - self.lo.min(axis=0)
        if len(self.lo) < 2 or (corner % extent).any():
            return False
        cell = corner // extent
        counts = cell.max(axis=0) + 1
        if int(np.prod(counts)) != len(self.lo):  # disjoint (checked at open): a full grid
            return False
        order = np.lexsort(cell.T[::-1])  # row-major over the grid
        offsets = self.offsets[order]
        steps = [int(offsets[prod(counts[d + 1 :].tolist())] - offsets[0]) if n > 1 else 0
                 for d, n in enumerate(counts.tolist())]
        if min(steps) < 0 or not (offsets == offsets[0] + cell[order] @ np.array(
                steps, dtype=np.int64)).all():
            return False
        # Bytes are copied as they are, as opaque items of the dtype's size (as_strided
        # cannot describe every dtype, such as ml_dtypes' float8 types).
        items = np.dtype((np.void, out.dtype.itemsize))
        inner = [items.itemsize * prod(self.extent[d + 1 :]) for d in range(len(self.extent))]
        grid_shape = (*counts.tolist(), *self.extent)
        # NumPy checks that this view lies inside the held bytes.
        source = np.ndarray(grid_shape, items, self.held.data, int(offsets[0]),
                            (*steps, *inner))
        first = self.lo[order[0]]
        window = out[tuple(slice(s, s + n * e) for s, n, e in
                           zip(first.tolist(), counts.tolist(), self.extent))].view(items)
        target = np.lib.stride_tricks.as_strided(
            window, grid_shape, (*(s * e for s, e in zip(window.strides, self.extent)),
                                 *window.strides), writeable=True)
        # Checked, then copied while in the core's cache: a piece of a grid row at a time.
        behind = prod(counts[2:].tolist())  # tiles a step along grid dimension 1 spans
        across = int(counts[1]) if len(counts) > 1 else 1
        step = max(1, CHECKED_PIECE // (behind * items.itemsize * prod(self.extent)))
        for row in range(int(counts[0])):
            for a in range(0, across, step):
                b = min(a + step, across)
                begin = (row * across + a) * behind
                self.verify(order[begin : begin + (b - a) * behind])
                if len(counts) > 1:
                    np.copyto(target[row, a:b], source[row, a:b])
                else:
                    np.copyto(target[row], source[row])
        return True
