"""Checking that the slices of a partitioned tensor do not overlap, geometrically.

The slices are boxes (per dimension a start and a length) inside the tensor's
shape, checked by ocf.interop.tensorflow.entries. The reader also checks that their
element counts add up to the tensor's; boxes that do not overlap then tile
the tensor exactly. The check needs memory proportional to the number of
slices, never to the number of elements: the boxes are drawn on the grid of
their own boundaries (one cell per distinct interval between boundaries, per
dimension), which for the regular partitions TensorFlow writes has one cell
per slice. A layout so irregular that this grid would exceed
``MAX_GRID_CELLS`` cells is checked pair by pair instead, sorted along the
dimension where the fewest pairs of boxes meet (only those are compared); one
where more than ``MAX_PAIRS`` pairs meet along every dimension is refused as
LIMIT_EXCEEDED (TensorFlow's partitioners write regular grids).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from ocf.format.errors import InvalidError, LimitExceededError
from ocf.interop.tensorflow.encoding import Path

Box = Sequence[tuple[int, int]]  # per dimension (start, length)

# A 4 MiB boolean grid.
MAX_GRID_CELLS = 1 << 22
# Pairs of boxes compared when the grid would be larger: a few seconds at most.
MAX_PAIRS = 1 << 26


def check_tiling(boxes: Sequence[Box], path: Path, key: str) -> None:
    """Refuse (InvalidError) two boxes that share an element."""
    solid = [box for box in boxes if all(n > 0 for _, n in box)]  # empty ones share nothing
    if len(solid) < 2:
        return
    rank = len(solid[0])
    if rank == 0:  # every box is the one element of a scalar
        raise _overlap(path, key, solid[0], solid[1])
    bounds = [sorted({x for box in solid for x in (box[d][0], box[d][0] + box[d][1])})
              for d in range(rank)]
    cells = math.prod(len(b) - 1 for b in bounds)
    if cells <= MAX_GRID_CELLS:
        _check_on_grid(solid, bounds, path, key)
    else:
        _check_pairwise(solid, path, key)


def _overlap(path: Path, key: str, first: Box, second: Box) -> InvalidError:
    def text(box: Box) -> str:
        return "[" + ", ".join(f"{s}:{s + n}" for s, n in box) + "]"

    return InvalidError(f"slices {text(first)} and {text(second)} overlap", path=path, key=key)


def _check_on_grid(boxes: list[Box], bounds: list[list[int]], path: Path, key: str) -> None:
    grid = np.zeros(tuple(len(b) - 1 for b in bounds), dtype=np.bool_)
    earlier: list[Box] = []
    for box in boxes:
        region = tuple(
            slice(bisect_left(b, s), bisect_left(b, s + n)) for (s, n), b in zip(box, bounds)
        )
        cells = grid[region]
        if cells.any():
            # Name an earlier box holding one of the cells (found only on failure).
            first = tuple(int(i[0]) for i in np.nonzero(cells))
            corner = tuple(b[r.start + i] for b, r, i in zip(bounds, region, first))
            other = next(o for o in earlier
                         if all(s <= c < s + n for (s, n), c in zip(o, corner)))
            raise _overlap(path, key, other, box)
        grid[region] = True
        earlier.append(box)


def _check_pairwise(boxes: list[Box], path: Path, key: str) -> None:
    starts = np.array([[s for s, _ in box] for box in boxes], dtype=np.int64)
    ends = starts + np.array([[n for _, n in box] for box in boxes], dtype=np.int64)
    # Sorted by start along one dimension, box i can only meet the boxes after it that
    # start before its end there: the pairs to compare. Sort along the dimension with
    # the fewest of them.
    best: tuple[int, int, np.ndarray, np.ndarray] | None = None
    for d in range(starts.shape[1]):
        order = np.argsort(starts[:, d], kind="stable")
        stops = np.searchsorted(starts[order, d], ends[order, d], side="left")
        pairs = int(np.sum(stops - np.arange(1, len(boxes) + 1)))
        if best is None or pairs < best[0]:
            best = (pairs, d, order, stops)
    assert best is not None
    pairs, dim, order, stops = best
    if pairs > MAX_PAIRS:
        raise LimitExceededError(
            f"the {len(boxes)} slices are too irregular to check for overlaps: {pairs} pairs "
            f"of them meet along dimension {dim}, the limit is {MAX_PAIRS}",
            path=path,
            key=key,
        )
    starts, ends = starts[order], ends[order]
    for i in range(len(boxes) - 1):
        stop = int(stops[i])
        if stop <= i + 1:
            continue
        meets = np.all((starts[i + 1 : stop] < ends[i]) & (starts[i] < ends[i + 1 : stop]),
                       axis=1)
        hit = np.flatnonzero(meets)
        if hit.size:
            raise _overlap(path, key, boxes[int(order[i])], boxes[int(order[i + 1 + hit[0]])])
