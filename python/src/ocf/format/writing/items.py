"""Checking what a writer is given, once, into write items (spec/format.md).

Every array a :class:`~ocf.format.writer.Writer` stores passes here before
a byte of it is written: its key [R-TENSOR-001], dtype [R-DTYPE-001] and
shape [R-TENSOR-003], and for a slice its box and its tensor's dtype and
global shape [R-SLICE-001]. What passes is a write item: the raw bytes of
one block and the table row of their tensor. ``write``, ``write_many``,
``write_slice`` and ``write_slices`` all go through the same checks, in the
same order, so they refuse the same things with the same errors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.index.encoding import TableBuilder
from ocf.format.limits import MAX_ELEMENTS, MAX_KEY_BYTES, MAX_RANK, nonzero_product
from ocf.format.raw import to_raw
from ocf.format.slicing import Box, arrays_disjoint, arrays_tile
from ocf.format.writing.tiles import BandBuffer, TileRun, grid_cells, is_regular, tile_runs

# The NumPy dtypes whose arrays are their own raw bytes when C-ordered (the
# little-endian machines' native types; ml_dtypes types export no buffer).
_VIEWABLE: dict[np.dtype[np.generic], dtypes.Dtype] = {
    np.dtype(row.kind): row for row in dtypes.TABLE
    if isinstance(row.kind, type) and sys.byteorder == "little"}


@dataclass(slots=True)
class Item:
    """One block to write: checked, and its tensor's row already in the table."""

    row: int
    dtype: dtypes.Dtype
    raw: memoryview  # flat bytes: len() is the byte count
    box: Box | None  # (start, extent) of a slice; None for a tensor stored whole
    # Its chunk size, when not the one the write gives all its items (0: one chunk).
    chunk_size: int | None = None
    # In an incremental write, what comparing it with the block the base stores in its
    # place already found: equal bytes (True), changed ones (False), or not asked (None).
    same_as_base: bool | None = None


