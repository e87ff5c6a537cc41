"""The slice tiling check agrees with painting every box into a grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ocf.format.slicing import (
    CORNERS_PER_BOX,
    _corners_cancel,
    _pairs_overlapping_along,
    arrays_tile,
    boxes_disjoint,
    boxes_tile,
)

Boxes = list[tuple[tuple[int, ...], tuple[int, ...]]]


@st.composite
def boxes_in_shape(draw: st.DrawFn) -> tuple[tuple[int, ...], list[tuple[tuple[int, ...],
                                                                        tuple[int, ...]]]]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=0, max_size=3)))
    boxes = []
    for _ in range(draw(st.integers(0, 8))):
        start = tuple(draw(st.integers(0, d - 1)) for d in shape)
        extent = tuple(draw(st.integers(1, d - s)) for s, d in zip(start, shape))
        boxes.append((start, extent))
    return shape, boxes


def times_painted(shape: tuple[int, ...],
                  boxes: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> np.ndarray:
    """How many boxes cover each element."""
    grid = np.zeros(shape, dtype=np.int64)
    for start, extent in boxes:
        grid[tuple(slice(s, s + e) for s, e in zip(start, extent))] += 1
    return grid


def painted_exactly_once(shape: tuple[int, ...],
                         boxes: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> bool:
    return bool((times_painted(shape, boxes) == 1).all())


@settings(max_examples=400, deadline=None)
@given(case=boxes_in_shape())
def test_boxes_tile_iff_every_element_is_covered_exactly_once(
    case: tuple[tuple[int, ...], list[tuple[tuple[int, ...], tuple[int, ...]]]],
) -> None:
    shape, boxes = case
    assert boxes_tile(boxes, shape) == painted_exactly_once(shape, boxes)


def test_a_regular_grid_of_boxes_tiles_and_one_shifted_box_breaks_it() -> None:
    grid = [((i * 2, j * 3), (2, 3)) for i in range(16) for j in range(16)]
    assert boxes_tile(grid, (32, 48))
    shifted = [*grid[:-1], ((30, 44), (2, 3))]
    assert not boxes_tile(shifted, (32, 48))


def painted_at_most_once(shape: tuple[int, ...],
                         boxes: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> bool:
    return bool((times_painted(shape, boxes) <= 1).all())


@settings(max_examples=400, deadline=None)
@given(case=boxes_in_shape())
def test_boxes_disjoint_iff_no_element_is_covered_twice(
    case: tuple[tuple[int, ...], list[tuple[tuple[int, ...], tuple[int, ...]]]],
) -> None:
    shape, boxes = case
    assert boxes_disjoint(boxes) == painted_at_most_once(shape, boxes)


@settings(max_examples=200, deadline=None)
@given(intervals=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 8)), max_size=12))
def test_the_pairs_overlapping_along_a_dimension_are_counted_exactly(
    intervals: list[tuple[int, int]],
) -> None:
    lo = np.array([s for s, _ in intervals], dtype=np.int64)
    hi = lo + np.array([e for _, e in intervals], dtype=np.int64)
    by_hand = sum(1 for a in range(len(lo)) for b in range(a + 1, len(lo))
                  if lo[a] < hi[b] and lo[b] < hi[a])
    assert _pairs_overlapping_along(lo, hi) == by_hand


def test_rows_over_columns_tile_and_one_widened_column_overlaps() -> None:
    # Not the cells of one grid, and as many pairs meet along each dimension as the
    # sweep can face: whole rows in the top half, whole columns in the bottom half.
    h = 64
    rows = [((i, 0), (1, h)) for i in range(h)]
    columns = [((h, j), (h, 1)) for j in range(h)]
    assert boxes_tile(rows + columns, (2 * h, h))
    widened = [*columns[:-2], ((h, h - 2), (h, 2)), ((h, h - 1), (h, 1))]
    assert not boxes_disjoint(rows + widened)


@st.composite
def tilings_perturbed(draw: st.DrawFn) -> tuple[tuple[int, ...], Boxes]:
    """A tiling made by cutting boxes in two, then often one box moved or resized, or one
    box repeated: mostly inputs whose element counts still add up, valid or not."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    boxes: Boxes = [((0,) * len(shape), shape)]
    for _ in range(draw(st.integers(1, 14))):
        i = draw(st.integers(0, len(boxes) - 1))
        start, extent = boxes[i]
        d = draw(st.integers(0, len(shape) - 1))
        if extent[d] < 2:
            continue
        cut = draw(st.integers(1, extent[d] - 1))
        boxes[i] = (start, (*extent[:d], cut, *extent[d + 1:]))
        boxes.append(((*start[:d], start[d] + cut, *start[d + 1:]),
                      (*extent[:d], extent[d] - cut, *extent[d + 1:])))
    if draw(st.booleans()):
        i, d = draw(st.integers(0, len(boxes) - 1)), draw(st.integers(0, len(shape) - 1))
        start, extent = boxes[i]
        at = draw(st.integers(0, shape[d] - 1))
        size = draw(st.integers(1, shape[d] - at))
        boxes[i] = ((*start[:d], at, *start[d + 1:]), (*extent[:d], size, *extent[d + 1:]))
    if len(boxes) > 1 and draw(st.booleans()):
        boxes[0] = boxes[1]
    return shape, boxes


