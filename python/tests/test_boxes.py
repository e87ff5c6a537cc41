"""The slice tiling check agrees with painting every box into a grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ocf.format.slicing import _pairs_overlapping_along, boxes_disjoint, boxes_tile


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