class Tensors:
    """The tensors of one write so far, which each new array is checked against: their
    rows in the tensor table (``table``), by key, and the boxes of those stored in
    slices."""

    def __init__(self) -> None:
        self.table = TableBuilder()
        self.rows: dict[str, int] = {}
        self._boxes: dict[int, _Boxes] = {}
        self._bands = BandBuffer()  # tile runs are written one after the other

    def whole(self, key: str, value: object) -> Item:
        """The item that stores ``value`` whole under ``key``."""
        array = value if type(value) is np.ndarray else np.asarray(value)
        dtype = _VIEWABLE.get(array.dtype)
        if dtype is not None and array.size and array.ndim <= MAX_RANK \
                and array.flags.c_contiguous:
            # What for_array and to_raw give such an array, at a fraction of their cost
            # (a checkpoint of many small tensors pays it per tensor).
            raw = array.data.cast("B")
        else:
            dtype = dtypes.for_array(array)
            if array.size == 0 or array.ndim > MAX_RANK:
                # An array with elements has fewer than 2^58 of them, or could not be
                # laid out in memory: only empty ones can break the limit.
                check_shape(key, array.shape)
            raw = to_raw(array, dtype)
        self._check_key(key)
        row = self.rows[key] = self.table.add_tensor(key, dtype.code, array.shape)
        return Item(row, dtype, raw, None)

    def slices(self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int],
               boxes: Sequence[Box] | None = None) -> Iterator[Item]:
        """The items that store the box ``array`` at ``start`` of the tensor ``key`` of
        global ``shape``: one, or one per box of ``boxes`` (each (start, extent) in
        global coordinates, inside the box of ``array``). Each is checked as it is
        reached, so the boxes before a bad one are written, as by one call each."""
        array = np.asarray(array)
        if boxes is None:
            yield self._slice(key, array, start, shape)
            return
        if not len(boxes):
            return
        origin, starts, extents = _boxes_inside(key, array, start, boxes)
        corner = origin.tolist()
        windows = [(box_start, tuple(slice(b - o, b - o + e) for b, o, e
                                     in zip(box_start, corner, extent)))
                   for box_start, extent in zip(starts.tolist(), extents.tolist())]
        first_start, first_window = windows[0]
        first = self._slice(key, array[first_window], first_start, shape)
        yield first
        if self._all_valid(first, array, origin, extents, shape):
            # What _slice checks of each box holds for all of them, checked at once above
            # (the tiles of a box: thousands of them): only the bytes are left.
            self._boxes[first.row].add_arrays(starts[1:], extents[1:])
            for box_start, window in windows[1:]:
                tile = array[window]
                yield Item(first.row, first.dtype, to_raw(tile, first.dtype),
                           (tuple(box_start), tile.shape))
            return
        for box_start, window in windows[1:]:  # one at a time, raising where _slice does
            yield self._slice(key, array[window], box_start, shape)

    def _all_valid(self, first: Item, array: np.ndarray, origin: np.ndarray,
                   extents: np.ndarray, shape: Sequence[int]) -> bool:
        """Whether every box of ``extents`` (inside the box of ``array`` at ``origin``,
        which _boxes_inside checked) passes _slice's checks, given that the first did:
        the same key, dtype and global shape; each box non-empty, the array's box
        inside the global shape."""
        bound = np.asarray([int(x) for x in shape], np.int64)
        return (first.box is not None and len(bound) == array.ndim and bool(
            (extents > 0).all()) and bool((origin >= 0).all())
                and bool((origin + np.asarray(array.shape, np.int64) <= bound).all()))

    def tiles(self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int],
              tile: Sequence[int]) -> Iterator[Item | TileRun]:
        """What stores the box ``array`` at ``start`` of the tensor ``key`` of global
        ``shape`` as the cells of the grid of ``tile``: the items :meth:`slices` gives
        for those cells, or, for a regular box (:func:`is_regular`), runs of tiles cut
        with array operations, after the checks :meth:`slices` makes of the first."""
        array = np.asarray(array)
        try:
            origin = tuple(int(x) for x in start)
            bound = tuple(int(x) for x in shape)
        except (TypeError, ValueError):  # refused as write_slice refuses it
            yield from self.slices(key, array, start, shape)
            return
        try:
            cut = tuple(int(t) for t in tile)
        except (TypeError, ValueError):
            cut = ()
        if len(cut) != array.ndim or any(t < 1 for t in cut):
            raise InvalidError(f"tile {list(tile)} is not a positive extent per dimension of "
                               f"the box of shape {list(array.shape)}", key=key,
                               requirement="R-SLICE-001")
        dtype = dtypes.for_array(array)
        if not (is_regular(array, origin, cut, dtype) and _inside(array, origin, bound)):
            yield from self.slices(key, array, start, shape,
                                   grid_cells(origin, array.shape, cut))
            return
        _, box = self._check_slice(key, array, origin, shape)
        row = self._sliced_row(key, dtype, shape)
        # The tiles of a box tile it: the box stands for them in the checks at commit.
        self._boxes[row].add(box)
        yield from tile_runs(row, dtype, array, origin, cut, self._bands)

    def check_slices(self, must_tile: bool, path: str | os.PathLike[str]) -> None:
        """At commit: the boxes of each tensor stored in slices tile its global shape
        exactly [R-SLICE-002], or (not ``must_tile``: a part, spec/parts.md) are at
        least pairwise disjoint [R-SLICE-001]. Every box was checked to lie inside
        the shape when it was written."""
        for row, boxes in self._boxes.items():
            key, shape = self.table.keys[row], self.table.shapes[row]
            lo, extent = boxes.columns(len(shape))
            if not must_tile:
                if not arrays_disjoint(lo, extent):
                    raise InvalidError("slices of this tensor overlap", key=key, path=path,
                                       requirement="R-SLICE-001")
            elif sum(extent.prod(axis=1).tolist()) != prod(shape) or not arrays_tile(
                    lo, extent, shape):
                raise InvalidError(f"slices do not tile the global shape {list(shape)} "
                                   "exactly (overlap or gap)", key=key, path=path,
                                   requirement="R-SLICE-002")

    def _slice(self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int]
               ) -> Item:
        dtype, box = self._check_slice(key, array, start, shape)
        raw = to_raw(array, dtype)
        row = self._sliced_row(key, dtype, shape)
        self._boxes[row].add(box)
        return Item(row, dtype, raw, box)

    def _check_slice(self, key: str, array: np.ndarray, start: Sequence[int],
                     shape: Sequence[int]) -> tuple[dtypes.Dtype, Box]:
        """Check the box ``array`` at ``start`` of the tensor ``key`` of global ``shape``
        [R-SLICE-001]; its dtype and (start, extent)."""
        dtype = dtypes.for_array(array)
        start, shape = tuple(int(x) for x in start), tuple(int(x) for x in shape)
        row = self.rows.get(key)
        if row is not None:
            self._check_same_tensor(key, row, dtype, shape)
        if array.size == 0 or not _inside(array, start, shape):
            raise InvalidError(f"slice of shape {list(array.shape)} at {list(start)} is not a "
                               f"non-empty box inside {list(shape)}", key=key,
                               requirement="R-SLICE-001")
        check_shape(key, shape)
        return dtype, (start, array.shape)

    def _sliced_row(self, key: str, dtype: dtypes.Dtype, shape: Sequence[int]) -> int:
        """The row of the tensor stored in slices under ``key``, added for a new key."""
        row = self.rows.get(key)
        if row is None:
            self._check_key(key)
            row = self.rows[key] = self.table.add_tensor(key, dtype.code,
                                                         tuple(int(x) for x in shape),
                                                         sliced=True)
            self._boxes[row] = _Boxes()
        return row

    def _check_same_tensor(self, key: str, row: int, dtype: dtypes.Dtype,
                           shape: tuple[int, ...]) -> None:
        """A slice of a key written before: of a tensor stored in slices, of its dtype
        and global shape [R-SLICE-001]."""
        code, known = self.table.dtype_codes[row], self.table.shapes[row]
        whole = row not in self._boxes
        if whole or code != dtype.code or known != shape:
            raise InvalidError(f"slice has dtype {dtype.name} and global shape {list(shape)}, "
                               f"the tensor written before under this key "
                               f"{dtypes.BY_CODE[code].name} and "
                               f"{list(known)}{' stored whole' if whole else ''}",
                               key=key, requirement="R-SLICE-001")

    def _check_key(self, key: str) -> None:
        """A key is a non-empty UTF-8 string of at most 4096 bytes without NUL, new to
        this write [R-TENSOR-001]."""
        if not isinstance(key, str) or not key or "\0" in key:
            raise InvalidError("tensor keys must be non-empty str without NUL", key=repr(key),
                               requirement="R-TENSOR-001")
        try:  # an ASCII key is its own UTF-8; others may hold a lone surrogate
            size = len(key) if key.isascii() else len(key.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidError(f"key is not valid Unicode ({exc.reason} at character "
                               f"{exc.start}); keys are UTF-8", key=key,
                               requirement="R-TENSOR-001") from None
        if size > MAX_KEY_BYTES:
            raise LimitExceededError(f"key is {size} bytes, above the limit of "
                                     f"{MAX_KEY_BYTES}", requirement="R-TENSOR-001")
        if key in self.rows:
            raise InvalidError("key written twice", key=key, requirement="R-TENSOR-001")


def check_shape(key: str, shape: tuple[int, ...]) -> None:
    """Refuse a shape beyond the limits of [R-TENSOR-003], empty ones included."""
    if len(shape) > MAX_RANK:
        raise LimitExceededError(f"rank {len(shape)} is above the limit of {MAX_RANK}",
                                 key=key, requirement="R-TENSOR-003")
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)}: its non-zero dimensions multiply to "
                                 "more than 2^58", key=key, requirement="R-TENSOR-003")


