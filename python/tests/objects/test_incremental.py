"""Incremental saves (spec/pool.md): only changed bands are written, every
checkpoint reads completely and verifies, unchanged bytes are reused only when
they are equal byte for byte (never on equal CRCs), a checkpoint's own file
enters the pool (a hard link, hashed then) only when a later save reuses a block
of it, the pool keeps exactly what retained checkpoints reference, and an export
stands alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from incremental_support import (
    assert_root_consistent,
    link_threshold,
    state_for,
    stored_in_own_file,
    verify_fully,
)

import ocf
from ocf.format.checksum import crc32c
from ocf.format.pool import POOL_DIRECTORY
from ocf.format.pool_gc import collect_pool, referenced_objects
from ocf.format.writing.banding import BAND_BYTES

CHUNK = 1 << 20  # the writer's default chunk size: the unit of a CRC
ROWS, COLUMNS = 4096, 4096  # float32: 64 MiB, 64 bands of 1 MiB


def _pool(root: Path) -> set[str]:
    """The names in the pool of ``root`` (none before a save first reuses a block)."""
    pool = root / POOL_DIRECTORY
    return set(os.listdir(pool)) if pool.exists() else set()


def _save(root: Path, number: int, tensors: dict[str, np.ndarray]) -> tuple[Path, set[str]]:
    """Save ``tensors`` as ckpt-<number> on top of ckpt-<number - 1>; the new names in
    the pool (links to the files of earlier checkpoints)."""
    before = _pool(root)
    base = root / f"ckpt-{number - 1}"
    path = root / f"ckpt-{number}"
    with ocf.Writer(path, incremental=True, base=base if base.exists() else None) as writer:
        writer.write_many(tensors)
    return path, _pool(root) - before


def _flip_keeping_the_crc(data: bytearray, bit: int, fix_at: int) -> None:
    """Flip bit ``bit`` of ``data`` and bits of the four bytes at ``fix_at`` so that the
    CRC-32C of ``data`` stays the same (CRC-32C is linear over GF(2): the effects of
    32 consecutive bits span every value, so a combination cancels the first flip)."""
    zero = crc32c(bytes(len(data)))

    def effect(position: int) -> int:
        unit = bytearray(len(data))
        unit[position // 8] ^= 1 << (position % 8)
        return crc32c(bytes(unit)) ^ zero

    before = crc32c(bytes(data))
    # Gaussian elimination: rows (effect, which fix bits make it), reduced by pivot bit.
    pivots: dict[int, tuple[int, int]] = {}
    for k in range(32):
        value, chosen = effect(fix_at * 8 + k), 1 << k
        for bit_index in sorted(pivots, reverse=True):
            if value >> bit_index & 1:
                value ^= pivots[bit_index][0]
                chosen ^= pivots[bit_index][1]
        if value:
            pivots[value.bit_length() - 1] = (value, chosen)
    target, chosen = effect(bit), 0
    for bit_index in sorted(pivots, reverse=True):
        if target >> bit_index & 1:
            target ^= pivots[bit_index][0]
            chosen ^= pivots[bit_index][1]
    assert target == 0
    data[bit // 8] ^= 1 << (bit % 8)
    for k in range(32):
        if chosen >> k & 1:
            data[fix_at + k // 8] ^= 1 << (k % 8)
    assert crc32c(bytes(data)) == before


def test_a_one_byte_change_anywhere_in_a_large_tensor_is_saved(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    tensor = rng.standard_normal((ROWS, COLUMNS)).astype(np.float32)
    _save(tmp_path, 1, {"w": tensor})
    size = tensor.nbytes
    positions = [0, size - 1, BAND_BYTES - 1, BAND_BYTES, size // 2 + 3,
                 *rng.integers(0, size, 10).tolist()]
    for number, position in enumerate(positions, start=2):
        flat = tensor.reshape(-1).view(np.uint8)
        flat[position] ^= 0x40
        base_size = (tmp_path / f"ckpt-{number - 1}").stat().st_size
        path, _ = _save(tmp_path, number, {"w": tensor})
        np.testing.assert_array_equal(verify_fully(path)["w"], tensor,
                                      err_msg=f"byte {position}")
        # The changed band rewritten (1 MiB), and unchanged bands of the base's own file
        # found before enough of them to link it (at most its link threshold); never
        # the 16 MiB tensor.
        assert BAND_BYTES <= stored_in_own_file(path) < BAND_BYTES + link_threshold(base_size), \
            f"byte {position}"


def test_a_change_that_keeps_every_chunk_crc_is_still_saved(tmp_path: Path) -> None:
    """Equal CRCs are no evidence: the writer compares the bytes themselves."""
    rng = np.random.default_rng(2)
    tensor = rng.standard_normal((ROWS, COLUMNS)).astype(np.float32)
    _save(tmp_path, 1, {"w": tensor})
    flat = tensor.reshape(-1).view(np.uint8)
    start = 7 * BAND_BYTES  # band 7, one chunk of 1 MiB
    chunk = bytearray(flat[start:start + CHUNK].tobytes())
    _flip_keeping_the_crc(chunk, bit=8 * 1000 + 3, fix_at=4096)
    flat[start:start + CHUNK] = np.frombuffer(chunk, np.uint8)
    base_size = (tmp_path / "ckpt-1").stat().st_size
    path, _ = _save(tmp_path, 2, {"w": tensor})
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
    assert BAND_BYTES <= stored_in_own_file(path) < BAND_BYTES + link_threshold(base_size)
    changed_row = start // (COLUMNS * 4)
    with ocf.Reader(path) as reader:  # the band of equal CRCs is one of those written
        (band,) = [s for s in reader.index.tensors["w"].slices
                   if s.start[0] <= changed_row < s.start[0] + s.extent[0]]
        assert not reader.index.shards[band.block.shard].pool_sha256


def test_unchanged_tensors_are_referenced_not_written(tmp_path: Path) -> None:
    state = state_for(3)
    _save(tmp_path, 1, state)
    path, new = _save(tmp_path, 2, state)
    assert stored_in_own_file(path) == 0  # every block, the 8-byte scalar too, is reused
    assert len(new) == 1  # save 1's file, linked into the pool
    values = verify_fully(path)
    for key, array in state.items():
        np.testing.assert_array_equal(values[key], array)
    with ocf.Reader(path) as reader:
        assert reader.format_version == (1, 2)
        assert reader.index.required_features == ("pool",)
        assert all(s.pool_sha256 for s in reader.index.shards)


def test_a_checkpoint_of_another_root_is_no_base(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ocf.Writer(tmp_path / "a" / "ckpt-1", incremental=True) as writer:
        writer.write("x", np.zeros(4, np.float32))
    with pytest.raises(ocf.InvalidError, match="managed root"):
        ocf.Writer(tmp_path / "b" / "ckpt-2", incremental=True, base=tmp_path / "a" / "ckpt-1")


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_pool_keeps_exactly_what_retained_checkpoints_reference(tmp_path: Path) -> None:
    """max_to_keep deletes checkpoints; the hours rule keeps one for good; each save
    deletes the pool objects no retained checkpoint lists any more."""
    clock = _Clock()
    variables = {key: ocf.Variable(value) for key, value in state_for(0).items()}
    checkpoint = ocf.Checkpoint(**variables)
    root = tmp_path / "run"
    manager = ocf.CheckpointManager(checkpoint, root, max_to_keep=2, incremental=True,
                                    keep_checkpoint_every_n_hours=1.0, clock=clock)
    for number in range(1, 8):
        for key, value in state_for(number).items():
            variables[key].value[...] = value
        clock.now += 1500.0  # every third checkpoint or so passes the hour
        assert manager.save(checkpoint_number=number) == str(root / f"ckpt-{number}")
        assert_root_consistent(root, leftovers_allowed=False)
    kept = [p.name for p in root.iterdir() if p.name.startswith("ckpt-")]
    assert len(kept) > 2  # some preserved by the hours rule, their blocks with them
    manager.close()
    restored = {key: ocf.Variable(np.zeros_like(value)) for key, value in state_for(0).items()}
    ocf.Checkpoint(**restored).restore(manager.latest_checkpoint)
    for key, value in state_for(7).items():
        np.testing.assert_array_equal(restored[key].value, value)


def test_keep_best_retention_collects_the_pool_too(tmp_path: Path) -> None:
    variables = {key: ocf.Variable(value) for key, value in state_for(0).items()}
    checkpoint = ocf.Checkpoint(**variables)
    root = tmp_path / "run"
    with ocf.CheckpointManager(checkpoint, root, max_to_keep=2, incremental=True,
                               best_fn=lambda m: -m["loss"]) as manager:
        for number, loss in enumerate([0.5, 0.1, 0.7, 0.3, 0.9], start=1):
            for key, value in state_for(number).items():
                variables[key].value[...] = value
            manager.save(checkpoint_number=number, metrics={"loss": loss})
            assert_root_consistent(root, leftovers_allowed=False)
        assert sorted(p.name for p in root.iterdir() if p.name.startswith("ckpt-")) == \
            ["ckpt-2", "ckpt-5"]


def test_an_export_stands_alone(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    state = state_for(4)
    _save(root, 1, state)
    path, _ = _save(root, 2, state)  # every block reused: in the pool
    (root / "ckpt-1").unlink()  # retired
    exported = tmp_path / "alone.ocf"
    result = subprocess.run([sys.executable, "-m", "ocf", "export", str(path), str(exported)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in os.listdir(root / POOL_DIRECTORY):
        os.remove(root / POOL_DIRECTORY / name)
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(path)  # the checkpoint alone is not enough: its blocks were in the pool
    values = verify_fully(exported)
    with ocf.Reader(exported) as reader:
        assert reader.index.required_features == ()
        assert [s.path for s in reader.index.shards] == [""]
    for key, array in state.items():
        np.testing.assert_array_equal(values[key], array)


def test_pool_objects_are_never_read_through_a_symbolic_link(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    _save(root, 1, state_for(1))
    path, new = _save(root, 2, state_for(1))
    (root / POOL_DIRECTORY).rename(tmp_path / "elsewhere")
    (root / POOL_DIRECTORY).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ocf.NotFoundError, match="symbolic link"):
        ocf.Reader(path)
    (root / POOL_DIRECTORY).unlink()
    (root / POOL_DIRECTORY).mkdir()
    name = sorted(new)[0]
    (root / POOL_DIRECTORY / name).symlink_to(tmp_path / "elsewhere" / name)
    with pytest.raises(ocf.NotFoundError, match="symbolic link"):
        ocf.Reader(path)


def test_verify_reports_a_pool_object_that_is_not_the_one_referenced(tmp_path: Path) -> None:
    """A byte changed in a pool object's reserved preamble bytes, which readers ignore
    [R-FILE-003]: no chunk CRC sees it, the object's SHA-256 does."""
    root = tmp_path / "run"
    root.mkdir()
    values = np.arange(1 << 18, dtype=np.float32)  # 1 MiB: enough to link save 1's file
    _save(root, 1, {"w": values})
    path, new = _save(root, 2, {"w": values})
    (name,) = new
    with open(root / POOL_DIRECTORY / name, "r+b") as file:
        file.seek(20)
        file.write(b"\x01")
    with ocf.Reader(path) as reader:
        np.testing.assert_array_equal(reader.read_tensor("w"), values)
        with pytest.raises(ocf.IntegrityError, match="SHA-256"):
            reader.check_pool_identities()
    result = subprocess.run([sys.executable, "-m", "ocf", "verify", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "INTEGRITY" in result.stderr
    assert "R-POOL-004" in result.stderr


def test_background_incremental_saves_reuse_the_previous_one(tmp_path: Path) -> None:
    """save(blocking=False): the next save waits for the previous one and its
    collection, then takes it as its base."""
    variables = {key: ocf.Variable(value) for key, value in state_for(0).items()}
    checkpoint = ocf.Checkpoint(**variables)
    root = tmp_path / "run"
    with ocf.CheckpointManager(checkpoint, root, max_to_keep=1, incremental=True) as manager:
        for number in range(1, 4):
            for key, value in state_for(number).items():
                variables[key].value[...] = value
            handle = manager.save(checkpoint_number=number, blocking=False)
            assert handle is not None
        assert handle.wait() == str(root / "ckpt-3")
    (only,) = assert_root_consistent(root, leftovers_allowed=False)
    assert only.name == "ckpt-3"
    with ocf.Reader(only) as reader:  # the frozen matrix still in save 1's pool object
        assert len(reader.index.shards) > 1


def test_an_index_that_does_not_decode_stops_the_collection(tmp_path: Path) -> None:
    """A file of the root that looks like an index but does not decode could hide a
    reference: nothing is deleted, with a warning that says why."""
    root = tmp_path / "run"
    root.mkdir()
    state = state_for(1)
    _save(root, 1, state)
    second, linked = _save(root, 2, state)  # save 1's file enters the pool
    changed = {key: value + 1 for key, value in state.items()}  # nothing reusable
    third, _ = _save(root, 3, changed)
    damaged = bytearray(second.read_bytes())
    damaged[-40] ^= 0xFF  # in the index bytes: its CRC no longer matches
    (root / "copied-by-hand").write_bytes(bytes(damaged))
    (root / "ckpt-1").unlink()
    second.unlink()  # retired: the pool object only it listed is garbage
    with pytest.warns(UserWarning, match="not collected"):
        assert collect_pool(root) == []
    assert linked <= _pool(root)
    (root / "copied-by-hand").unlink()
    assert set(collect_pool(root)) == linked
    assert referenced_objects(root) == _pool(root) == set()
    values = verify_fully(third)
    np.testing.assert_array_equal(values["table"], changed["table"])
