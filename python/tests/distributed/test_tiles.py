"""Tiled parts (ocf.distributed.parts, ``tile_bytes``): boxes stored as grids of tiles.

Expected arrays come from NumPy on the inputs; bytes read are the reader's
own count of stored bytes (whole chunks, each checksummed).
"""

from __future__ import annotations

import itertools
from math import prod
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ocf
from ocf.distributed.parts import PartWriter, Slice, merge_parts, new_save_id, write_part
from ocf.distributed.parts.tiling import MAX_GRID_TILES, TILE_BUDGET, tile_shape, tiles_of
from ocf.format.slicing import boxes_tile

SAVE = "00112233445566aa"


def _bounds(size: int, parts: int) -> list[tuple[int, int]]:
    edges = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(size), parts)])
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def _save_by(directory: Path, full: np.ndarray, axis: int, parts: int, **options: object
             ) -> None:
    save_id = new_save_id()
    for part, (a, b) in enumerate(_bounds(full.shape[axis], parts)):
        window = (slice(None),) * axis + (slice(a, b),)
        start = tuple(a if d == axis else 0 for d in range(full.ndim))
        write_part(directory, {"w": Slice(full[window], start, full.shape)}, part=part,
                   parts=parts, save_id=save_id, **options)
    merge_parts(directory, save_id=save_id, parts=parts)


# -- the tile grid ---------------------------------------------------------------------------


@given(shape=st.lists(st.integers(1, 5000), min_size=2, max_size=4),
       itemsize=st.sampled_from([1, 2, 4, 8]), tile_bytes=st.integers(1, 1 << 22))
def test_the_grid_has_tiles_of_about_tile_bytes_and_at_most_max_grid_tiles(
        shape: list[int], itemsize: int, tile_bytes: int) -> None:
    tile = tile_shape(shape, itemsize, tile_bytes)
    assert all(1 <= t <= d for t, d in zip(tile, shape))
    count = prod(-(-d // t) for d, t in zip(shape, tile))
    assert count <= MAX_GRID_TILES
    wanted = min(MAX_GRID_TILES, -(-prod(shape) // max(1, tile_bytes // itemsize)))
    # Never more tiles than wanted; fewer only as far as rounding the counts per
    # dimension down to integers (or a dimension shorter than its share) makes it.
    assert count <= max(1, wanted)


def test_the_grid_splits_every_dimension_into_about_as_many_tiles() -> None:
    # 4096 x 1024 float32 in 16 KiB tiles: 1024 tiles, 32 along each dimension.
    assert tile_shape((4096, 1024), 4, 16 << 10) == (128, 32)
    assert tile_shape((1024, 1024), 4, 16 << 10) == (64, 64)
    # A dimension too short for its share passes it on to the others.
    # (4 KiB tiles of 100000 x 2 float32: 196 wanted, 2 x 98.)
    assert tile_shape((100000, 2), 4, 4096) == (1021, 1)


@given(shape=st.lists(st.integers(1, 300), min_size=2, max_size=3), data=st.data(),
       tile_bytes=st.integers(4, 4096))
def test_the_tiles_of_a_box_tile_it_within_its_budget(shape: list[int], data: st.DataObject,
                                                      tile_bytes: int) -> None:
    start = tuple(data.draw(st.integers(0, d - 1)) for d in shape)
    extent = tuple(data.draw(st.integers(1, d - s)) for s, d in zip(start, shape))
    tiles = tiles_of((start, extent), shape, 4, tile_bytes)
    local = [(tuple(a - s for a, s in zip(t, start)), e) for t, e in tiles]
    assert boxes_tile(local, extent)
    assert len(tiles) <= max(1, TILE_BUDGET * prod(extent) // prod(shape))


# -- merge and read back ---------------------------------------------------------------------


@st.composite
def _tiled_save(draw: st.DrawFn) -> tuple[np.ndarray, int, list[tuple[int, int]], int]:
    rank = draw(st.integers(2, 3))
    shape = tuple(draw(st.lists(st.integers(1, 40), min_size=rank, max_size=rank)))
    axis = draw(st.integers(0, rank - 1))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, shape[axis] - 1)), max_size=3))))
    edges = [0, *(c for c in cuts if c < shape[axis]), shape[axis]]
    seed = draw(st.integers(0, 2**32 - 1))
    dtype = draw(st.sampled_from([np.float32, np.int8, np.float64, np.bool_]))
    array = np.random.default_rng(seed).standard_normal(shape)
    array = (array > 0) if dtype is np.bool_ else (array * 50).astype(dtype)
    return array, axis, list(itertools.pairwise(edges)), draw(st.integers(1, 512))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_tiled_save(), compress=st.booleans(), data=st.data())
