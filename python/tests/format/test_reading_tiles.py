"""Regions of tensors stored in many slices (ocf.format.reading.tiles): the slices a region
meets found by one array test, whole uncompressed tiles copied in groups.

Expected arrays come from NumPy indexing of the array written; tiles are written
in row-major order (a grid the reader copies as one strided array), in column-major
or shuffled order (copied one by one), compressed (read one by one), and in several
chunks each.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ocf
from ocf.format.errors import IntegrityError, InvalidError

SHAPE = (24, 20)
TILE = (4, 5)


def _tiles(order: str, shape: tuple[int, int] = SHAPE, tile: tuple[int, int] = TILE
           ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    corners = list(itertools.product(range(0, shape[0], tile[0]), range(0, shape[1], tile[1])))
    if order == "columns":
        corners.sort(key=lambda c: (c[1], c[0]))
    elif order == "shuffled":
        np.random.default_rng(0).shuffle(corners)
    return [(c, tile) for c in corners]


def _write(path: Path, full: np.ndarray, order: str, tile: tuple[int, int] = TILE,
           **options: object) -> None:
    with ocf.Writer(path, **options) as writer:  # type: ignore[arg-type]
        writer.write_slices("w", full, (0, 0), full.shape, _tiles(order, full.shape, tile))


def _full(dtype: str) -> np.ndarray:
    values = np.random.default_rng(1).integers(0, 200, SHAPE)
    if dtype == "bool":
        return values % 2 == 0
    return values.astype(getattr(ml_dtypes, dtype, dtype))


REGIONS = [np.s_[:, :], np.s_[8:16, :], np.s_[:, 5:15], np.s_[3:17, 2:19], np.s_[5, :],
           np.s_[4:8, 10:15], np.s_[::3, 1::4], np.s_[23, 19]]


@pytest.mark.parametrize("order", ["rows", "columns", "shuffled"])
@pytest.mark.parametrize(("dtype", "options"), [
    ("float32", {}), ("int16", {}), ("bool", {}), ("float8_e4m3fn", {}), ("bfloat16", {}),
    ("float64", {"compression": "zstd"})])
def test_every_region_reads_as_numpy_indexing_of_the_tensor(
        tmp_path: Path, order: str, dtype: str, options: dict[str, object]) -> None:
    full = _full(dtype)
    _write(tmp_path / "t.ocf", full, order, **options)
    with ocf.Reader(tmp_path / "t.ocf") as reader:
        assert len(reader["w"].slices) == 24
        for region in REGIONS:
            expected = full[region]
            for mapped in (True, False):
                got = reader.get_slice("w", region, mapped=mapped)
                assert got.dtype == expected.dtype
                np.testing.assert_array_equal(got, expected)
            out = np.empty_like(expected)
            assert reader.read_slice_into("w", region, out) is out
            np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("order", ["rows", "shuffled"])
def test_tiles_of_several_chunks_read_only_the_chunks_a_cut_region_needs(
        tmp_path: Path, order: str) -> None:
    full = np.random.default_rng(2).standard_normal((96, 80))
    _write(tmp_path / "t.ocf", full, order, (32, 40), chunk_size=4096)  # 3 chunks a tile
    with ocf.Reader(tmp_path / "t.ocf") as reader:
        for region in (np.s_[32:64, :], np.s_[10:50, 7:60], np.s_[33:35, 41:43], np.s_[:, :]):
            for mapped in (True, False):
                reader.bytes_read = 0
                np.testing.assert_array_equal(reader.get_slice("w", region, mapped=mapped),
                                              full[region])
        # Two elements in one chunk of one tile: that chunk alone.
        assert reader.bytes_read == 96 * 80 * 8
        reader.bytes_read = 0
        reader.get_slice("w", np.s_[33:35, 41:43])
        assert reader.bytes_read == 4096


@pytest.mark.parametrize("order", ["rows", "shuffled"])
def test_a_region_is_read_into_a_strided_view_of_a_larger_array(tmp_path: Path,
                                                                 order: str) -> None:
    full = _full("float32")
    _write(tmp_path / "t.ocf", full, order)
    larger = np.zeros((30, 40), np.float32)
    target = larger[2:16:2, 3:33:2]  # 7 x 15, neither row- nor column-contiguous
    with ocf.Reader(tmp_path / "t.ocf") as reader:
        reader.read_slice_into("w", np.s_[4:11, 5:20], target)
    np.testing.assert_array_equal(target, full[4:11, 5:20])
    untouched = larger.copy()
    untouched[2:16:2, 3:33:2] = 0
    assert not untouched.any()


def test_a_region_of_whole_tiles_reads_exactly_its_bytes(tmp_path: Path) -> None:
    full = _full("float32")
    _write(tmp_path / "t.ocf", full, "rows")
    with ocf.Reader(tmp_path / "t.ocf") as reader:
        reader.get_slice("w", np.s_[8:16, 5:15])
        assert reader.bytes_read == 8 * 10 * 4


def test_read_slice_into_refuses_a_target_of_another_shape_or_dtype(tmp_path: Path) -> None:
    full = _full("float32")
    _write(tmp_path / "t.ocf", full, "rows")
    with ocf.Reader(tmp_path / "t.ocf") as reader:
        for out in (np.empty((8, 20), np.float64), np.empty((8, 19), np.float32),
                    np.empty((8, 20), np.float32)[::-1][::-1].copy().view()[:, :19]):
            with pytest.raises(InvalidError, match="the region needs a writable float32"):
                reader.read_slice_into("w", np.s_[8:16], out)
        frozen = np.empty((8, 20), np.float32)
        frozen.flags.writeable = False
        with pytest.raises(InvalidError, match="read-only"):
            reader.read_slice_into("w", np.s_[8:16], frozen)


@pytest.mark.parametrize("order", ["rows", "shuffled"])
@pytest.mark.parametrize("mapped", [True, False])
def test_a_corrupt_tile_inside_the_region_is_refused_naming_its_slice(
        tmp_path: Path, order: str, mapped: bool) -> None:
    full = _full("float32")
    path = tmp_path / "t.ocf"
    _write(path, full, order)
    with ocf.Reader(path) as reader:
        slices = reader["w"].slices
        victim = next(i for i, p in enumerate(slices) if p.start == (8, 10))
        block = slices[victim].block
        shard = reader.index.shards[block.shard].path or path.name
    data = bytearray((tmp_path / shard).read_bytes())
    data[block.offset + 7] ^= 0x40
    (tmp_path / shard).write_bytes(bytes(data))
    with ocf.Reader(path) as reader:
        with pytest.raises(IntegrityError, match=f"slice {victim}, chunk 0"):
            reader.get_slice("w", np.s_[4:16, :], mapped=mapped)
        with pytest.raises(IntegrityError, match=f"slice {victim}, chunk 0"):
            reader.read_slice_into("w", np.s_[8:12, 10:15], np.empty((4, 5), np.float32))
        # A region that does not meet the tile reads, and checks, only its own.
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[12:, :], mapped=mapped),
                                      full[12:])
