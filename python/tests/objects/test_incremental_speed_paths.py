"""The paths an incremental save takes for speed keep every byte right: fine bands
for large tables, new blocks written unhashed into the checkpoint's own file and
hashed only when a later save links that file into the pool (on a worker thread,
while the caller may change its arrays), byte comparisons ahead of the writes on
worker threads, and whole reads of banded tensors straight into the new array."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from incremental_support import link_threshold, stored_in_own_file, verify_fully

import ocf
from ocf.format.pool import POOL_DIRECTORY
from ocf.format.writing.banding import (
    BAND_BYTES,
    FINE_BAND_BYTES,
    LARGE_TABLE_BYTES,
    band_bytes_for,
)

ROW_BYTES = 1024  # 256 float32


def _pool_sizes(root: Path) -> dict[str, int]:
    pool = root / POOL_DIRECTORY
    return {name: os.path.getsize(pool / name) for name in os.listdir(pool)} \
        if pool.exists() else {}


def _save(root: Path, number: int, tensors: dict[str, np.ndarray]) -> tuple[Path, int]:
    """Save ``tensors`` as ckpt-<number> on ckpt-<number - 1>; the bytes of the blocks
    it wrote (in its own file)."""
    base = root / f"ckpt-{number - 1}"
    path = root / f"ckpt-{number}"
    with ocf.Writer(path, incremental=True, base=base if base.exists() else None) as writer:
        writer.write_many(tensors)
    return path, stored_in_own_file(path)


def test_a_large_table_is_banded_finely_so_a_run_of_changed_rows_rewrites_little_more(
        tmp_path: Path) -> None:
    rows = LARGE_TABLE_BYTES // ROW_BYTES + 1024  # just above: fine bands
    table = np.random.default_rng(1).random((rows, ROW_BYTES // 4), dtype=np.float32)
    assert band_bytes_for(table.nbytes) == FINE_BAND_BYTES
    base, _ = _save(tmp_path, 1, {"table": table})
    band_rows = FINE_BAND_BYTES // ROW_BYTES
    start = 5 * band_rows + 17  # 600 rows from inside band 5: they touch bands 5 to 7
    table[start:start + 600] += np.float32(1)
    path, written = _save(tmp_path, 2, {"table": table})
    np.testing.assert_array_equal(verify_fully(path)["table"], table)
    # Three bands, and unchanged ones found before enough of them to link save 1's file.
    assert 3 * FINE_BAND_BYTES <= written < 3 * FINE_BAND_BYTES + link_threshold(
        base.stat().st_size)


def test_arrays_changed_after_write_many_returns_do_not_change_what_is_saved(
        tmp_path: Path) -> None:
    """The base's file is linked into the pool and hashed on a worker thread after
    write_many has returned: the caller may already be changing its arrays (the next
    training step); what is saved and hashed are the bytes of the files."""
    tensor = np.random.default_rng(2).random((8192, 1024), dtype=np.float32)
    base, _ = _save(tmp_path, 1, {"w": tensor})
    tensor[:100] += np.float32(1)
    saved = tensor.copy()
    path = tmp_path / "ckpt-2"
    with ocf.Writer(path, incremental=True, base=tmp_path / "ckpt-1") as writer:
        writer.write_many({"w": tensor})
        tensor += np.float32(1)  # before the commit, while the base's file is hashed
    assert len(_pool_sizes(tmp_path)) == 1  # save 1's file, once
    # The band of the 100 changed rows, and at most a link threshold of unchanged ones.
    assert BAND_BYTES <= stored_in_own_file(path) < BAND_BYTES + link_threshold(
        base.stat().st_size)
    np.testing.assert_array_equal(verify_fully(path)["w"], saved)


def test_a_save_in_which_everything_changed_hashes_nothing_and_makes_no_pool(
        tmp_path: Path) -> None:
    """New blocks go to the checkpoint's own file, as in a full save: nothing enters
    the pool and nothing is hashed until a later save reuses one of them."""
    tensor = np.random.default_rng(6).random((4096, 1024), dtype=np.float32)
    _save(tmp_path, 1, {"w": tensor})
    tensor += np.float32(1)
    path, written = _save(tmp_path, 2, {"w": tensor})
    assert written == tensor.nbytes
    assert not (tmp_path / POOL_DIRECTORY).exists()
    with ocf.Reader(path) as reader:
        assert reader.index.required_features == ()
        assert [shard.path for shard in reader.index.shards] == [""]
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)


def test_a_pool_object_changed_after_it_was_hashed_fails_verification(tmp_path: Path
                                                                      ) -> None:
    """What is recorded is the identity of the bytes in the file: a later change to the
    file, of any byte, is found by the SHA-256 (and by the CRC of its chunk)."""
    tensor = np.random.default_rng(3).random((4096, 1024), dtype=np.float32)
    _save(tmp_path, 1, {"w": tensor})
    tensor[0] += np.float32(1)  # band 0 changes: save 2 stores bands, the others referenced
    path, _ = _save(tmp_path, 2, {"w": tensor})  # save 1's file linked and hashed
    (name,) = _pool_sizes(tmp_path)
    with open(tmp_path / POOL_DIRECTORY / name, "r+b") as file:
        file.seek(64 + 5 * (1 << 20) + 11)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0x10]))
    with ocf.Reader(path) as reader:
        with pytest.raises(ocf.IntegrityError, match="SHA-256"):
            reader.check_pool_identities()
        # The banded read checks every chunk, and names the band [R-CRC-001]: rows
        # 1280-1535, slice 4 (the rewritten band 0 is listed after the references).
        with pytest.raises(ocf.IntegrityError, match=r"'w'.*slice 4, chunk 0 .*CRC-32C"):
            reader.read_tensor("w")


def test_a_banded_tensor_reads_whole_into_given_arrays_and_by_region(tmp_path: Path) -> None:
    tensor = np.random.default_rng(4).random((3000, 700), dtype=np.float32)  # 8 MiB
    path, _ = _save(tmp_path, 1, {"w": tensor, "small": np.arange(10)})
    with ocf.Reader(path) as reader:
        assert reader["w"].block is None  # stored in bands
        np.testing.assert_array_equal(reader.read_tensor("w"), tensor)
        out = np.empty_like(tensor)
        np.testing.assert_array_equal(reader.read_into("w", out), tensor)
        np.testing.assert_array_equal(reader.get_slice("w", np.s_[100:2900, 3:600]),
                                      tensor[100:2900, 3:600])


def test_an_error_in_the_items_writes_the_ones_before_it_and_leaves_nothing(
        tmp_path: Path) -> None:
    """Byte comparisons run ahead of the writes: a bad tensor still fails where it is,
    after the ones before it, and the aborted write leaves no checkpoint."""
    good = np.random.default_rng(5).random((2048, 1024), dtype=np.float32)
    _save(tmp_path, 1, {"a": good, "b": good})
    with pytest.raises(ocf.InvalidError), ocf.Writer(
            tmp_path / "ckpt-2", incremental=True, base=tmp_path / "ckpt-1") as writer:
        writer.write_many([("a", good), ("b", good), ("a", good)])  # a key twice
    assert not (tmp_path / "ckpt-2").exists()
    assert _pool_sizes(tmp_path) == {}  # save 1's file was linked for "a", then unlinked
