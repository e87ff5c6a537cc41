"""The I/O of bands when everything changed: the bands an incremental save writes in
batches of megabytes (their CRC-32C computed on a worker thread while they are
written) carry the checksums of their own bytes, and a tensor read whole from
bands alone (no region plan, the checksums of its single-chunk bands compared
together) still checks every chunk, names the slice that fails, and reads every
value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from crc32c import crc32c
from incremental_support import verify_fully

import ocf

SHAPE = (8192, 512)  # float32: 16 MiB, sixteen bands of 1 MiB, batched four at a time


def _two_saves(root: Path, **options: int) -> tuple[Path, np.ndarray]:
    """A base and an incremental save on it in which every band changed, but the first
    16 rows (32 KiB) did not: its bands are kept (a tensor whose bands all changed from
    their first bytes on is written whole), and every band is written; the second's
    path and tensor."""
    tensor = np.random.default_rng(11).random(SHAPE, dtype=np.float32)
    with ocf.Writer(root / "ckpt-1", incremental=True, **options) as writer:
        writer.write_many({"w": tensor})
    tensor[16:] += np.float32(1)
    with ocf.Writer(root / "ckpt-2", incremental=True, base=root / "ckpt-1",
                    **options) as writer:
        writer.write_many({"w": tensor})
    with ocf.Reader(root / "ckpt-2") as reader:
        assert not any(shard.pool_sha256 for shard in reader.index.shards)  # all written
    return root / "ckpt-2", tensor


def test_each_band_written_in_a_batch_carries_the_crc_of_its_own_rows(tmp_path: Path
                                                                      ) -> None:
    path, tensor = _two_saves(tmp_path)
    with ocf.Reader(path) as reader:
        slices = reader["w"].slices
        assert len(slices) == 16
        for piece in slices:
            rows = tensor[piece.start[0]:piece.start[0] + piece.extent[0]]
            assert piece.block.chunk_crcs == [crc32c(rows.tobytes())]
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)


@pytest.mark.parametrize("band", [0, 15], ids=["first band", "last band"])
def test_a_changed_byte_in_any_band_of_a_tensor_read_whole_fails_its_crc(
        tmp_path: Path, band: int) -> None:
    path, _ = _two_saves(tmp_path)
    with ocf.Reader(path) as reader:
        offset = reader["w"].slices[band].block.offset
    with open(path, "r+b") as file:
        file.seek(offset + 4095)
        byte = file.read(1)
        file.seek(offset + 4095)
        file.write(bytes([byte[0] ^ 0x10]))
    with ocf.Reader(path) as reader, pytest.raises(
            ocf.IntegrityError, match=f"slice {band}, chunk 0 .* CRC-32C"):
        reader.read_tensor("w")


def test_a_tensor_of_bands_and_a_slice_that_is_no_band_reads_whole(tmp_path: Path) -> None:
    tensor = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    boxes = [((0, 0), (32, 8)), ((32, 0), (32, 4)), ((32, 4), (32, 4))]  # a band, two halves
    with ocf.Writer(tmp_path / "mixed.ocf") as writer:
        writer.write_slices("t", tensor, (0, 0), tensor.shape, boxes)
    with ocf.Reader(tmp_path / "mixed.ocf") as reader:
        np.testing.assert_array_equal(reader.read_tensor("t"), tensor)
        out = np.zeros_like(tensor)
        np.testing.assert_array_equal(reader.read_into("t", out), tensor)


def test_bands_of_several_chunks_read_whole_and_name_a_bad_chunk(tmp_path: Path) -> None:
    path, tensor = _two_saves(tmp_path, chunk_size=256 << 10)
    with ocf.Reader(path) as reader:
        assert {len(piece.block.chunk_crcs) for piece in reader["w"].slices} == {4}
        np.testing.assert_array_equal(reader.read_tensor("w"), tensor)
        offset = reader["w"].slices[3].block.offset + (600 << 10)  # in its third chunk
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 0x01]))
    with ocf.Reader(path) as reader, pytest.raises(ocf.IntegrityError, match="chunk 2 "):
        reader.read_tensor("w")
