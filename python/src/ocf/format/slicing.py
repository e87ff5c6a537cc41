"""Boxes of a tensor's index space: tiling checks and partial reads.

A box is ``(start, extent)`` per dimension. Stored slices must tile their
tensor's shape [R-SLICE-002] (:func:`arrays_tile`); a partial read (``get_slice``) selects a box
(plus steps) and needs to know which stored chunks hold its elements.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError

Box = tuple[tuple[int, ...], tuple[int, ...]]
# A partial read lists its runs of contiguous bytes when there are at most
# this many; beyond that it reads the whole span between first and last.
_MAX_RUNS = 1 << 16


def boxes_tile(boxes: Sequence[Box], shape: tuple[int, ...]) -> bool:
    """True when the boxes lie in ``shape``, are disjoint and cover it exactly."""
    if not boxes_fill(boxes, shape):
        return False
    if len(boxes) < 2:
        return True
    # Values are at most 2^58 once the boxes lie inside a valid shape.
    lo = np.array([b for b, _ in boxes], dtype=np.int64).reshape(len(boxes), len(shape))
    extent = np.array([e for _, e in boxes], dtype=np.int64).reshape(len(boxes), len(shape))
    return arrays_tile(lo, extent, shape)


def boxes_fill(boxes: Sequence[Box], shape: tuple[int, ...]) -> bool:
    """True when the boxes lie in ``shape`` and their volumes add up to its volume: for
    boxes known to be disjoint, that they tile it."""
    inside = all(
        len(b) == len(e) == len(shape) and all(x >= 0 and y >= 1 and x + y <= d
                                               for x, y, d in zip(b, e, shape))
        for b, e in boxes
    )
    return inside and sum(prod(e) for _, e in boxes) == prod(shape)


def boxes_disjoint(boxes: Sequence[Box]) -> bool:
    """True when no two of the boxes (each inside one shape) share an element."""
    return _disjoint(boxes)


def _disjoint(boxes: Sequence[Box]) -> bool:
    """True when no two boxes share an element [R-SLICE-002]."""
    if len(boxes) < 2:
        return True
    # Values are at most 2^58 once the boxes lie inside a valid shape.
    lo = np.array([b for b, _ in boxes], dtype=np.int64)
    return arrays_disjoint(lo, np.array([e for _, e in boxes], dtype=np.int64))


def arrays_disjoint(lo: np.ndarray, extent: np.ndarray) -> bool:
    """True when no two boxes share an element: box ``i`` starts at ``lo[i]`` and extends
    ``extent[i]`` (int64 arrays of ``n`` rows and one column per dimension, each box
    inside one shape, so that ``lo + extent`` is below 2^58) [R-SLICE-002].

    Boxes that are the cells of one grid take O(r n log n); the others a sweep
    along the dimension where the fewest pairs of boxes overlap: after sorting
    by start there, box i can only meet the boxes that start before its end
    there, and only those are compared with it, so the cost is r times that
    number of pairs on top of O(r n log n). Memory stays linear in n.
    """
    if len(lo) < 2:
        return True
    hi = lo + extent
    if lo.shape[1] == 0:
        return False  # two boxes of a scalar are the same element
    if _cells_of_one_grid(lo, hi):
        return len(np.unique(lo, axis=0)) == len(lo)
    axis = min(range(lo.shape[1]), key=lambda d: _pairs_overlapping_along(lo[:, d], hi[:, d]))
    order = np.argsort(lo[:, axis], kind="stable")
    lo, hi = lo[order], hi[order]
    starts = lo[:, axis]
    for i in range(len(lo) - 1):
        stop = int(np.searchsorted(starts, hi[i, axis], side="left"))
        if stop > i + 1 and ((lo[i + 1 : stop] < hi[i]) & (lo[i] < hi[i + 1 : stop])).all(
            axis=1
        ).any():
            return False
    return True


def _pairs_overlapping_along(lo: np.ndarray, hi: np.ndarray) -> int:
    """How many pairs of the intervals [lo, hi) overlap: all pairs less those where one
    interval ends at or before the other starts."""
    n = len(lo)
    apart = n - np.searchsorted(np.sort(lo), hi, side="left")
    return n * (n - 1) // 2 - int(apart.sum())


# The corner count is used while a tensor's boxes have at most this many corners per box
# on average (at rank r a box has up to 2^r): every tiling of rank 4 or less, and the
# rows-over-columns tilings that make the sweep quadratic, stay far below it.
CORNERS_PER_BOX = 16


def arrays_tile(lo: np.ndarray, extent: np.ndarray, shape: Sequence[int]) -> bool:
    """True when the boxes (int64 arrays as for :func:`arrays_disjoint`, each box non-empty
    and inside ``shape``, their element counts adding up to the shape's) tile ``shape``
    exactly: no two share an element [R-SLICE-002].

    Grid cells take one sort; other boxes are counted by their corners
    (:func:`_corners_cancel`) in O(r c) for c corners when they have at most
    CORNERS_PER_BOX per box on average, else take the sweep of :func:`arrays_disjoint`.
    """
    if len(lo) < 2:
        return True
    if lo.shape[1] == 0:
        return False  # two boxes of a scalar are the same element
    hi = lo + extent
    if _cells_of_one_grid(lo, hi):
        return len(np.unique(lo, axis=0)) == len(lo)
    verdict = _corners_cancel(lo, hi, np.array(shape, dtype=np.int64))
    return arrays_disjoint(lo, extent) if verdict is None else verdict


def _corners_cancel(lo: np.ndarray, hi: np.ndarray, shape: np.ndarray) -> bool | None:
    """Whether boxes inside ``shape`` tile it, by their signed corners; None when they have
    more than CORNERS_PER_BOX corners per box on average.

    A box's indicator is the sum over its 2^r corners c of (-1)^(number of upper
    coordinates of c) times the orthant {x >= c}; the orthants of distinct points are
    linearly independent, so the boxes tile ``shape`` iff these signed corners, summed
    point by point, equal the shape's own. On the shape, an orthant at an upper
    coordinate equal to the shape's size is empty, so such corners are left out (the
    shape then keeps one corner, the origin), and a dimension no box splits drops
    away. A dimension where more boxes start at 0 than end at its size is mirrored
    first, so that more corners are left out.
    """
    split = np.flatnonzero(((lo != 0) | (hi != shape)).any(axis=0))
    if len(split) == 0:
        return len(lo) == 1  # every box is the whole shape
    lo, hi, size = lo[:, split], hi[:, split], shape[split]
    mirror = (lo == 0).sum(axis=0) > (hi == size).sum(axis=0)
    lo, hi = np.where(mirror, size - hi, lo), np.where(mirror, size - lo, hi)
    kept_upper = hi < size
    corners_per_box = np.left_shift(np.int64(1), kept_upper.sum(axis=1, dtype=np.int64))
    if int(corners_per_box.sum()) > CORNERS_PER_BOX * len(lo):
        return None
    # Expand the corners one dimension at a time: each corner so far takes the box's
    # start along the next dimension, and, when that upper end is kept, its end too.
    box = np.arange(len(lo))
    sign = np.ones(len(lo), dtype=np.int64)
    points = np.zeros((len(lo), 0), dtype=np.int64)
    for d in range(len(split)):
        takes = 1 + kept_upper[box, d]
        box, sign, points = np.repeat(box, takes), np.repeat(sign, takes), np.repeat(
            points, takes, axis=0)
        upper = np.zeros(len(box), dtype=bool)
        upper[np.cumsum(takes)[takes == 2] - 1] = True
        sign[upper] = -sign[upper]
        points = np.column_stack([points, np.where(upper, hi[box, d], lo[box, d])])
    # The shape's own corner, the origin, with the opposite sign: every sum must be 0.
    points = np.vstack([points, np.zeros((1, len(split)), dtype=np.int64)])
    sign = np.append(sign, -1)
    order = np.lexsort(points.T[::-1])
    points, sign = points[order], sign[order]
    first = np.ones(len(points), dtype=bool)
    first[1:] = (points[1:] != points[:-1]).any(axis=1)
    return not np.add.reduceat(sign, np.flatnonzero(first)).any()


def _cells_of_one_grid(lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether every box is one cell of the grid drawn by all boxes' edges: then two boxes
    meet only when they are the same cell, that is start at the same corner. Tiles and
    the boxes of regular partitions are; the sweep handles the rest."""
    for d in range(lo.shape[1]):
        lines = np.union1d(lo[:, d], hi[:, d])
        after = np.searchsorted(lines, lo[:, d], side="right")
        if (after >= len(lines)).any() or (lines[np.minimum(after, len(lines) - 1)]
                                           != hi[:, d]).any():
            return False
    return True


