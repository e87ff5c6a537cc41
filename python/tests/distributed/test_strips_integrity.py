"""Corrupt chunks in the strips of a multi-writer save: every read path of a resharded
load (whole strips inside the region, runs of a strip's rows; mapped or read) refuses
them naming the key, slice, chunk and file; every chunk is checked against its own
CRC, so damage in two chunks whose changes cancel over the strip is found too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import crc32c
import numpy as np
import pytest

import ocf
from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.format.errors import IntegrityError

ROW_BYTES = 64 * 4  # a strip of the 1024 x 4096 float32 tensor: 64 columns, 4 KiB chunks


def _saved(directory: Path, shape: tuple[int, int] = (1024, 4096), seed: int = 5
           ) -> np.ndarray:
    """A float32 tensor of ``shape`` (by default 16 MiB) saved by 4 writers split by rows
    into strips (of 256 x 64 in 16 chunks of 16 rows, by default)."""
    full = np.random.default_rng(seed).standard_normal(shape, np.float32)
    save_id = new_save_id()
    share = shape[0] // 4
    for part in range(4):
        with PartWriter(directory, part=part, parts=4, save_id=save_id,
                        tile_bytes="strips") as writer:
            rows = slice(share * part, share * part + share)
            writer.write_slice("w", full[rows], (rows.start, 0), full.shape)
    merge_parts(directory, save_id=save_id, parts=4)
    return full


def _corrupt(directory: Path, start: tuple[int, int], rows: list[int]) -> tuple[int, str]:
    """Flip a bit in each of ``rows`` of the strip at ``start``; its slice number and
    the name of its file."""
    with ocf.Reader(directory) as reader:
        slices = reader["w"].slices
        number = next(i for i, s in enumerate(slices) if s.start == start)
        block = slices[number].block
        shard = reader.index.shards[block.shard].path
    data = bytearray((directory / shard).read_bytes())
    for row in rows:
        data[block.offset + row * ROW_BYTES + 9] ^= 0x10
    (directory / shard).write_bytes(bytes(data))
    return number, shard


@pytest.mark.parametrize("mapped", [True, False])
def test_a_corrupt_middle_chunk_of_a_whole_strip_is_named(tmp_path: Path,
                                                          mapped: bool) -> None:
    full = _saved(tmp_path)
    number, shard = _corrupt(tmp_path, (256, 128), [7 * 16 + 3])  # chunk 7 of 16
    with ocf.Reader(tmp_path) as reader:
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 7 \(bytes .* of "
                                                 rf"{shard}\).*R-CRC-001") as caught:
            reader.get_slice("w", np.s_[0:512, :], mapped=mapped)  # whole strips
        assert caught.value.key == "w"
        # The strips beside it read, and match.
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[0:512, 0:128],
                                                       mapped=mapped), full[0:512, 0:128])


@pytest.mark.parametrize("mapped", [True, False])
def test_of_two_corrupt_chunks_of_a_strip_the_first_is_named(tmp_path: Path,
                                                             mapped: bool) -> None:
    _saved(tmp_path)
    number, _ = _corrupt(tmp_path, (512, 0), [15 * 16, 2 * 16 + 1])  # chunks 15 and 2
    with ocf.Reader(tmp_path) as reader:
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 2 \(bytes"):
            reader.read_slice_into("w", np.s_[512:768, :], np.empty((256, 4096), np.float32))
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 2 \(bytes"):
            reader.get_slice("w", np.s_[512:768, :], mapped=mapped)


def _cancelling_bits(length: int, first: int, second: int) -> list[int]:
    """Bit positions in a string of ``length`` bytes: the bit ``first``, and bits among the
    32 from ``second`` on, whose flips leave the string's CRC-32C unchanged. CRC-32C is
    affine: the change a set of flips makes is the XOR of the changes each makes alone,
    so the set is a solution of 32 linear equations over GF(2)."""
    zero = crc32c.crc32c(bytes(length))

    def change(bit: int) -> int:
        flipped = bytearray(length)
        flipped[bit // 8] ^= 1 << (bit % 8)
        return crc32c.crc32c(bytes(flipped)) ^ zero

    pivots: dict[int, tuple[int, int]] = {}  # top bit -> (change, the flips making it)
    for k in range(32):
        value, flips = change(second + k), 1 << k
        while value:
            top = value.bit_length() - 1
            if top not in pivots:
                pivots[top] = (value, flips)
                break
            value, flips = value ^ pivots[top][0], flips ^ pivots[top][1]
    target, chosen = change(first), 0
    while target:
        value, flips = pivots[target.bit_length() - 1]
        target, chosen = target ^ value, chosen ^ flips
    return [first] + [second + k for k in range(32) if chosen >> k & 1]


@pytest.mark.parametrize("mapped", [True, False])
def test_damage_in_two_chunks_that_leaves_the_strips_crc_unchanged_is_refused(
        tmp_path: Path, mapped: bool) -> None:
    _saved(tmp_path)
    number, shard = _corrupt(tmp_path, (256, 128), [])  # the strip, undamaged
    with ocf.Reader(tmp_path) as reader:
        block = reader["w"].slices[number].block
    data = bytearray((tmp_path / shard).read_bytes())
    strip = slice(block.offset, block.offset + block.raw_length)
    before = crc32c.crc32c(bytes(data[strip]))
    chunk = 16 * ROW_BYTES
    for bit in _cancelling_bits(block.raw_length, (3 * chunk + 100) * 8, (10 * chunk + 500) * 8):
        data[block.offset + bit // 8] ^= 1 << (bit % 8)
    assert crc32c.crc32c(bytes(data[strip])) == before  # one CRC over the strip sees nothing
    (tmp_path / shard).write_bytes(bytes(data))
    with ocf.Reader(tmp_path) as reader:
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 3 \(bytes"):
            reader.get_slice("w", np.s_[0:512, :], mapped=mapped)  # whole strips
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 3 \(bytes"):
            reader.get_slice("w", np.s_[300:500, :], mapped=mapped)  # runs of its rows
    done = subprocess.run([sys.executable, "-m", "ocf", "verify", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert f"slice {number}, chunk 3 (bytes" in done.stdout + done.stderr


def test_a_run_of_rows_with_a_corrupt_chunk_is_refused_after_good_runs_were_read(
        tmp_path: Path) -> None:
    # The chunks a reader checked are not checked again; the ones it did not are.
    full = _saved(tmp_path)
    number, _ = _corrupt(tmp_path, (768, 4032), [200])  # chunk 12 of the last strip
    with ocf.Reader(tmp_path) as reader:
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[770:900, :]),
                                      full[770:900])  # chunks 0 to 8 of the strip
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[770:900, :]),
                                      full[770:900])  # again, from the checked chunks
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 12 \(bytes"):
            reader.get_slice("w", np.s_[700:1000, :])  # rows 0..232: chunks 0 to 14


def test_a_load_without_verification_reads_a_corrupt_strip_as_stored(tmp_path: Path) -> None:
    full = _saved(tmp_path)
    _corrupt(tmp_path, (0, 64), [40])
    with ocf.Reader(tmp_path, verify=False) as reader:
        got = reader.get_slice("w", np.s_[0:256, :])
    assert (got != full[0:256]).sum() == 1


@pytest.mark.parametrize("mapped", [True, False])
def test_a_corrupt_strip_beside_strips_already_checked_is_named(tmp_path: Path,
                                                                mapped: bool) -> None:
    # The strips at column 64 are checked by the first read; the second read checks
    # the others of the same rows, which then no longer lie side by side in the file.
    full = _saved(tmp_path)
    number, shard = _corrupt(tmp_path, (0, 128), [5 * 16 + 2])  # chunk 5
    with ocf.Reader(tmp_path) as reader:
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[0:512, 64:128]),
                                      full[0:512, 64:128])
        with pytest.raises(IntegrityError, match=rf"slice {number}, chunk 5 \(bytes .* of "
                                                 rf"{shard}\).*R-CRC-001") as caught:
            reader.get_slice("w", np.s_[0:512, :], mapped=mapped)
        assert caught.value.key == "w"


@pytest.mark.parametrize("region", [np.s_[0:500, :], np.s_[100:300, :]])
def test_a_corrupt_short_last_chunk_of_a_strip_is_named(tmp_path: Path,
                                                        region: tuple[slice, ...]) -> None:
    # 1000 x 4096 by 4 writers: strips of 250 x 66 float32, 66,000 bytes, 16 chunks of
    # 4 KiB and a last one of 464 bytes; read whole (rows 0 to 500) or as runs of rows.
    full = _saved(tmp_path, (1000, 4096), seed=6)
    with ocf.Reader(tmp_path) as reader:
        number = next(i for i, s in enumerate(reader["w"].slices) if s.start == (0, 66))
        block = reader["w"].slices[number].block
        assert (block.raw_length, block.chunk_size) == (66_000, 4096)
        shard = reader.index.shards[block.shard].path
        np.testing.assert_array_equal(reader.get_slice("w", region), full[region])
    data = bytearray((tmp_path / shard).read_bytes())
    data[block.offset + block.raw_length - 10] ^= 0x08  # in chunk 16, the short one
    (tmp_path / shard).write_bytes(bytes(data))
    with ocf.Reader(tmp_path) as reader, pytest.raises(
            IntegrityError, match=rf"slice {number}, chunk 16 \(bytes .* of {shard}\).*R-CRC-001"):
        reader.get_slice("w", region)


def test_a_corrupt_slice_of_a_grid_stored_out_of_c_order_is_named(tmp_path: Path) -> None:
    """Slices side by side in the file but not in the grid's C order (a writer may store
    them in any order): the damaged one is named, not its neighbour in the grid."""
    path = tmp_path / "t.ocf"
    full = np.random.default_rng(1).standard_normal((1, 128, 64), np.float32)
    column_major = [((0, 0, 0), (1, 64, 32)), ((0, 64, 0), (1, 64, 32)),
                    ((0, 0, 32), (1, 64, 32)), ((0, 64, 32), (1, 64, 32))]
    with ocf.Writer(path, chunk_size=4096) as writer:
        writer.write_slices("w", full, (0, 0, 0), full.shape, column_major)
    with ocf.Reader(path) as reader:
        block = reader["w"].slices[1].block
    data = bytearray(path.read_bytes())
    data[block.offset + 4096 + 7] ^= 0x20  # slice 1, chunk 1
    path.write_bytes(bytes(data))
    with ocf.Reader(path) as reader, pytest.raises(IntegrityError) as raised:
        reader.get_slice("w", np.s_[0:1, 0:128, 0:64])
    assert f"slice 1, chunk 1 (bytes {block.offset + 4096}...{block.offset + 8192} " \
           f"of t.ocf)" in str(raised.value)
