"""Writer.write_tiles: a box stored as the cells of a grid, cut with array operations.

Every expectation is the file that write_slices of the same cells writes, byte for
byte, or the values NumPy gives for the inputs.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ocf
from ocf.format import dtypes
from ocf.format.writing import tiles as tiles_module
from ocf.format.writing.tiles import grid_cells

WRITE_ID = "0123456789abcdef"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _write(directory: Path, how: str, array: np.ndarray, start: tuple[int, ...],
           shape: tuple[int, ...], tile: tuple[int, ...], **options: object) -> None:
    """The box ``array`` at ``start`` and the rest of the tensor as one slice each
    side, so that the file is a complete checkpoint."""
    with ocf.Writer(directory, layout="directory", write_id=WRITE_ID,
                    **options) as writer:  # type: ignore[arg-type]
        if how == "tiles":
            writer.write_tiles("w", array, start, shape, tile)
        else:
            writer.write_slices("w", array, start, shape,
                                grid_cells(start, array.shape, tile))
        if start[0]:
            writer.write_slice("w", np.zeros((start[0], *shape[1:]), array.dtype),
                               (0,) * len(shape), shape)
        end = start[0] + array.shape[0]
        if end < shape[0]:
            writer.write_slice("w", np.zeros((shape[0] - end, *shape[1:]), array.dtype),
                               (end,) + (0,) * (len(shape) - 1), shape)


CASES = {
    # name: (dtype, box rows, shape, tile, writer options)
    "tiles of 64-byte multiples": (np.float32, (32, 64), (96, 64), (8, 16), {}),
    "tiles padded to 64 bytes": (np.float16, (20, 30), (40, 30), (5, 3), {}),
    "tiles of several chunks": (np.float64, (64, 64), (128, 64), (32, 32),
                                {"chunk_size": 4096}),
    "zstd tiles": (np.float32, (32, 64), (64, 64), (16, 16),
                   {"compression": "zstd", "chunk_size": 4096}),
    "small shards": (np.int16, (32, 64), (64, 64), (8, 8), {"max_shard_size": 3000}),
    "big-endian float32": (np.dtype(">f4"), (16, 32), (32, 32), (8, 8), {}),
    "bool": (np.bool_, (16, 128), (32, 128), (8, 64), {}),
    "bfloat16, rank 3": (ml_dtypes.bfloat16, (4, 6, 8), (8, 6, 8), (2, 3, 4), {}),
}


@pytest.mark.parametrize("case", CASES)
def test_tiles_of_a_regular_box_are_the_file_write_slices_writes(tmp_path: Path, case: str,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    dtype, box, shape, tile, options = CASES[case]
    monkeypatch.setattr(tiles_module, "BAND_BYTES", 1000)  # several bands per box
    array = np.random.default_rng(1).standard_normal(box).astype(dtype)
    start = (shape[0] - box[0],) + (0,) * (len(shape) - 1)
    _write(tmp_path / "tiles", "tiles", array, start, shape, tile, **options)
    _write(tmp_path / "slices", "slices", array, start, shape, tile, **options)
    assert _files(tmp_path / "tiles") == _files(tmp_path / "slices")
    with ocf.Reader(tmp_path / "tiles") as reader:
        info = reader["w"]
        assert len(info.slices) >= 2 * (box[0] // tile[0])
        assert np.array_equal(reader.read_tensor("w")[start[0]:], array)


def test_tiles_of_a_box_off_the_grid_are_the_file_write_slices_writes(tmp_path: Path
                                                                      ) -> None:
    array = np.arange(30 * 20, dtype=np.float32).reshape(30, 20)
    _write(tmp_path / "tiles", "tiles", array, (5, 0), (35, 20), (8, 6))
    _write(tmp_path / "slices", "slices", array, (5, 0), (35, 20), (8, 6))
    assert _files(tmp_path / "tiles") == _files(tmp_path / "slices")


def test_strips_of_a_box_inside_one_grid_row_are_cut_with_array_operations(
        tmp_path: Path) -> None:
    # Strips the tensor's full height: a writer's box of rows 7..26 lies inside the one
    # grid row, off its lines, and is still cut as a regular box.
    array = np.arange(20 * 64, dtype=np.float32).reshape(20, 64)
    start, shape, tile = (7, 0), (35, 64), (35, 16)
    assert tiles_module.is_regular(array, start, tile, dtypes.for_array(array))
    assert tiles_module.cell_extents(start, array.shape, tile) == (20, 16)
    _write(tmp_path / "tiles", "tiles", array, start, shape, tile)
    _write(tmp_path / "slices", "slices", array, start, shape, tile)
    assert _files(tmp_path / "tiles") == _files(tmp_path / "slices")
    with ocf.Reader(tmp_path / "tiles") as reader:
        assert [s.extent for s in reader["w"].slices if s.start[0] == 7] == [(20, 16)] * 4


def test_a_chunk_size_for_one_call_is_the_file_a_writer_of_that_chunk_size_writes(
        tmp_path: Path) -> None:
    array = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    with ocf.Writer(tmp_path / "call", layout="directory", write_id=WRITE_ID) as writer:
        writer.write_tiles("w", array, (0, 0), (64, 256), (64, 64), chunk_size=4096)
        writer.write("b", array.reshape(-1), chunk_size=4096)
    with ocf.Writer(tmp_path / "writer", layout="directory", write_id=WRITE_ID,
                    chunk_size=4096) as writer:
        writer.write_tiles("w", array, (0, 0), (64, 256), (64, 64))
        writer.write("b", array.reshape(-1))
    assert _files(tmp_path / "call") == _files(tmp_path / "writer")
    with ocf.Reader(tmp_path / "call") as reader:
        assert {s.block.chunk_size for s in reader["w"].slices} == {4096}
        block = reader["b"].block
        assert block is not None
        assert block.chunk_count == 16


def test_overlapping_boxes_written_as_tiles_are_refused_at_commit(tmp_path: Path) -> None:
    array = np.ones((8, 8), np.float32)
    writer = ocf.Writer(tmp_path / "c.ocf")
    writer.write_tiles("w", array, (0, 0), (12, 8), (4, 4))
    writer.write_tiles("w", array, (4, 0), (12, 8), (4, 4))
    with pytest.raises(ocf.InvalidError, match="R-SLICE-002"):
        writer.commit()
    assert not (tmp_path / "c.ocf").exists()


@pytest.mark.parametrize("tile", [(4,), (4, 0), (4, "x")])
def test_a_tile_that_is_not_a_positive_extent_per_dimension_is_refused(
        tmp_path: Path, tile: tuple[object, ...]) -> None:
    with ocf.Writer(tmp_path / "c.ocf") as writer, pytest.raises(ocf.InvalidError,
                                                                  match="tile"):
        writer.write_tiles("w", np.ones((8, 8)), (0, 0), (8, 8), tile)  # type: ignore[arg-type]


def test_a_box_outside_the_shape_is_refused_as_by_write_slices(tmp_path: Path) -> None:
    array = np.ones((8, 8), np.float32)
    errors = []
    for how in ("tiles", "slices"):
        with pytest.raises(ocf.InvalidError) as caught:
            _write(tmp_path / how, how, array, (4, 0), (8, 8), (4, 4))
        errors.append(str(caught.value).replace(str(tmp_path / how), ""))
    assert errors[0] == errors[1]
    assert "R-SLICE-001" in errors[0]


def test_a_scalar_written_as_one_slice_commits_and_twice_is_refused(tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "one.ocf") as writer:
        writer.write_slice("s", np.array(3.0), (), ())
    with ocf.Reader(tmp_path / "one.ocf") as reader:
        assert reader.read_tensor("s") == 3.0
    writer = ocf.Writer(tmp_path / "two.ocf")
    writer.write_slice("s", np.array(3.0), (), ())
    writer.write_slice("s", np.array(3.0), (), ())
    with pytest.raises(ocf.InvalidError, match="R-SLICE-002"):
        writer.commit()


def test_a_grid_row_larger_than_a_band_is_cut_across_in_the_grids_order() -> None:
    # The strips of a distributed save: the box is one grid row of 512 strips, 8 MiB.
    box = np.arange(64 * 32768, dtype=np.float32).reshape(64, 32768)
    starts, sizes = [], []
    for run in tiles_module.tile_runs(0, dtypes.for_array(box), box, (64, 0), (64, 64),
                                      tiles_module.BandBuffer()):
        # Each run's bytes are its strips in turn (checked before the next run reuses them).
        for i, (_, column) in enumerate(run.starts.tolist()):
            strip = np.frombuffer(run.data[i * run.tile_size : (i + 1) * run.tile_size],
                                  np.float32).reshape(64, 64)
            np.testing.assert_array_equal(strip, box[:, column : column + 64])
        starts += run.starts.tolist()
        sizes.append(len(run.data))
    assert len(sizes) == 2
    assert max(sizes) <= tiles_module.BAND_BYTES
    assert starts == [[64, 64 * i] for i in range(512)]