def as_array_index(index: tuple[slice, ...]) -> Any:
    """``index`` with a trailing Ellipsis, so that NumPy returns an array, never a
    scalar, even for a 0-d array (``a[()]`` is a scalar, ``a[...]`` an array)."""
    return (*index, Ellipsis)


def intersect(a: Box, b: Box) -> Box | None:
    """The common part of two boxes, or None."""
    start = tuple(map(max, a[0], b[0]))
    stop = tuple(min(s + e, t + f) for s, e, t, f in zip(a[0], a[1], b[0], b[1]))
    if any(x >= y for x, y in zip(start, stop)):
        return None
    return start, tuple(map(operator.sub, stop, start))


@dataclass(frozen=True)
class Selection:
    """A NumPy basic index resolved against a shape.

    ``box`` is the bounding box of the selected elements; ``steps`` then
    picks every n-th element of it; ``squeeze`` lists the dimensions that an
    integer index removes.
    """

    box: Box
    steps: tuple[int, ...]
    squeeze: tuple[int, ...]

    def apply(self, boxed: np.ndarray) -> np.ndarray:
        """Select from an array holding exactly the box's elements."""
        stepped: np.ndarray = boxed[as_array_index(tuple(slice(None, None, s)
                                                          for s in self.steps))]
        return stepped.reshape(
            [n for d, n in enumerate(stepped.shape) if d not in self.squeeze]
        )


