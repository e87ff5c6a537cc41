"""The boxes of an index's sliced tensors, checked together as arrays.

spec/format.md, "Slices" [R-SLICE-001] [R-SLICE-002], and spec/parts.md
[R-PART-001]. A distributed save stores each tensor as a grid of tiles, so an
index may hold millions of slices: the boxes of all tensors are checked with
array operations at once (a NumPy call per tensor costs more than its boxes
when a part holds four tiles of each of thousands of tensors). Only a
tensor whose boxes are not the cells of one grid goes on its own to the
general checks of :mod:`ocf.format.slicing`.

The verdict is the one a check of each tensor in table order would give:
the first tensor (by row) that breaks a rule is the one named.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ocf.format.slicing import arrays_disjoint, arrays_tile

_U64 = np.uint64
_LOW32 = _U64(0xFFFFFFFF)


class TensorColumns(NamedTuple):
    """The sliced tensors, one row each: rank, slice count, element count (uint64, the
    non-zero dimensions' product is at most 2^58), and where the dims start in ``dims``."""

    ranks: np.ndarray
    counts: np.ndarray
    elements: np.ndarray
    dim_start: np.ndarray
    dims: np.ndarray


class BoxFailure(NamedTuple):
    """The first sliced tensor (its position among them) that breaks a rule."""

    tensor: int
    message: str
    requirement: str


class CheckedBoxes(NamedTuple):
    """Per box, in table order: its element count, and where its values start in the
    slice_starts and slice_extents columns."""

    elements: np.ndarray
    value_start: np.ndarray


def check_boxes(starts: np.ndarray, extents: np.ndarray, tensors: TensorColumns, *,
                partial: bool, overlaps: bool = True) -> CheckedBoxes | BoxFailure:
    """Check the boxes of the sliced tensors ``tensors`` (their values one after the other
    in ``starts`` and ``extents``, uint64, as many as the ranks and counts need): each a
    non-empty box inside its shape [R-SLICE-001], of a tensor with elements, and
    together tiling the shape exactly [R-SLICE-002]; for a part index (``partial``),
    disjoint [R-PART-001], unless not ``overlaps`` (a merge checks them with the other
    parts' boxes)."""
    ranks, counts = tensors.ranks, tensors.counts
    box_tensor = np.repeat(np.arange(len(counts)), counts)
    box_rank = ranks[box_tensor]
    value_start = np.cumsum(box_rank) - box_rank
    value_box = np.repeat(np.arange(len(box_tensor)), box_rank)
    value_dim = np.arange(len(starts)) - value_start[value_box]
    size = tensors.dims[tensors.dim_start[box_tensor][value_box] + value_dim]
    # start + extent <= size, written so that no uint64 wraps.
    outside = (extents == 0) | (extents > size) | (starts > size - extents)
    del value_dim, size
    box_outside = np.zeros(len(box_tensor), dtype=bool)
    box_outside[value_box[outside]] = True
    del value_box, outside
    invalid = (tensors.elements == 0) | (np.bincount(box_tensor[box_outside],
                                                     minlength=len(counts)) > 0)
    valid = len(counts) if not invalid.any() else int(np.argmax(invalid))
    elements = _box_elements(extents, box_rank, value_start)
    box_first = np.cumsum(counts) - counts
    broken = np.zeros(len(counts), dtype=bool)
    if not partial:  # the volumes first: cheap, and the tiling check assumes them
        broken = ~_sums_equal(elements, box_first, tensors.elements)
    broken[valid:] = False
    candidates = ~broken & (counts >= 2)
    candidates[valid:] = False
    if partial and not overlaps:
        candidates[:] = False
    broken |= _overlapping(starts, extents, tensors, box_tensor, value_start, candidates,
                           partial)
    if broken.any():
        message, requirement = ("slices of the part overlap", "R-PART-001") if partial else (
            "slices overlap or do not cover the shape exactly", "R-SLICE-002")
        return BoxFailure(int(np.argmax(broken)), message, requirement)
    if valid < len(counts):
        return _invalid(valid, starts, extents, tensors, box_outside, box_first, value_start)
    return CheckedBoxes(elements, value_start)


def _box_elements(extents: np.ndarray, box_rank: np.ndarray, value_start: np.ndarray
                  ) -> np.ndarray:
    """The product of each box's extents (1 for a box of rank 0); exact for the boxes of
    valid tensors, whose products are below 2^58."""
    elements = np.ones(len(box_rank), dtype=_U64)
    shaped = box_rank > 0
    if shaped.any():
        elements[shaped] = np.multiply.reduceat(extents, value_start[shaped])
    return elements


def _sums_equal(elements: np.ndarray, box_first: np.ndarray, totals: np.ndarray
                ) -> np.ndarray:
    """Whether the boxes of each tensor add up to its element count, exactly: 4096 boxes
    of up to 2^58 elements can pass 2^64, so the high and low 32 bits add apart."""
    high = np.add.reduceat(elements >> _U64(32), box_first)
    low = np.add.reduceat(elements & _LOW32, box_first)
    result: np.ndarray = ((high + (low >> _U64(32))) == (totals >> _U64(32))) & (
        (low & _LOW32) == (totals & _LOW32))
    return result


def _overlapping(starts: np.ndarray, extents: np.ndarray, tensors: TensorColumns,
                 box_tensor: np.ndarray, value_start: np.ndarray, candidates: np.ndarray,
                 partial: bool) -> np.ndarray:
    """Per tensor, whether two of its boxes share an element (only ``candidates``, valid
    tensors of at least two boxes, are looked at). Tensors of one rank are taken
    together; those whose boxes are not the cells of one grid one by one."""
    broken = np.zeros(len(candidates), dtype=bool)
    for rank in np.unique(tensors.ranks[candidates]).tolist():
        chosen = candidates & (tensors.ranks == rank)
        boxes = np.flatnonzero(chosen[box_tensor])
        owner = box_tensor[boxes]
        if rank == 0:  # two boxes of a scalar are the same element
            broken[chosen] = True
            continue
        at = value_start[boxes][:, None] + np.arange(rank)
        lo = starts[at].astype(np.int64)  # below 2^58 in a valid tensor
        hi = lo + extents[at].astype(np.int64)
        cell, lines = _grid_cells(owner, lo, hi)
        loose = np.zeros(len(chosen), dtype=bool)
        loose[owner[~cell]] = True
        broken |= _same_corner(owner, lines, len(chosen)) & ~loose
        for tensor in np.flatnonzero(loose).tolist():
            mine = owner == tensor
            first = int(tensors.dim_start[tensor])
            shape = tensors.dims[first : first + rank].tolist()
            ok = arrays_disjoint(lo[mine], hi[mine] - lo[mine]) if partial else \
                arrays_tile(lo[mine], hi[mine] - lo[mine], shape)
            broken[tensor] = not ok
    return broken


def _grid_cells(owner: np.ndarray, lo: np.ndarray, hi: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per box, whether it is a cell of the grid drawn by the edges of all boxes of its
    tensor: along every dimension no edge of the tensor lies strictly inside it. Two
    such boxes then meet only when they start at the same corner. Also, per box and
    dimension, the rank of its start among all edges (of all tensors, ordered by tensor
    and value): equal ranks, equal tensor and start."""
    cell = np.ones(len(owner), dtype=bool)
    lines = np.empty(lo.shape, dtype=np.int64)
    for d in range(lo.shape[1]):
        rank = _ranks(owner, lo[:, d], hi[:, d])
        lines[:, d] = rank[: len(owner)]
        cell &= rank[len(owner) :] == lines[:, d] + 1
    return cell, lines


def _ranks(owner: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The dense rank of each of ``lo`` then ``hi`` among them all, ordered by (owner,
    value); ``owner`` is sorted. One sort of one key when each tensor's values fit after
    the last's in 62 bits (always, in practice), else a sort by two keys."""
    starts = np.flatnonzero(np.diff(owner, prepend=-1))
    span = np.maximum.reduceat(hi, starts) + 1
    if float(span.astype(np.float64).sum()) < 2.0**62:
        base = np.repeat(np.cumsum(span) - span, np.diff(np.append(starts, len(owner))))
        keys = np.concatenate([base + lo, base + hi])
        order = np.argsort(keys)
        ordered = keys[order]
        fresh = np.ones(len(keys), dtype=bool)
        fresh[1:] = ordered[1:] != ordered[:-1]
    else:
        both, values = np.concatenate([owner, owner]), np.concatenate([lo, hi])
        order = np.lexsort((values, both))
        fresh = np.ones(len(order), dtype=bool)
        fresh[1:] = (values[order][1:] != values[order][:-1]) | (
            both[order][1:] != both[order][:-1])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum(fresh)
    return rank


def _same_corner(owner: np.ndarray, lines: np.ndarray, tensors: int) -> np.ndarray:
    """Per tensor (of ``tensors``), whether two of its boxes start at the same corner:
    the same edge ranks (:func:`_grid_cells`) along every dimension."""
    top = int(lines.max()) + 1
    if float(top) ** lines.shape[1] < 2.0**62:
        key = lines[:, 0].copy()
        for d in range(1, lines.shape[1]):
            key = key * top + lines[:, d]
        order = np.argsort(key)
        same = key[order][1:] == key[order][:-1]
    else:
        order = np.lexsort(lines.T[::-1])
        same = (lines[order][1:] == lines[order][:-1]).all(axis=1)
    result = np.zeros(tensors, dtype=bool)
    result[owner[order][1:][same]] = True
    return result


def _invalid(tensor: int, starts: np.ndarray, extents: np.ndarray, tensors: TensorColumns,
             box_outside: np.ndarray, box_first: np.ndarray, value_start: np.ndarray
             ) -> BoxFailure:
    """The failure of tensor ``tensor``: no elements, or its first box outside its shape."""
    if tensors.elements[tensor] == 0:
        return BoxFailure(tensor, "a tensor with no elements must be stored whole",
                          "R-SLICE-002")
    rank = int(tensors.ranks[tensor])
    first = int(tensors.dim_start[tensor])
    shape = tensors.dims[first : first + rank].tolist()
    box = int(box_first[tensor]) + int(np.argmax(
        box_outside[box_first[tensor] : box_first[tensor] + tensors.counts[tensor]]))
    at = int(value_start[box])
    return BoxFailure(tensor, f"slice start {starts[at : at + rank].tolist()} extent "
                      f"{extents[at : at + rank].tolist()} is not a non-empty box inside "
                      f"shape {shape}", "R-SLICE-001")
