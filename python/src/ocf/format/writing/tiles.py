"""A box stored as the cells of a grid, a slice each, with array operations.

A multi-writer save stores every box of a tensor as the cells (tiles) of a
grid of the tensor's global shape, so that a reader partitioning the tensor
otherwise reads the tiles it overlaps (``ocf.distributed.parts.tiling``).
That is thousands of slices per box: here the box is cut into tiles a band
of grid rows at a time, with one reshaping copy per band and no Python
object per tile, when the grid's lines fall on the box's edges (a regular
box: every tile of the same shape, as when a tensor is split evenly). The
bytes are those of one slice per tile, in C order of the grid, each tile in
C order of its own box.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise, product
from math import prod

import numpy as np

from ocf.format import dtypes
from ocf.format.slicing import Box

# The tiles of a box are cut about this many bytes at a time: one copy of that
# size in memory, written with one call.
BAND_BYTES = 4 << 20


@dataclass(slots=True)
class TileRun:
    """Tiles of equal shape of one tensor, to be written one after the other: the raw
    bytes of each in turn, and the box of each (int64, a row per tile). ``data`` is
    valid until the next run of the same writer is taken (its memory is reused)."""

    row: int
    dtype: dtypes.Dtype
    data: memoryview  # flat: tile i is data[i * tile_size : (i + 1) * tile_size]
    tile_size: int
    starts: np.ndarray
    extents: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def grid_cells(start: Sequence[int], extent: Sequence[int], tile: Sequence[int]
               ) -> list[Box]:
    """The cells of the grid of ``tile`` (lines at its multiples, in global
    coordinates) that cut the box at ``start`` of ``extent``, in C order of the grid."""
    runs = [list(pairwise(_cuts(s, e, t))) for s, e, t in zip(start, extent, tile)]
    return [(tuple(a for a, _ in cell), tuple(b - a for a, b in cell))
            for cell in product(*runs)]


def _cuts(start: int, extent: int, step: int) -> list[int]:
    """The grid lines (multiples of ``step``) strictly inside [start, start + extent),
    with the run's own ends."""
    first = (start // step + 1) * step
    return [start, *range(first, start + extent, step), start + extent]


def is_regular(array: np.ndarray, start: Sequence[int], tile: Sequence[int],
               dtype: dtypes.Dtype) -> bool:
    """Whether the box ``array`` at ``start`` is cut by the grid of ``tile`` into more
    than one tile, all of the same shape, of a fixed-size dtype: then
    :func:`tile_runs` cuts it. Along each dimension the box either lies on the grid's
    lines or inside one cell of the grid (the box's extent is then the cells')."""
    if not (dtype.numpy is not None and array.ndim >= 1 and len(start) == len(tile)
            == array.ndim and array.size > 0 and all(t > 0 for t in tile)):
        return False
    inside = [s // t == (s + e - 1) // t for s, e, t in zip(start, array.shape, tile)]
    return all(one or (s % t == 0 and e % t == 0)
               for s, e, t, one in zip(start, array.shape, tile, inside)) \
        and prod(e // c for e, c in zip(array.shape, cell_extents(start, array.shape, tile))) > 1


def cell_extents(start: Sequence[int], extent: Sequence[int], tile: Sequence[int]
                 ) -> tuple[int, ...]:
    """The extent of the cells of the grid of ``tile`` that cut the box at ``start`` of
    ``extent``, per dimension: the box's own where it lies inside one cell (a strip
    the height of a writer's box, say), the tile's elsewhere."""
    return tuple(e if s // t == (s + e - 1) // t else t
                 for s, e, t in zip(start, extent, tile))


class BandBuffer:
    """The memory the bands of a writer's tile runs are copied into, one band at a time
    (a writer takes the next run only once it wrote the last): one buffer, grown as
    needed, for every box, since a fresh one each time costs the kernel's zeroing of
    its pages, as much again as the copy."""

    def __init__(self) -> None:
        self._memory = np.empty(0, np.uint8)

    def take(self, count: int, dtype: np.dtype[np.generic]) -> np.ndarray:
        """``count`` items of ``dtype``, uninitialized; the previous ones are gone."""
        nbytes = count * dtype.itemsize
        if self._memory.nbytes < nbytes:
            self._memory = np.empty(nbytes, np.uint8)
        return self._memory[:nbytes].view(dtype)


def tile_runs(row: int, dtype: dtypes.Dtype, array: np.ndarray, start: Sequence[int],
              tile: Sequence[int], bands: BandBuffer | None = None) -> Iterator[TileRun]:
    """The tiles of the regular box ``array`` at ``start`` (:func:`is_regular`), a band
    of whole grid rows of about :data:`BAND_BYTES` bytes at a time, copied into
    ``bands`` (a buffer of the generator's own when None)."""
    rank = array.ndim
    tile = cell_extents(start, array.shape, tile)
    tile_array = np.asarray(tile, dtype=np.int64)
    grid = [e // t for e, t in zip(array.shape, tile)]
    tile_size = prod(tile) * (dtype.itemsize or 1)
    band_rows = max(1, BAND_BYTES // (tile_size * prod(grid[1:])))
    # A grid row larger than a band (the strips of a distributed save: the box is one
    # grid row) is cut across too, into bands of whole steps along grid dimension 1,
    # which the copy, the checksums and the write then each find in the cache. The
    # tiles keep the C order of the grid.
    across = grid[1] if rank > 1 else 1
    band_columns = across if band_rows > 1 or rank < 2 else \
        max(1, BAND_BYTES // (tile_size * prod(grid[2:])))
    # Axes of a band reshaped to (grid 0, tile 0, grid 1, tile 1, ...): grid axes first.
    order = [*range(0, 2 * rank, 2), *range(1, 2 * rank, 2)]
    origin = np.asarray(start, dtype=np.int64)
    buffer = (bands or BandBuffer()).take(
        min(band_rows, grid[0]) * min(band_columns, across) * prod(grid[2:]) * prod(tile),
        np.dtype(dtype.numpy))
    for first, left in product(range(0, grid[0], band_rows), range(0, across, band_columns)):
        rows = min(band_rows, grid[0] - first)
        columns = min(band_columns, across - left)
        band_grid = [rows, columns, *grid[2:]][:rank]
        band = array[first * tile[0] : (first + rows) * tile[0]]
        if rank > 1:
            band = band[:, left * tile[1] : (left + columns) * tile[1]]
        cells = band.reshape([n for g, t in zip(band_grid, tile) for n in (g, t)])
        moved = cells.transpose(order)
        out = buffer[: moved.size].reshape(moved.shape)
        np.copyto(out, moved, casting="unsafe")  # to the stored dtype, little-endian
        data = out.reshape(-1).view(np.uint8).data
        index = np.indices(band_grid).reshape(rank, -1).T
        index[:, 0] += first
        if rank > 1:
            index[:, 1] += left
        starts = origin + index * tile_array
        yield TileRun(row, dtype, data, tile_size, starts,
                      np.broadcast_to(tile_array, starts.shape))