def select(index: object, shape: tuple[int, ...]) -> Selection:
    """Resolve ``index`` (ints, slices, Ellipsis, or a tuple of them) against ``shape``."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(item is Ellipsis for item in items) > 1:
        raise InvalidError("an index can hold at most one Ellipsis")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        fill = len(shape) - (len(items) - 1)
        items[at : at + 1] = [slice(None)] * max(fill, 0)
    if len(items) > len(shape):
        raise InvalidError(f"index has {len(items)} entries for a tensor of rank {len(shape)}")
    items += [slice(None)] * (len(shape) - len(items))
    start, extent, steps, squeeze = [], [], [], []
    for d, (item, size) in enumerate(zip(items, shape)):
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            i = int(item) + size if item < 0 else int(item)
            if not 0 <= i < size:
                raise InvalidError(f"index {item} is out of range for dimension {d} of size "
                                   f"{size}")
            start.append(i)
            extent.append(1)
            steps.append(1)
            squeeze.append(d)
        elif isinstance(item, slice):
            first, stop, step = item.indices(size)
            if step < 0:
                raise InvalidError(f"negative step {step} in dimension {d} is not supported")
            count = len(range(first, stop, step))
            start.append(first if count else 0)
            extent.append((count - 1) * step + 1 if count else 0)
            steps.append(step)
        else:
            raise InvalidError(f"unsupported index {item!r} in dimension {d}; use ints, "
                               "slices and Ellipsis")
    return Selection((tuple(start), tuple(extent)), tuple(steps), tuple(squeeze))


def chunks_touching(
    shape: tuple[int, ...], itemsize: int, chunk_bytes: int, chunk_count: int, box: Box
) -> np.ndarray:
    """Ids of the chunks (of ``chunk_bytes`` raw bytes) holding any element of ``box``.

    The tensor is stored in C order; the box's elements form runs of
    contiguous bytes, one per combination of the leading indices.
    """
    start, extent = box
    if chunk_count == 0 or prod(extent) == 0:
        return np.zeros(0, dtype=np.int64)
    if not shape or chunk_count == 1 or tuple(extent) == tuple(shape):
        return np.arange(chunk_count)  # every chunk: no runs to count (most small reads)
    strides = [prod(shape[d + 1 :]) for d in range(len(shape))]
    # Dimensions after `split` are selected whole, so each run spans them.
    split = len(shape) - 1
    while split > 0 and extent[split] == shape[split]:
        split -= 1
    run_elements = extent[split] * strides[split]
    leading = [np.arange(s, s + e) for s, e in zip(start[:split], extent[:split])]
    if prod(extent[:split]) > _MAX_RUNS:
        first = sum(s * t for s, t in zip(start, strides))
        last = sum((s + e - 1) * t for s, e, t in zip(start, extent, strides))
        run_starts, run_elements = np.array([first]), last - first + 1
    else:
        grid = np.meshgrid(*leading, indexing="ij") if leading else []
        offsets = sum((g.reshape(-1) * t for g, t in zip(grid, strides)), np.zeros(1, np.int64))
        run_starts = offsets + start[split] * strides[split]
    first_chunk = run_starts * itemsize // chunk_bytes
    last_chunk = ((run_starts + run_elements) * itemsize - 1) // chunk_bytes
    marks = np.zeros(chunk_count + 1, dtype=np.int64)
    np.add.at(marks, first_chunk, 1)
    np.add.at(marks, last_chunk + 1, -1)
    return np.flatnonzero(np.cumsum(marks)[:chunk_count] > 0)
