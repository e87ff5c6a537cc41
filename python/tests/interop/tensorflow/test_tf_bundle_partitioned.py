"""Partitioned TensorFlow tensors: every slice is checked before the tensor is
allocated, and the slices are checked not to overlap without memory proportional
to the elements (ocf.interop.tensorflow.tiling).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import tf_support
from bundle_files import (
    FLOATS,
    entry,
    float_entry,
    header,
    write_files,
)
from memory_support import traced_memory

from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    OCFError,
)
from ocf.tensorflow import BundleReader, BundleWriter
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb


def test_partitioned_tensor_with_inconsistent_slice_entry_is_invalid(tmp_path: Path) -> None:
    parent = entry(dtype=1, shape=[3], slices=[pb.TensorSliceProto(extents=[{"length": 3}])])
    slice_key = b"\x00x\x00\x01\x01\x01\x80\x83"  # EncodeTensorNameSlice("x", [0:3])
    wrong = entry(dtype=2, shape=[3], size=24)
    prefix = write_files(tmp_path, [(b"", header()), (slice_key, wrong), (b"x", parent)])
    with BundleReader(prefix) as reader, pytest.raises(InvalidError, match="does not match"):
        reader.read("x")
    right = float_entry()
    prefix = write_files(tmp_path, [(b"", header()), (slice_key, right), (b"x", parent)], FLOATS)
    with BundleReader(prefix) as reader:
        assert reader.read("x").tolist() == [1.0, 2.0, 3.0]
        assert reader.keys() == ["x"]


def test_partitioned_tensor_larger_than_its_slices_is_refused_before_allocating(
    tmp_path: Path,
) -> None:
    huge = entry(dtype=1, shape=[2**40], slices=[pb.TensorSliceProto(extents=[{"length": 3}])])
    slice_key = b"\x00x\x00\x01\x01\x01\x80\x83"
    prefix = write_files(
        tmp_path, [(b"", header()), (slice_key, float_entry()), (b"x", huge)], FLOATS
    )
    with (traced_memory() as memory,
          BundleReader(prefix) as reader, pytest.raises(InvalidError, match="slices hold 3")):
        reader.read("x")
    assert memory.peak < 1 << 20


def partitioned_files(
    tmp_path: Path, code: int, shape: list[int], slices: list[tuple[list[tuple[int, int]],
                                                                    dict[str, int]]],
    data: bytes,
) -> Path:
    """Parent entry "x" of ``shape``, and per slice its extents and stored entry fields."""
    from ocf.interop.tensorflow.slice_keys import slice_key

    parent = pb.BundleEntryProto(dtype=code)
    for dim in shape:
        parent.shape.dims.add(size=dim)
    entries = [(b"", header()), (b"x", b"")]
    for extents, fields in slices:
        proto = parent.slices.add()
        for start, length in extents:
            proto.extents.add(start=start, length=length)
        entries.append((slice_key("x", extents), entry(
            dtype=code, shape=[n for _, n in extents], **fields)))
    entries[1] = (b"x", parent.SerializeToString())
    return write_files(tmp_path, sorted(entries), data)


BIG = 2**40
SHARED = np.arange(1 << 16, dtype=np.float32).tobytes()  # 256 KiB


@pytest.mark.parametrize(
    ("code", "shape", "slices", "data", "error", "match"),
    [
        # float32[2**40] in one slice claiming 0 bytes: 4 TiB would be allocated.
        (1, [BIG], [([(0, BIG)], {"size": 0})], b"", InvalidError, "needs 4398046511104"),
        (1, [BIG], [([(0, BIG)], {"size": 4})], FLOATS, InvalidError, "needs"),
        # A string slice too small for its elements.
        (7, [BIG], [([(0, BIG)], {"size": 4})], FLOATS, InvalidError, "cannot fit"),
        # A slice running past the end of its data file.
        (1, [BIG], [([(0, BIG)], {"size": 4 * BIG})], FLOATS, MalformedError, "past the end"),
        (1, [6], [([(0, 3)], {"size": 12}), ([(3, 3)], {"size": 12, "offset": 4})], FLOATS,
         MalformedError, "past the end"),
        # Sixteen slices of 256 KiB sharing the same stored bytes: 4 MiB out of 256 KiB.
        (1, [16 << 16],
         [([(i << 16, 1 << 16)], {"size": 1 << 18, "crc32c": tf_support.masked(SHARED)})
          for i in range(16)],
         SHARED, InvalidError, "share bytes"),
    ],
    ids=["empty-4TiB", "short-4TiB", "string-4TiB", "past-end-4TiB", "past-end-second",
         "shared-bytes"],
)
def test_hostile_partitioned_entries_are_refused_before_allocating(
    tmp_path: Path, code: int, shape: list[int],
    slices: list[tuple[list[tuple[int, int]], dict[str, int]]], data: bytes,
    error: type[OCFError], match: str,
) -> None:
    prefix = partitioned_files(tmp_path, code, shape, slices, data)
    with (traced_memory() as memory,
          BundleReader(prefix) as reader, pytest.raises(error, match=match) as caught):
        reader.read("x")
    assert caught.value.key == "x"
    assert caught.value.path is not None
    assert caught.value.path.startswith(str(prefix))
    assert memory.peak < 1 << 20


FOUR = np.array([1.0, 2.0, 3.0, 4.0], np.float32).tobytes()


@pytest.mark.parametrize(
    ("shape", "first", "second"),
    [
        ([4], [(0, 2)], [(1, 2)]),  # the element counts add up, the slices overlap
        ([2, 2], [(0, 2), (0, 1)], [(0, 1), (0, 2)]),
    ],
)
def test_overlapping_slices_with_their_own_bytes_are_invalid(
    tmp_path: Path, shape: list[int], first: list[tuple[int, int]],
    second: list[tuple[int, int]],
) -> None:
    crc = tf_support.masked(FOUR[:8])
    slices = [(first, {"size": 8, "crc32c": crc}),
              (second, {"size": 8, "offset": 8, "crc32c": tf_support.masked(FOUR[8:])})]
    prefix = partitioned_files(tmp_path, 1, shape, slices, FOUR)
    with BundleReader(prefix) as reader, pytest.raises(InvalidError, match="overlap") as caught:
        reader.read("x")
    assert caught.value.key == "x"


def test_assembling_needs_no_memory_per_element_beyond_the_output(tmp_path: Path) -> None:
    # Four int8 slices of 1 MiB: the output (4 MiB) and one slice's bytes at a time;
    # a coverage mask of one byte per element would add 4 MiB.
    full = np.random.default_rng(0).integers(-128, 128, size=(4, 1 << 20), dtype=np.int8)
    with BundleWriter(tmp_path / "ckpt") as writer:
        for i in range(4):
            writer.add_slice("x", full.shape, (i, 0), full[i : i + 1])
    with BundleReader(tmp_path / "ckpt") as reader:
        reader.entry("x")
        with traced_memory() as memory:
            value = reader.read("x")
    assert np.array_equal(value, full)
    assert memory.peak < full.nbytes * 3 // 2


def brick_wall() -> list[tuple[tuple[int, int], ...]]:
    """An irregular tiling of a 6 x 6 tensor: rows of bricks offset against each other."""
    boxes = []
    for row in range(3):
        cuts = [0, 3, 6] if row % 2 == 0 else [0, 1, 4, 6]
        boxes += [((2 * row, 2), (a, b - a)) for a, b in itertools.pairwise(cuts)]
    return boxes


@pytest.mark.parametrize("grid_cells", [1 << 22, 0])  # 0: checked pair by pair
def test_tiling_check_accepts_tilings_and_names_overlapping_slices(
    monkeypatch: pytest.MonkeyPatch, grid_cells: int
) -> None:
    from ocf.interop.tensorflow import tiling

    monkeypatch.setattr(tiling, "MAX_GRID_CELLS", grid_cells)
    wall = brick_wall()
    tiling.check_tiling(wall, "f", "x")
    tiling.check_tiling([((0, 4),), ((4, 0),), ((4, 4),), ((2, 0),)], "f", "x")
    tiling.check_tiling([((i, 1), (0, 2**40)) for i in range(3000)], "f", "x")
    with pytest.raises(InvalidError, match=r"slices \[0:2, 3:6\] and \[1:3, 5:6\] overlap"):
        tiling.check_tiling([*wall, ((1, 2), (5, 1))], "f", "x")
    with pytest.raises(InvalidError, match=r"\[0:3\] and \[2:4\] overlap") as caught:
        tiling.check_tiling([((0, 3),), ((2, 2),)], "f", "x")
    assert (caught.value.path, caught.value.key) == ("f", "x")
    many = [((i, 1), (0, 8)) for i in range(2000)] + [((1999, 1), (7, 1))]
    with pytest.raises(InvalidError, match=r"\[1999:2000, 0:8\] and \[1999:2000, 7:8\]"):
        tiling.check_tiling(many, "f", "x")


def test_irregular_tiling_is_assembled(tmp_path: Path) -> None:
    full = np.arange(36, dtype=np.int32).reshape(6, 6)
    with BundleWriter(tmp_path / "ckpt") as writer:
        for box in brick_wall():
            (r, nr), (c, nc) = box
            writer.add_slice("x", full.shape, (r, c), full[r : r + nr, c : c + nc])
    with BundleReader(tmp_path / "ckpt") as reader:
        assert np.array_equal(reader.read("x"), full)


def test_slices_too_irregular_to_check_are_refused_as_a_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ocf.interop.tensorflow import tiling

    # Thin rows beside thin columns: a grid of 10**6 cells; sorted along either
    # dimension, every row (or column) meets all the others.
    rows = [((i, 1), (0, 1000)) for i in range(1000)]
    columns = [((0, 1000), (1000 + j, 1)) for j in range(1000)]
    tiling.check_tiling(rows + columns, "f", "x")  # on the grid
    monkeypatch.setattr(tiling, "MAX_GRID_CELLS", 1 << 16)
    tiling.check_tiling(rows + columns, "f", "x")  # pair by pair, within the limit
    monkeypatch.setattr(tiling, "MAX_PAIRS", 1 << 16)
    with pytest.raises(LimitExceededError, match="too irregular") as caught:
        tiling.check_tiling(rows + columns, "f", "x")
    assert (caught.value.path, caught.value.key) == ("f", "x")
