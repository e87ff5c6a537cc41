"""Asynchronous saves (ocf.format.async_save): snapshot at the call, write in the background.

Real threads, real files, a real SIGKILL. Expected values are copies the
test makes itself before handing the arrays over.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from repo_paths import TESTS_DIR

import ocf
from ocf.format import async_save
from ocf.format.async_save import then, wait_for_pending


@pytest.fixture(autouse=True)
def _no_save_left_running() -> object:
    """Each test starts and ends with no asynchronous save pending."""
    wait_for_pending(raise_unobserved=False)
    yield None
    wait_for_pending(raise_unobserved=False)


def _state(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "big": rng.standard_normal((1024, 2048)).astype(np.float32),  # 8 MiB: copied in pieces
        "transposed": rng.standard_normal((300, 500)).T,  # not contiguous
        "small": rng.integers(0, 100, 17).astype(np.int16),
        "flags": rng.integers(0, 2, (4, 4)).astype(bool),
        "step": np.array(seed, dtype=np.int64),
        "names": np.array([b"a", b"bc"], dtype=object),
    }


def _copies(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {key: value.copy() for key, value in state.items()}


def _assert_holds(path: Path | str, expected: dict[str, np.ndarray]) -> None:
    got = ocf.load_file(path)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype, key
        assert np.array_equal(got[key], value), key


def _scramble(state: dict[str, np.ndarray]) -> None:
    """What a training step does to the arrays right after the save returned."""
    for value in state.values():
        if value.dtype.hasobject:
            value[0] = b"changed"
        elif value.dtype == bool:
            value[...] = ~value
        else:
            value += 1


def test_checkpoint_holds_the_values_at_the_call_not_later_changes(tmp_path: Path) -> None:
    state = _state(1)
    expected = _copies(state)
    handle = ocf.save_file(state, tmp_path / "model.ocf", metadata={"epoch": 1},
                           blocking=False)
    _scramble(state)
    assert handle.wait(timeout=120) == os.fspath(tmp_path / "model.ocf")
    assert handle.done()
    _assert_holds(tmp_path / "model.ocf", expected)
    with ocf.open(tmp_path / "model.ocf") as reader:
        assert reader.metadata == {"epoch": 1}


def test_metadata_changed_after_the_call_is_not_saved(tmp_path: Path) -> None:
    metadata: dict[str, object] = {"losses": [1.5, 2.5]}
    handle = ocf.save_file(_state(2), tmp_path / "ckpt", layout="directory",
                           metadata=metadata, blocking=False)
    metadata["losses"].append(9.0)  # type: ignore[attr-defined]
    handle.wait(timeout=120)
    with ocf.open(tmp_path / "ckpt") as reader:
        assert reader.metadata == {"losses": [1.5, 2.5]}


def test_error_of_the_background_write_is_raised_by_wait(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"not a directory")
    handle = ocf.save_file(_state(3), tmp_path / "plain" / "model.ocf", blocking=False)
    with pytest.raises(FileExistsError):  # its parent is a regular file
        handle.wait(timeout=120)
    assert handle.done()
    assert isinstance(handle.exception(), FileExistsError)
    ocf.save_file(_state(3), tmp_path / "next.ocf")  # observed: the next save is not refused


def test_unobserved_failure_is_raised_by_the_next_save(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"not a directory")
    failing = ocf.save_file(_state(4), tmp_path / "plain" / "model.ocf", blocking=False)
    with pytest.raises(FileExistsError):
        ocf.save_file(_state(4), tmp_path / "next.ocf", blocking=False)
    assert failing.done()
    assert not (tmp_path / "next.ocf").exists()
    # Reported once: the save after it goes ahead.
    ocf.save_file(_state(4), tmp_path / "next.ocf", blocking=False).wait(timeout=120)
    _assert_holds(tmp_path / "next.ocf", _state(4))


def test_second_save_waits_until_the_first_has_committed(tmp_path: Path) -> None:
    # 128 MiB of random floats through zstd: seconds of background work.
    slow = {f"t{i}": np.random.default_rng(i).standard_normal(4 << 20) for i in range(4)}
    first = ocf.save_file(slow, tmp_path / "first.ocf", compression="zstd",
                          compression_level=9, blocking=False)
    assert not first.done()  # returned while the write goes on
    second = ocf.save_file(_state(5), tmp_path / "second.ocf", blocking=False)
    assert first.done()
    assert (tmp_path / "first.ocf").exists()
    second.wait(timeout=120)
    _assert_holds(tmp_path / "first.ocf", slow)
    _assert_holds(tmp_path / "second.ocf", _state(5))


def test_checkpoint_save_async_numbers_and_restores(tmp_path: Path) -> None:
    model = ocf.Module()
    model.kernel = ocf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    checkpoint = ocf.Checkpoint(model=model)
    handle = checkpoint.save(tmp_path / "ckpt", blocking=False)
    assert handle.path == os.fspath(tmp_path / "ckpt-1")
    assert checkpoint.save_counter == 1
    model.kernel.value[...] = -1.0
    assert handle.wait(timeout=120) == os.fspath(tmp_path / "ckpt-1")

    fresh = ocf.Module()
    fresh.kernel = ocf.Variable(np.zeros((2, 3), np.float32))
    restored = ocf.Checkpoint(model=fresh)
    restored.restore(handle.path).assert_consumed()
    assert np.array_equal(fresh.kernel.value, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert restored.save_counter == 1


def test_then_runs_after_the_commit_and_never_after_a_failure(tmp_path: Path) -> None:
    seen: list[bool] = []

    def follow_up(path: str) -> str:
        seen.append(Path(path).is_file())  # committed: the file is in place
        return path

    handle = ocf.save_file(_state(6), tmp_path / "a.ocf", blocking=False)
    assert then(handle, follow_up).wait(timeout=120) == os.fspath(tmp_path / "a.ocf")
    assert seen == [True]

    (tmp_path / "b.ocf").mkdir()  # the file form cannot be written there
    (tmp_path / "b.ocf" / "mine").write_bytes(b"")
    chained = then(ocf.save_file(_state(6), tmp_path / "b.ocf", blocking=False), follow_up)
    with pytest.raises(ocf.InvalidError, match=r"b\.ocf"):
        chained.wait(timeout=120)
    assert seen == [True]


def test_unobserved_failure_of_a_follow_up_is_raised_by_the_next_save(tmp_path: Path) -> None:
    def fail(path: str) -> str:
        raise ocf.InvalidError("the follow-up failed", path=path)

    handle = ocf.save_file(_state(7), tmp_path / "a.ocf", blocking=False)
    then(handle, fail)  # nobody asks this handle
    with pytest.raises(ocf.InvalidError, match="follow-up failed"):
        ocf.save_file(_state(7), tmp_path / "next.ocf")
    assert not (tmp_path / "next.ocf").exists()
    _assert_holds(tmp_path / "a.ocf", _state(7))


@pytest.mark.parametrize("helpers", [0, 1, 3])
def test_large_pieces_and_any_number_of_copiers_copy_every_byte(
        monkeypatch: pytest.MonkeyPatch, helpers: int) -> None:
    # Small stand-ins for 128 MiB pieces: the slicing is the same, the last piece short.
    monkeypatch.setattr(async_save, "_LARGE_PIECE", (3 << 20) + 64)
    monkeypatch.setattr(async_save, "_COPY_HELPERS", helpers)
    rng = np.random.default_rng(8)
    state = {"large": rng.standard_normal((7 << 17) + 3),  # 7 MiB + 24 bytes: 3 pieces
             "medium": rng.integers(0, 1 << 30, (1 << 20) + 1, dtype=np.int32),  # 8 MiB pieces
             "small": rng.standard_normal(7).astype(np.float32)}
    expected = _copies(state)
    snapshot = async_save.snapshot_tensors(state)
    _scramble(state)
    for key, value in expected.items():
        assert snapshot[key].dtype == value.dtype, key
        assert np.array_equal(snapshot[key], value), key


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from helpers import big_values
    import ocf

    arrays = big_values(2)                # 13 tensors of 16 MiB
    handle = ocf.save_file(arrays, sys.argv[2], metadata={"version": "new"}, blocking=False)
    print("returned", flush=True)
    for array in arrays.values():         # training goes on
        array[:] = 0
    handle.wait()
    print("committed", flush=True)
""")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # renamed away by the commit meanwhile
        return 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_the_background_write_leaves_the_previous_checkpoint(
        tmp_path: Path) -> None:
    target = tmp_path / "model.ocf"
    old = _state(6)
    ocf.save_file(old, target, metadata={"version": "old"})
    before = target.read_bytes()

    child = subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS_DIR), str(target)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "returned"
    deadline = time.monotonic() + 120
    # Killed while the background thread writes the temporary file.
    while not any(p.name.startswith(".model.ocf.ocf-tmp-") and _size(p) > (32 << 20)
                  for p in tmp_path.iterdir()):
        assert child.poll() is None, "the save finished before the moment to kill it"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()

    assert target.read_bytes() == before
    _assert_holds(target, old)
