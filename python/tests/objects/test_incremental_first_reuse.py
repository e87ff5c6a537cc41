"""A checkpoint's own file enters the pool when a later save first reuses one of its
blocks (spec/commit.md, [R-COMMIT-007]): a hard link, hashed then. Both checkpoints
stay verifiable, retiring either leaves the other whole, the pool object goes with
the last checkpoint that lists it, and a SIGKILL right after the link leaves every
retained checkpoint whole and a leftover the next collection deletes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from incremental_support import stored_in_own_file, verify_fully
from repo_paths import TESTS_DIR

import ocf
from ocf.format import commit
from ocf.format.pool import POOL_DIRECTORY
from ocf.format.pool_gc import collect_pool, referenced_objects


def _state(changed: int) -> dict[str, np.ndarray]:
    """A frozen matrix of 8 MiB and a head whose values are ``changed``."""
    frozen = np.random.default_rng(11).random((2048, 1024), dtype=np.float32)
    return {"frozen": frozen, "head": np.full(1000, changed, np.float32)}


def _save(root: Path, number: int, state: dict[str, np.ndarray]) -> Path:
    base = root / f"ckpt-{number - 1}"
    path = root / f"ckpt-{number}"
    with ocf.Writer(path, incremental=True, base=base if base.exists() else None) as writer:
        writer.write_many(state)
    return path


def _pool(root: Path) -> list[str]:
    pool = root / POOL_DIRECTORY
    return sorted(os.listdir(pool)) if pool.exists() else []


def _assert_holds(path: Path, state: dict[str, np.ndarray]) -> None:
    values = verify_fully(path)
    for key, array in state.items():
        np.testing.assert_array_equal(values[key], array, err_msg=f"{path} {key}")


def test_a_block_first_written_unhashed_is_reused_through_a_link_to_its_file(
        tmp_path: Path) -> None:
    first = _save(tmp_path, 1, _state(1))
    assert _pool(tmp_path) == []  # nothing shared yet: nothing pooled, nothing hashed
    second = _save(tmp_path, 2, _state(2))
    (name,) = _pool(tmp_path)
    linked = tmp_path / POOL_DIRECTORY / name
    assert os.stat(linked).st_ino == os.stat(first).st_ino  # one file, two names
    assert stored_in_own_file(second) == 1000 * 4  # only the head was written
    with ocf.Reader(second) as reader:
        pool_shards = [s for s in reader.index.shards if s.pool_sha256]
        assert [(s.path, s.length) for s in pool_shards] == [(name, first.stat().st_size)]
    _assert_holds(first, _state(1))
    _assert_holds(second, _state(2))
    first.unlink()  # save 1 retired: its bytes stay, under the pool's name
    assert collect_pool(tmp_path) == []
    _assert_holds(second, _state(2))
    third = _save(tmp_path, 3, _state(3))  # reuses the pool object ckpt-2 lists
    assert _pool(tmp_path) == [name]  # ckpt-2's file held no reused block: no link
    second.unlink()
    assert collect_pool(tmp_path) == []  # still listed by ckpt-3
    _assert_holds(third, _state(3))
    third.unlink()
    assert collect_pool(tmp_path) == [name]
    assert _pool(tmp_path) == []


def test_a_base_file_replaced_under_its_name_during_the_save_is_refused(
        tmp_path: Path) -> None:
    """The link must name the file whose bytes were compared: a file put in its place
    (another writer breaking the one-writer rule) is refused, and nothing is left."""
    first = _save(tmp_path, 1, _state(1))
    writer = ocf.Writer(tmp_path / "ckpt-2", incremental=True, base=first)
    os.rename(first, tmp_path / "elsewhere")
    first.write_bytes((tmp_path / "elsewhere").read_bytes())  # same bytes, another file
    with pytest.raises(ocf.InvalidError, match="replaced"), writer:
        writer.write_many(_state(2))
    assert not (tmp_path / "ckpt-2").exists()
    assert _pool(tmp_path) == []  # the link made was removed by the abort


CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = sys.argv[1].split(os.pathsep)
    import ocf
    from test_incremental_first_reuse import _state

    root = sys.argv[2]
    real_link = os.link

    def link_then_die(*args, **kwargs):
        real_link(*args, **kwargs)  # the link exists; the save dies before its commit
        os.kill(os.getpid(), signal.SIGKILL)

    os.link = link_then_die
    with ocf.Writer(os.path.join(root, "ckpt-2"), incremental=True,
                    base=os.path.join(root, "ckpt-1")) as writer:
        writer.write_many(_state(2))
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_right_after_the_first_reuse_links_a_file_leaves_every_checkpoint_whole(
        tmp_path: Path) -> None:
    first = _save(tmp_path, 1, _state(1))
    where = os.pathsep.join([str(Path(__file__).parent), str(TESTS_DIR)])  # the test, its helpers
    done = subprocess.run([sys.executable, "-c", CHILD, where,
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not (tmp_path / "ckpt-2").exists()
    (leftover,) = _pool(tmp_path)
    assert referenced_objects(tmp_path) == set()  # listed by no index
    _assert_holds(first, _state(1))
    assert collect_pool(tmp_path) == [leftover]  # the next collection deletes it
    _assert_holds(first, _state(1))  # deleting the link left the checkpoint whole
    second = _save(tmp_path, 2, _state(2))  # the save, done again, completes
    _assert_holds(second, _state(2))
    assert len(_pool(tmp_path)) == 1


@pytest.mark.parametrize("same_name", [False, True], ids=["new-name", "base-resaved"])
def test_a_failure_after_the_rename_keeps_the_links_the_published_index_lists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_name: bool) -> None:
    """The root's fsync fails (EIO) once the new file has its name: the save raises,
    but the links it made belong to the published index and stay. Saving under the
    base's own name, the link is the last name of the base's file."""
    first = _save(tmp_path, 1, _state(1))
    real_fsync_dir = commit.fsync_dir

    def fsync_dir_failing_in_root(directory: Path) -> None:
        real_fsync_dir(directory)
        if Path(directory) == tmp_path:  # the rename is done: the failure comes after it
            raise OSError(errno.EIO, "injected: fsync of the root failed")

    target = first if same_name else tmp_path / "ckpt-2"
    monkeypatch.setattr(commit, "fsync_dir", fsync_dir_failing_in_root)
    with pytest.raises(OSError, match="injected"), \
            ocf.Writer(target, incremental=True, base=first) as writer:
        writer.write_many(_state(2))
    monkeypatch.undo()
    assert len(_pool(tmp_path)) == 1
    _assert_holds(target, _state(2))
    if not same_name:
        _assert_holds(first, _state(1))


def test_a_small_unchanged_tensor_beside_a_changing_one_links_nothing(tmp_path: Path) -> None:
    """A constant buffer (rotary frequencies, a mask) beside a tensor that changes at
    every save is rewritten, not reused: reusing it would link, hash and keep each
    save's whole file for as long as the constant lives. Nothing is pooled, and the
    root holds the retained checkpoints only."""
    constant = np.arange(64, dtype=np.float32)
    rng = np.random.default_rng(3)
    for number in range(1, 6):
        state = {"weights": rng.random((1024, 1024), dtype=np.float32), "inv_freq": constant}
        path = _save(tmp_path, number, state)
        assert stored_in_own_file(path) == 1024 * 1024 * 4 + 64 * 4  # both written
        _assert_holds(path, state)
        if number >= 3:  # max_to_keep=2
            (tmp_path / f"ckpt-{number - 2}").unlink()
            collect_pool(tmp_path)
        assert _pool(tmp_path) == []
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert len(files) == min(number, 2)
        assert sum(p.stat().st_size for p in files) <= 2 * path.stat().st_size + 4096


def test_unchanged_bytes_enough_to_link_a_file_let_its_small_blocks_be_reused_too(
        tmp_path: Path) -> None:
    """Once a large unchanged block has linked the base's file, the small unchanged
    blocks of that file compared after it are reused through the same link."""
    frozen = np.random.default_rng(5).random((2048, 1024), dtype=np.float32)  # 8 MiB
    constant = np.arange(64, dtype=np.float32)
    _save(tmp_path, 1, {"a_frozen": frozen, "z_const": constant, "head": np.zeros(10)})
    second = tmp_path / "ckpt-2"
    with ocf.Writer(second, incremental=True, base=tmp_path / "ckpt-1") as writer:
        writer.write_many({"a_frozen": frozen})  # its lookups end before the next call's
        writer.write_many({"z_const": constant, "head": np.ones(10)})
    assert len(_pool(tmp_path)) == 1
    assert stored_in_own_file(second) == 10 * 8  # only the head was written


def test_a_base_deleted_during_the_save_is_reported_by_its_path(tmp_path: Path) -> None:
    """The base's file, gone when the save links it (another writer retired it): an
    InvalidError that names it, and nothing is left."""
    first = _save(tmp_path, 1, _state(1))
    writer = ocf.Writer(tmp_path / "ckpt-2", incremental=True, base=first)
    first.unlink()
    with pytest.raises(ocf.InvalidError, match="deleted") as raised, writer:
        writer.write_many(_state(2))
    assert str(first) in str(raised.value)
    assert not (tmp_path / "ckpt-2").exists()
    assert _pool(tmp_path) == []