def test_tiled_parts_merge_and_read_back_bit_exactly(
        tmp_path_factory: pytest.TempPathFactory,
        case: tuple[np.ndarray, int, list[tuple[int, int]], int], compress: bool,
        data: st.DataObject) -> None:
    array, axis, runs, tile_bytes = case
    directory = tmp_path_factory.mktemp("tiled")
    save_id = new_save_id()
    parts = len(runs) + 1  # the last part holds a whole tensor, tiled too
    for part, (a, b) in enumerate(runs):
        window = (slice(None),) * axis + (slice(a, b),)
        start = tuple(a if d == axis else 0 for d in range(array.ndim))
        write_part(directory, {"t": Slice(array[window], start, array.shape)}, part=part,
                   parts=parts, save_id=save_id, tile_bytes=tile_bytes,
                   compression="zstd" if compress else None)
    write_part(directory, {"whole": array}, part=parts - 1, parts=parts, save_id=save_id,
               tile_bytes=tile_bytes)
    merge_parts(directory, save_id=save_id, parts=parts)
    with ocf.open(directory) as reader:
        for key in ("t", "whole"):
            assert reader.read_tensor(key).tobytes() == array.tobytes()
            for _ in range(3):
                region = tuple(slice(*sorted(data.draw(st.tuples(st.integers(0, d),
                                                                 st.integers(0, d)))))
                               for d in array.shape)
                got = reader.get_slice(key, region)
                assert got.shape == array[region].shape
                assert got.tobytes() == array[region].tobytes()
            step = tuple(slice(None, None, data.draw(st.integers(1, 3))) for _ in array.shape)
            assert reader.get_slice(key, step).tobytes() == array[step].tobytes()


def test_tiles_are_slices_of_the_merged_index(tmp_path: Path) -> None:
    full = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    _save_by(tmp_path, full, 0, 2, tile_bytes=512)  # 16 tiles of 16 x 8
    with ocf.open(tmp_path) as reader:
        slices = reader["w"].slices
        assert len(slices) == 16
        assert {p.extent for p in slices} == {(16, 8)}
        assert reader.read_tensor("w").tobytes() == full.tobytes()


def test_without_tile_bytes_each_box_stays_one_slice(tmp_path: Path) -> None:
    full = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    _save_by(tmp_path / "rows", full, 0, 2)
    write_dir = tmp_path / "whole"
    write_part(write_dir, {"w": full, "v": np.arange(9.0)}, part=0, parts=1, save_id=SAVE,
               tile_bytes=64)
    merge_parts(write_dir, save_id=SAVE, parts=1)
    with ocf.open(tmp_path / "rows") as reader:
        assert len(reader["w"].slices) == 2
    with ocf.open(write_dir) as reader:
        # A whole tensor of rank 2 is tiled: 4-element tiles, 11 x 11 of them.
        assert len(reader["w"].slices) == len(tiles_of(((0, 0), (64, 32)), (64, 32), 4, 64))
        assert len(reader["w"].slices) == 121
        assert reader.read_tensor("w").tobytes() == full.tobytes()
        assert reader["v"].block is not None  # rank 1: whole
        assert not reader["v"].slices


# -- bytes read ------------------------------------------------------------------------------


@pytest.mark.parametrize("readers", [2, 3])
def test_a_column_band_of_a_row_saved_tiled_tensor_reads_about_what_it_needs(
        tmp_path: Path, readers: int) -> None:
    # 1024 x 512 float32 (2 MiB) saved by rows by 4 writers in 4 KiB tiles: a grid
    # of 23 x 22 tiles of 45 x 24 elements, one chunk each.
    full = np.random.default_rng(1).standard_normal((1024, 512)).astype(np.float32)
    _save_by(tmp_path, full, 0, 4, tile_bytes=4096, chunk_size=64 << 10)
    tile_rows, tile_cols = tile_shape(full.shape, 4, 4096)
    assert (tile_rows, tile_cols) == (45, 24)
    # Allowance: a band whose edge falls inside a column of tiles reads that whole
    # column of tiles, at most tile_cols - 1 columns it does not need, per edge.
    edge = (tile_cols - 1) * full.shape[0] * 4
    needed_all = read_all = 0
    for a, b in _bounds(full.shape[1], readers):
        with ocf.open(tmp_path) as reader:
            got = reader.get_slice("w", np.s_[:, a:b])
            assert got.tobytes() == np.ascontiguousarray(full[:, a:b]).tobytes()
            needed = got.nbytes
            assert reader.bytes_read <= needed + 2 * edge
            assert reader.bytes_read <= 1.1 * needed + edge
            needed_all += needed
            read_all += reader.bytes_read
    assert read_all <= 1.1 * needed_all


