"""The strips layout of multi-writer saves (ocf.distributed.parts.strips), the default of
ocf.distributed saves: the chunk size each tensor gets, the strips its boxes are cut
into, and what a load on another partitioning then reads (counted in bytes, not time).
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ocf
from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.distributed.parts.strips import box_strip, strip_chunk_size, strip_tile
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILES
from ocf.distributed.torch import region_of
from ocf.format.errors import IntegrityError, InvalidError

KIB, MIB = 1 << 10, 1 << 20


@pytest.mark.parametrize(("nbytes", "largest", "chunk"), [
    (4, 64 * KIB, 4 * KIB),            # a scalar: the smallest chunk the format allows
    (1 * MIB, 64 * KIB, 4 * KIB),      # 256 chunks: none smaller than 4 KiB
    (16 * MIB, 64 * KIB, 4 * KIB),     # exactly 4,096 chunks
    (16 * MIB + 1, 64 * KIB, 8 * KIB),  # one byte more: the next power of two
    (48 * MIB, 64 * KIB, 16 * KIB),    # 3,072 chunks
    (256 * MIB, 64 * KIB, 64 * KIB),   # 4,096 chunks of the largest size
    (1 << 30, 64 * KIB, 64 * KIB),     # 16,384 chunks: no chunk above the writer's
    (1 << 30, 1 * MIB, 256 * KIB),     # a larger writer chunk size lets it grow
    (1 << 30, 100 * 64, 4 * KIB),      # a writer chunk size between powers of two
])
def test_each_tensor_gets_the_power_of_two_chunk_that_cuts_it_into_about_4096_chunks(
        nbytes: int, largest: int, chunk: int) -> None:
    assert strip_chunk_size(nbytes, largest) == chunk


@pytest.mark.parametrize(("shape", "itemsize", "chunk", "tile"), [
    ((1024, 4096), 4, 4 * KIB, (1024, 64)),     # 4,096 chunks: 64 strips, chunks of 16 rows
    ((4096, 2048), 4, 8 * KIB, (4096, 32)),     # 64 strips of 32 columns, chunks of 64 rows
    ((8, 1 << 20), 4, 8 * KIB, (8, 2048)),      # 8 rows take 8 runs, the columns the rest
    ((64, 3, 3, 3), 4, 4 * KIB, (64, 3, 3, 3)),  # one chunk: one strip
    ((16,), 4, 4 * KIB, None),                  # rank 1: no strips
    ((0, 5), 4, 4 * KIB, None),                 # no elements
])
def test_strips_are_the_tensors_full_height_and_as_fine_across_as_a_chunk_is_down(
        shape: tuple[int, ...], itemsize: int, chunk: int, tile: tuple[int, ...] | None
) -> None:
    assert strip_tile(shape, itemsize, chunk) == tile


def test_a_thin_box_gets_wider_strips_within_its_share_of_the_tile_budget() -> None:
    # 8,192 boxes of one row of a 8192 x 4096 float32 tensor: one slice each.
    assert box_strip(((5, 0), (1, 4096)), (8192, 4096), 4, 32 * KIB) == (8192, 4096)
    assert box_strip(((0, 0), (2048, 4096)), (8192, 4096), 4, 32 * KIB) == (8192, 64)


def _state() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "w": rng.standard_normal((1024, 4096), np.float32),  # 16 MiB: 4 KiB chunks
        "wide": rng.standard_normal((512, 8192), np.float32),  # 16 MiB, another shape
        "half": rng.standard_normal((1000, 3000)).astype(ml_dtypes.bfloat16),  # uneven
        "bias": rng.standard_normal(4096).astype(np.float32),  # rank 1, chunked small
    }


def _save(directory: Path, state: dict[str, np.ndarray], writers: int,
          **options: object) -> None:
    """``state`` saved by ``writers`` parts split by rows, as torch.chunk splits them."""
    save_id = new_save_id()
    for part in range(writers):
        with PartWriter(directory, part=part, parts=writers, save_id=save_id,
                        **options) as writer:  # type: ignore[arg-type]
            for key, full in state.items():
                step = -(-full.shape[0] // writers)
                rows = slice(part * step, min((part + 1) * step, full.shape[0]))
                if rows.start < rows.stop:
                    writer.write_slice(key, full[rows], (rows.start, *[0] * (full.ndim - 1)),
                                       full.shape)
    merge_parts(directory, save_id=save_id, parts=writers)


def _worst_read_over_needed(directory: Path, state: dict[str, np.ndarray], loaders: int,
                            axis: int) -> float:
    """Every rank of ``loaders`` reads its run of ``axis`` of every tensor of rank 2
    (the runs of ocf.distributed.torch.region_of); each must equal the saved values.
    The worst rank's stored bytes read over the bytes it needed."""
    worst = 0.0
    for rank in range(loaders):
        with ocf.Reader(directory) as reader:
            needed = 0
            for key, full in state.items():
                if full.ndim < 2:
                    continue
                region = region_of(full.shape, rank, loaders, axis)
                got = reader.get_slice(key, region)
                assert got.dtype == full.dtype
                assert np.array_equal(got.view(np.uint8), full[region].view(np.uint8)), key
                needed += got.nbytes
            worst = max(worst, reader.bytes_read / needed)
    return worst