def _boxes_inside(key: str, array: np.ndarray, start: Sequence[int], boxes: Sequence[Box]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``start`` and the starts and extents of ``boxes`` as arrays (one row a box);
    InvalidError unless each box lies inside the box of ``array`` at ``start``."""
    try:
        origin = np.asarray(start, np.int64)
        starts = np.asarray([box[0] for box in boxes], np.int64)
        extents = np.asarray([box[1] for box in boxes], np.int64)
        fits = (origin.shape == (array.ndim,) and starts.shape == extents.shape
                == (len(boxes), array.ndim))
    except (TypeError, ValueError, OverflowError, IndexError):
        fits = False
    if not fits or (starts < origin).any() or (
            starts + extents > origin + np.asarray(array.shape, np.int64)).any():
        raise InvalidError(f"the boxes to write must each be a (start, extent) inside the box "
                           f"of shape {list(array.shape)} at {list(start)} that the array "
                           "holds", key=key, requirement="R-SLICE-001")
    return origin, starts, extents


def _inside(array: np.ndarray, start: tuple[int, ...], shape: Sequence[int]) -> bool:
    """Whether ``array`` at ``start`` is a box inside ``shape``, of its rank."""
    return len(start) == len(shape) == array.ndim and all(
        b >= 0 and b + e <= d for b, e, d in zip(start, array.shape, shape))


class _Boxes:
    """The boxes of one tensor's slices so far: one at a time, or as arrays of many."""

    def __init__(self) -> None:
        self._single: list[Box] = []
        self._arrays: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, box: Box) -> None:
        self._single.append(box)

    def add_arrays(self, starts: np.ndarray, extents: np.ndarray) -> None:
        """Add boxes: ``starts`` and ``extents`` have a row per box."""
        self._arrays.append((starts, extents))

    def columns(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """Starts and extents of all boxes (int64, a row per box)."""
        count = len(self._single)
        single = [np.array([b for b, _ in self._single], np.int64).reshape(count, rank),
                  np.array([e for _, e in self._single], np.int64).reshape(count, rank)]
        return (np.concatenate([single[0], *(s for s, _ in self._arrays)]).astype(np.int64),
                np.concatenate([single[1], *(e for _, e in self._arrays)]).astype(np.int64))