def test_untiled_row_saved_tensor_reads_every_chunk_for_a_column_band(tmp_path: Path) -> None:
    # The layout tiles fix: each box one run of chunks, every chunk touched.
    full = np.random.default_rng(1).standard_normal((1024, 512)).astype(np.float32)
    _save_by(tmp_path, full, 0, 4, chunk_size=64 << 10)
    with ocf.open(tmp_path) as reader:
        got = reader.get_slice("w", np.s_[:, :256])
        assert reader.bytes_read == 2 * got.nbytes


def test_a_region_of_a_tensor_in_thousands_of_tiles_reads_only_the_tiles_it_meets(
        tmp_path: Path) -> None:
    # 4096 slices (the most a tensor could have before format 1.2): a small region reads
    # the 4 tiles it meets and nothing else. How fast the tiles are found is for
    # the benchmarks (python/benchmarks/bench_distributed.py), never a timed test.
    full = np.arange(512 * 512, dtype=np.int32).reshape(512, 512)
    with PartWriter(tmp_path, part=0, parts=1, save_id=SAVE) as writer:
        for r, c in itertools.product(range(0, 512, 8), range(0, 512, 8)):
            writer.write_slice("w", full[r:r + 8, c:c + 8], (r, c), full.shape)
    merge_parts(tmp_path, save_id=SAVE, parts=1)
    tile_bytes = 8 * 8 * 4
    with ocf.open(tmp_path) as reader:
        assert len(reader["w"].slices) == 4096
        for i in range(200):
            before = reader.bytes_read
            got = reader.get_slice("w", np.s_[i + 4 : i + 12, i + 4 : i + 12])
            assert got.tobytes() == full[i + 4 : i + 12, i + 4 : i + 12].tobytes()
            meets = 1 if i % 8 == 4 else 4  # an aligned region is one tile
            assert reader.bytes_read - before == meets * tile_bytes, i
        assert reader.read_tensor("w").tobytes() == full.tobytes()


# -- errors are those of untiled writes ------------------------------------------------------


def test_overlapping_tiled_boxes_are_refused_at_commit(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path, part=0, parts=2, save_id=SAVE, tile_bytes=16)
    writer.write_slice("w", np.ones((4, 4)), (0, 0), (8, 4))
    writer.write_slice("w", np.ones((4, 4)), (2, 0), (8, 4))
    with pytest.raises(ocf.InvalidError, match="overlap"):
        writer.commit()
    assert not list(tmp_path.iterdir()), "an aborted part leaves no files"


@pytest.mark.parametrize(("start", "value", "shape", "message"), [
    ((5, 0), np.ones((4, 4)), (8, 4), r"slice of shape \[4, 4\] at \[5, 0\] is not a non-empty"),
    # An empty box inside the tensor stores nothing (a rank's empty shard); outside, refused.
    ((9, 0), np.ones((0, 4)), (8, 4), "is not a non-empty box"),
    ((0,), np.ones((4, 4)), (8, 4), "is not a non-empty box"),
])
def test_bad_boxes_are_refused_as_without_tiles(tmp_path: Path, start: tuple[int, ...],
                                                value: np.ndarray, shape: tuple[int, ...],
                                                message: str) -> None:
    for tile_bytes in (None, 16):
        with PartWriter(tmp_path / str(tile_bytes), part=0, parts=2, save_id=SAVE,
                        tile_bytes=tile_bytes) as writer, \
                pytest.raises(ocf.InvalidError, match=message):
            writer.write_slice("w", value, start, shape)


def test_mixing_whole_and_sliced_or_dtypes_is_refused_as_without_tiles(tmp_path: Path) -> None:
    for tile_bytes in (None, 16):
        with PartWriter(tmp_path / str(tile_bytes), part=0, parts=1, save_id=SAVE,
                        tile_bytes=tile_bytes) as writer:
            writer.write("a", np.ones((4, 4)))
            with pytest.raises(ocf.InvalidError, match="key written twice"):
                writer.write("a", np.ones((4, 4)))
            writer.write_slice("b", np.ones((4, 4), np.float32), (0, 0), (8, 4))
            with pytest.raises(ocf.InvalidError, match=r"dtype float64 .* float32"):
                writer.write_slice("b", np.ones((4, 4)), (4, 0), (8, 4))
            writer.write_slice("b", np.ones((4, 4), np.float32), (4, 0), (8, 4))


@pytest.mark.parametrize("tile_bytes", [0, -1, 1.5, True, "16"])
def test_a_bad_tile_bytes_is_refused(tmp_path: Path, tile_bytes: object) -> None:
    with pytest.raises(ocf.InvalidError, match="tile_bytes"):
        PartWriter(tmp_path, part=0, parts=1, save_id=SAVE,
                   tile_bytes=tile_bytes)  # type: ignore[arg-type]