@pytest.fixture(scope="module")
def strips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("strips") / "ckpt"
    _save(directory, _state(), 4, tile_bytes=RESHARD_TILES, chunk_size=RESHARD_CHUNK_SIZE)
    return directory


def test_every_block_of_a_tensor_has_the_tensors_chunk_size(strips: Path) -> None:
    with ocf.Reader(strips) as reader:
        sizes = {key: {s.block.chunk_size for s in reader[key].slices} for key in reader}
        widths = {key: {s.extent[1] for s in reader[key].slices} for key in ("w", "wide")}
        heights = {s.extent[0] for s in reader["w"].slices}
    # 16 MiB: 4 KiB; the 5.7 MB bf16 tensor: 4 KiB too; the 16 KiB bias is 4 boxes of
    # 4 KiB, each one chunk (recorded as chunk size 0).
    assert sizes == {"w": {4096}, "wide": {4096}, "half": {4096}, "bias": {0}}
    # 64 strips of 64 columns for 1024 x 4096 (a chunk: 16 rows of a strip); 64 of 128
    # columns for 512 x 8192 (a chunk: 8 of its 512 rows).
    assert widths["w"] == {64}
    assert widths["wide"] == {128}
    assert heights == {256}  # each writer's box, its full height


def test_strips_of_a_whole_tensor_by_one_writer_read_back_bit_exact(tmp_path: Path) -> None:
    state = _state()
    _save(tmp_path / "one", state, 1, tile_bytes="strips")
    with ocf.Reader(tmp_path / "one") as reader:
        for key, full in state.items():
            assert np.array_equal(reader.read_tensor(key).view(np.uint8), full.view(np.uint8))
        assert len(reader["w"].slices) == 64


@pytest.mark.parametrize("loaders", [2, 3, 4])
@pytest.mark.parametrize("axis", [0, 1])
def test_a_load_on_another_partitioning_reads_at_most_1_1x_the_bytes_it_needs(
        strips: Path, loaders: int, axis: int) -> None:
    assert _worst_read_over_needed(strips, _state(), loaders, axis) <= 1.1


def test_three_writers_with_uneven_boxes_save_strips_that_load_bit_exact(
        tmp_path: Path) -> None:
    state = _state()
    _save(tmp_path / "three", state, 3, tile_bytes="strips")
    for axis in (0, 1):
        assert _worst_read_over_needed(tmp_path / "three", state, 2, axis) <= 1.1


def test_the_grid_of_0_3_0_read_more_than_1_1x_for_three_loaders(tmp_path: Path) -> None:
    # What strips fixed: a 16 KiB grid in 64 KiB chunks cuts 3 ways inside its tiles.
    state = _state()
    _save(tmp_path / "grid", state, 4, tile_bytes=16 * KIB, chunk_size=64 * KIB)
    assert _worst_read_over_needed(tmp_path / "grid", state, 3, 0) > 1.1


def test_a_tile_bytes_that_is_not_a_size_strips_or_none_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidError, match="tile_bytes must be a positive int, 'strips' or None"):
        PartWriter(tmp_path, part=0, parts=1, save_id=new_save_id(), tile_bytes="rows")


def test_a_chunk_size_given_for_one_tensor_is_checked(tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "x.ocf") as writer, \
            pytest.raises(InvalidError, match=r"multiple of 64 .*R-CHUNK-001"):
        writer.write("a", np.zeros(10, np.float32), chunk_size=1000)


@pytest.mark.parametrize("mapped", [True, False])
def test_a_corrupt_chunk_in_the_rows_a_load_needs_of_a_strip_is_refused(
        tmp_path: Path, mapped: bool) -> None:
    # A reader of rows 300..400 needs rows 44..144 of the strips of the box at row 256:
    # the chunks holding them (16 rows each, 4 KiB chunks) are checked, not the others.
    full = _state()["w"]
    _save(tmp_path / "c", {"w": full}, 4, tile_bytes="strips")
    with ocf.Reader(tmp_path / "c") as reader:
        slices = reader["w"].slices
        block = next(s.block for s in slices if s.start == (256, 128))
        shard = reader.index.shards[block.shard].path
    data = bytearray((tmp_path / "c" / shard).read_bytes())
    data[block.offset + 100 * 64 * 4 + 5] ^= 0x40  # row 100 of the strip: chunk 6
    (tmp_path / "c" / shard).write_bytes(bytes(data))
    with ocf.Reader(tmp_path / "c") as reader:
        with pytest.raises(IntegrityError, match=r"chunk 6 \(bytes .*R-CRC-001"):
            reader.get_slice("w", np.s_[300:400, :], mapped=mapped)
        # Rows whose chunks do not hold the flipped byte read, and check, only their own.
        assert np.array_equal(reader.get_slice("w", np.s_[300:350, :], mapped=mapped),
                              full[300:350])
        assert np.array_equal(reader.get_slice("w", np.s_[370:500, :], mapped=mapped),
                              full[370:500])
