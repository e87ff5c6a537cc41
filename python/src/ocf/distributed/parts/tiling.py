"""Tiles: a box of a tensor stored as a grid of smaller slices (a writer's choice).

A slice is stored in C order, so a reader that wants a band of a box along
any dimension but the first touches every chunk of that box. Stored as
tiles, each its own slice, the box is read only where the reader's region
overlaps it: a region then reads the tiles it needs, and at each of its
edges at most the tiles the edge cuts. The format needs nothing for this:
the slices of a tensor may be any boxes that tile its shape, from any parts
(spec/format.md, [R-SLICE-001] to [R-SLICE-004]).

The tile grid is a property of the tensor's global shape, not of the box a
writer holds: every writer of a tensor cuts its box along the same grid
lines, so the tiles do not depend on how the tensor was partitioned when it
was saved. The grid splits every dimension into the same number of parts
(as near as the sizes allow), so that a region cut anywhere along any
dimension wastes about the same fraction of what it reads: a region split
into ``k`` runs along dimension ``d`` reads at most ``k - 1`` extra tile
layers of ``d``, that is ``(k - 1) / g`` of the tensor for a grid of ``g``
tiles along ``d``. (Tiles square in elements would waste more along the
shorter dimension: for a 4096 x 1024 matrix in 128 x 128 tiles, three
readers of columns read 1.25 times what they need.)
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, prod

from ocf.format.slicing import Box
from ocf.format.writing.tiles import grid_cells

#: Most tiles the grid of one tensor has: larger tensors get larger tiles.
MAX_GRID_TILES = 1024
#: A box holding the fraction ``f`` of its tensor is stored in at most
#: ``max(1, floor(TILE_BUDGET * f))`` tiles, coarsening the grid when the box
#: is thin. The tiles of all boxes of a tensor are then at most
#: ``TILE_BUDGET`` plus the number of boxes, within the limit of 4096 slices
#: per tensor [R-SLICE-004] whenever the tensor has at most 2048 boxes.
TILE_BUDGET = 2048


def tile_shape(shape: Sequence[int], itemsize: int, tile_bytes: int) -> tuple[int, ...]:
    """The tile of the grid of a tensor of ``shape``: about ``tile_bytes`` bytes,
    the same number of tiles along every dimension (as near as the sizes allow),
    and at most :data:`MAX_GRID_TILES` tiles in all."""
    shape = tuple(int(d) for d in shape)
    if not shape or 0 in shape:
        return shape
    elements = max(1, tile_bytes // max(1, itemsize))
    wanted = min(MAX_GRID_TILES, max(1, -(-prod(shape) // elements)))
    counts = even_split(shape, wanted)
    return tuple(ceil(d / c) for d, c in zip(shape, counts))


def even_split(shape: Sequence[int], wanted: int) -> tuple[int, ...]:
    """How many parts to cut each dimension of ``shape`` (positive sizes) into, about
    ``wanted`` parts in all and as many along every dimension as the sizes allow."""
    counts = [1] * len(shape)
    remaining = float(wanted)
    # The smallest dimensions first: those that cannot take their share pass the
    # rest on to the larger ones.
    order = sorted(range(len(shape)), key=lambda d: shape[d])
    for i, d in enumerate(order):
        share = remaining ** (1 / (len(order) - i))
        counts[d] = max(1, min(shape[d], int(share + 1e-9)))
        remaining /= counts[d]
    return tuple(counts)


def tile_count(box: Box, tile: Sequence[int]) -> int:
    """How many tiles the grid of ``tile`` cuts ``box`` into."""
    return prod((s + e - 1) // t - s // t + 1 for s, e, t in zip(*box, tile))


def tiles_of(box: Box, shape: Sequence[int], itemsize: int, tile_bytes: int) -> list[Box]:
    """The tiles of ``box`` (global coordinates) in a tensor of ``shape``.

    The box is cut by the grid of :func:`box_tile`. Tiles are listed in C order of
    the grid.
    """
    tile = box_tile(box, shape, itemsize, tile_bytes)
    return [box] if tile is None else grid_cells(*box, tile)


def box_tile(box: Box, shape: Sequence[int], itemsize: int, tile_bytes: int
             ) -> tuple[int, ...] | None:
    """The tile of the grid that cuts ``box``: that of :func:`tile_shape`, coarsened
    (tile edges doubled, so that the lines stay on the grid) until the box has at most
    its share of :data:`TILE_BUDGET` tiles; None for a tensor without a grid (rank 0,
    or no elements)."""
    tile = tile_shape(shape, itemsize, tile_bytes)
    if not tile or 0 in tile:
        return None
    return within_budget(box, shape, tile)


def within_budget(box: Box, shape: Sequence[int], tile: Sequence[int]) -> tuple[int, ...]:
    """``tile``, coarsened (edges doubled, so that the lines stay on the grid) until
    ``box`` has at most its share of :data:`TILE_BUDGET` tiles."""
    cut = list(tile)
    budget = max(1, TILE_BUDGET * prod(box[1]) // prod(shape))
    while tile_count(box, cut) > budget:
        cut = [min(2 * t, d) for t, d in zip(cut, shape)]
    return tuple(cut)
