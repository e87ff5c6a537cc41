"""The slice boxes of an index checked all at once (ocf.format.index.boxes).

The expected verdict comes from painting each box into an array of counts per element,
tensor by tensor: a tensor tiles its shape when every count is 1, a part's
boxes are disjoint when no count is above 1. The first tensor (in table order)
that fails is the one named.
"""

from __future__ import annotations

import itertools
from math import prod

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ocf.format.index.boxes import BoxFailure, CheckedBoxes, TensorColumns, check_boxes

Box = tuple[tuple[int, ...], tuple[int, ...]]


def _columns(tensors: list[tuple[tuple[int, ...], list[Box]]]
             ) -> tuple[np.ndarray, np.ndarray, TensorColumns]:
    starts = [v for _, boxes in tensors for lo, _ in boxes for v in lo]
    extents = [v for _, boxes in tensors for _, ext in boxes for v in ext]
    ranks = np.array([len(shape) for shape, _ in tensors], dtype=np.int64)
    dims = np.array([d for shape, _ in tensors for d in shape], dtype=np.uint64)
    return (np.array(starts, dtype=np.uint64), np.array(extents, dtype=np.uint64),
            TensorColumns(ranks, np.array([len(b) for _, b in tensors], dtype=np.int64),
                          np.array([prod(s) for s, _ in tensors], dtype=np.uint64),
                          np.cumsum(ranks) - ranks, dims))


def _painted(shape: tuple[int, ...], boxes: list[Box]) -> np.ndarray | None:
    """Counts per element; None when a box is empty or leaves the shape."""
    counts = np.zeros(shape, dtype=np.int64)
    for lo, ext in boxes:
        if any(e == 0 or s + e > d for s, e, d in zip(lo, ext, shape)) or prod(shape) == 0:
            return None
        counts[tuple(slice(s, s + e) for s, e in zip(lo, ext))] += 1
    return counts


def _expected(tensors: list[tuple[tuple[int, ...], list[Box]]], partial: bool
              ) -> tuple[int, str] | None:
    for i, (shape, boxes) in enumerate(tensors):
        counts = _painted(shape, boxes)
        if counts is None:
            return i, "R-SLICE-002" if prod(shape) == 0 else "R-SLICE-001"
        if partial and counts.max() > 1:
            return i, "R-PART-001"
        if not partial and (counts != 1).any():
            return i, "R-SLICE-002"
    return None


def _grid(shape: tuple[int, ...], tile: tuple[int, ...]) -> list[Box]:
    ranges = [range(0, d, t) for d, t in zip(shape, tile)]
    return [(lo, tuple(min(t, d - s) for s, t, d in zip(lo, tile, shape)))
            for lo in itertools.product(*ranges)]


@st.composite
def _tensor(draw: st.DrawFn) -> tuple[tuple[int, ...], list[Box]]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=0, max_size=3)))
    tile = tuple(draw(st.integers(1, d)) for d in shape)
    boxes = _grid(shape, tile)
    kind = draw(st.sampled_from(["grid", "drop", "duplicate", "grow", "shift", "uneven"]))
    if kind == "drop" and len(boxes) > 1:
        boxes.pop(draw(st.integers(0, len(boxes) - 1)))
    elif kind == "duplicate":
        boxes.append(boxes[draw(st.integers(0, len(boxes) - 1))])
    elif kind in ("grow", "shift") and shape:
        i, d = draw(st.integers(0, len(boxes) - 1)), draw(st.integers(0, len(shape) - 1))
        lo, ext = list(boxes[i][0]), list(boxes[i][1])
        if kind == "grow":
            ext[d] += draw(st.integers(1, 3))
        else:
            lo[d] = max(0, lo[d] + draw(st.sampled_from([-2, -1, 1, 2])))
        boxes[i] = (tuple(lo), tuple(ext))
    elif kind == "uneven" and len(shape) == 2 and shape[0] > 1:
        # Rows over columns: the top row band whole, the rest cut in columns (no grid).
        cut = draw(st.integers(1, shape[0] - 1))
        boxes = [((0, 0), (cut, shape[1]))] + [((cut, c), (shape[0] - cut, 1))
                                               for c in range(shape[1])]
    order = draw(st.permutations(range(len(boxes))))
    return shape, [boxes[i] for i in order]


@settings(max_examples=300, deadline=None)
@given(tensors=st.lists(_tensor(), min_size=1, max_size=5), partial=st.booleans())
def test_the_verdict_on_all_tensors_at_once_is_the_one_of_each_tensor_in_turn(
        tensors: list[tuple[tuple[int, ...], list[Box]]], partial: bool) -> None:
    starts, extents, columns = _columns(tensors)
    result = check_boxes(starts, extents, columns, partial=partial)
    expected = _expected(tensors, partial)
    if expected is None:
        assert isinstance(result, CheckedBoxes)
        assert result.elements.tolist() == [prod(e) for _, b in tensors for _, e in b]
        ranks = [len(s) for s, b in tensors for _ in b]
        assert result.value_start.tolist() == np.cumsum([0, *ranks[:-1]]).tolist()
    else:
        assert isinstance(result, BoxFailure)
        assert (result.tensor, result.requirement) == expected


def test_a_box_outside_its_shape_is_named_with_its_start_and_extent() -> None:
    tensors = [((4, 4), _grid((4, 4), (2, 2))), ((4, 4), [((0, 0), (4, 2)), ((0, 3), (4, 2))])]
    result = check_boxes(*_columns(tensors), partial=False)
    assert result == BoxFailure(1, "slice start [0, 3] extent [4, 2] is not a non-empty box "
                                "inside shape [4, 4]", "R-SLICE-001")


def test_an_earlier_overlap_is_named_before_a_later_box_outside_its_shape() -> None:
    tensors = [((4,), [((0,), (3,)), ((2,), (2,))]), ((4,), [((0,), (9,))])]
    result = check_boxes(*_columns(tensors), partial=False)
    assert isinstance(result, BoxFailure)
    assert (result.tensor, result.requirement) == (0, "R-SLICE-002")


def test_volumes_past_two_to_the_64_are_added_exactly() -> None:
    # 1024 boxes of 2^47 elements tile 2^57; 129 copies of the whole shape add up to
    # 2^64 + 2^57, which a sum in 64 bits would wrap around to the shape's 2^57.
    size = 1 << 57
    boxes = [((i << 47,), (1 << 47,)) for i in range(1 << 10)]
    assert isinstance(check_boxes(*_columns([((size,), boxes)]), partial=False),
                      CheckedBoxes)
    result = check_boxes(*_columns([((size,), [((0,), (size,))] * 129)]), partial=False)
    assert isinstance(result, BoxFailure)
    assert result.requirement == "R-SLICE-002"