@settings(max_examples=600, deadline=None)
@given(case=tilings_perturbed())
def test_counting_corners_agrees_with_painting_on_near_tilings(
    case: tuple[tuple[int, ...], Boxes],
) -> None:
    shape, boxes = case
    assert boxes_tile(boxes, shape) == painted_exactly_once(shape, boxes)
    lo = np.array([b for b, _ in boxes], dtype=np.int64).reshape(len(boxes), len(shape))
    hi = lo + np.array([e for _, e in boxes], dtype=np.int64).reshape(len(boxes), len(shape))
    if sum(int(np.prod(e)) for _, e in boxes) == int(np.prod(shape)):
        # Rank 4 at most: at most 16 corners per box, so the corners decide.
        verdict = _corners_cancel(lo, hi, np.array(shape, dtype=np.int64))
        assert verdict is not None
        assert verdict == painted_exactly_once(shape, boxes)


def middle_box_tiling(rank: int) -> tuple[tuple[int, ...], Boxes]:
    """Shape 3^rank: the middle cell, and around it, for each dimension d, the two slabs
    below and above it along d that lie in the middle along the dimensions before d.
    The middle box ends inside the shape along every dimension: 2^rank corners."""
    shape = (3,) * rank
    boxes: Boxes = [((1,) * rank, (1,) * rank)]
    for d in range(rank):
        for at in (0, 2):
            boxes.append(((1,) * d + (at,) + (0,) * (rank - d - 1),
                          (1,) * d + (1,) + (3,) * (rank - d - 1)))
    return shape, boxes


def test_boxes_with_too_many_corners_are_swept_instead_and_still_judged_exactly() -> None:
    shape, boxes = middle_box_tiling(10)
    lo = np.array([b for b, _ in boxes], dtype=np.int64)
    hi = lo + np.array([e for _, e in boxes], dtype=np.int64)
    assert CORNERS_PER_BOX * len(boxes) < 2**10
    assert _corners_cancel(lo, hi, np.array(shape, dtype=np.int64)) is None
    assert boxes_tile(boxes, shape)
    assert painted_exactly_once(shape, boxes)
    # The middle cell moved onto a slab: the counts still add up, the tiling breaks.
    moved = [((0,) * 10, (1,) * 10), *boxes[1:]]
    assert not boxes_tile(moved, shape)


def test_the_worst_rows_over_columns_tiling_is_decided_by_its_corners() -> None:
    # 4096 slices (the limit of format 1.1) of a (4096, 2048) matrix: the sweep would compare about
    # 2 million pairs, the corners are 2 per box.
    h = 2048
    rows = [((i, 0), (1, h)) for i in range(h)]
    columns = [((h, j), (h, 1)) for j in range(h)]
    lo = np.array([b for b, _ in rows + columns], dtype=np.int64)
    extent = np.array([e for _, e in rows + columns], dtype=np.int64)
    shape = np.array([2 * h, h], dtype=np.int64)
    assert _corners_cancel(lo, lo + extent, shape) is True
    assert arrays_tile(lo, extent, (2 * h, h))
    # Column h - 2 two wide overlaps column h - 1; row 0 left out keeps the count.
    lo, extent = lo[1:].copy(), extent[1:].copy()
    extent[-2] = (h, 2)
    assert int(extent.prod(axis=1).sum()) == 2 * h * h
    assert _corners_cancel(lo, lo + extent, shape) is False
    assert not arrays_tile(lo, extent, (2 * h, h))
