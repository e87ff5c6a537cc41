"""Asynchronous CheckpointManager saves: the state file names a checkpoint only after
its commit, the next save waits for the state, and a failed save leaves the state
as it was and raises from wait().

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from manager_support import (
    state_json,
)

import ocf
from ocf.format.async_save import then


class GatedCheckpoint:
    """An ocf.Checkpoint whose asynchronous saves hold the background thread after
    the commit until ``gate`` is set: the moment between commit and state update."""

    def __init__(self, value: np.ndarray) -> None:
        self.variable = ocf.Variable(value)
        self.inner = ocf.Checkpoint(model=self.variable)
        self.gate = threading.Event()
        self.committed: list[ocf.SaveHandle] = []

    @property
    def save_counter(self) -> int:
        return self.inner.save_counter

    def _gated(self, handle: ocf.SaveHandle) -> ocf.SaveHandle:
        self.committed.append(handle)

        def hold(path: str) -> str:
            assert self.gate.wait(60), "the test never opened the gate"
            return path

        return then(handle, hold)

    def write(self, path: str, blocking: bool = True) -> str | ocf.SaveHandle:
        if blocking:
            return self.inner.write(path)
        return self._gated(self.inner.write(path, blocking=False))

    def save(self, prefix: str, blocking: bool = True) -> str | ocf.SaveHandle:
        if blocking:
            return self.inner.save(prefix)
        return self._gated(self.inner.save(prefix, blocking=False))

    def restore(self, path: str) -> object:
        return self.inner.restore(path)


def _variable_value(path: str) -> np.ndarray:
    return ocf.load_variable(path, "model/.value")


def test_async_save_records_the_state_only_after_the_commit(tmp_path: Path) -> None:
    checkpoint = GatedCheckpoint(np.arange(1000, dtype=np.float64))
    value = checkpoint.variable.value
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
    assert manager.save() == str(tmp_path / "ckpt-1")

    value += 1  # the training step before the next save
    handle = manager.save(blocking=False)
    assert isinstance(handle, ocf.SaveHandle)
    value += 1  # after the call: not in the checkpoint
    assert checkpoint.committed[-1].wait(60) == str(tmp_path / "ckpt-2")
    # Committed, the state not yet updated: everything still names ckpt-1.
    assert state_json(tmp_path)["all"] == ["ckpt-1"]
    assert ocf.latest_checkpoint(tmp_path) == manager.latest_checkpoint == str(
        tmp_path / "ckpt-1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-1", "ckpt-2"]
    assert not handle.done()

    checkpoint.gate.set()
    assert handle.wait(60) == str(tmp_path / "ckpt-2")
    assert state_json(tmp_path)["latest"] == "ckpt-2"
    assert manager.checkpoints == [str(tmp_path / "ckpt-2")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-2"]
    np.testing.assert_array_equal(_variable_value(str(tmp_path / "ckpt-2")),
                                  np.arange(1000) + 1.0)


def test_async_save_with_a_number_and_the_next_save_waits_for_the_state(tmp_path: Path) -> None:
    checkpoint = GatedCheckpoint(np.zeros(4))
    checkpoint.gate.set()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=2)
    first = manager.save(checkpoint_number=7, blocking=False)
    assert first is not None
    # A blocking save right after: it runs after the background state update.
    assert manager.save(checkpoint_number=8) == str(tmp_path / "ckpt-8")
    assert first.done()
    assert first.wait() == str(tmp_path / "ckpt-7")
    assert state_json(tmp_path)["all"] == ["ckpt-7", "ckpt-8"]
    assert checkpoint.save_counter == 0


def test_failed_async_save_leaves_the_state_and_raises_from_wait(tmp_path: Path) -> None:
    checkpoint = GatedCheckpoint(np.zeros(4))
    checkpoint.gate.set()
    manager = ocf.CheckpointManager(checkpoint, tmp_path)
    manager.save()
    (tmp_path / "ckpt-2").mkdir()  # the file form cannot be written there
    (tmp_path / "ckpt-2" / "mine.txt").write_bytes(b"kept")
    handle = manager.save(blocking=False)
    assert handle is not None
    with pytest.raises(ocf.InvalidError, match="ckpt-2"):
        handle.wait(60)
    assert state_json(tmp_path)["all"] == ["ckpt-1"]
    assert manager.latest_checkpoint == ocf.latest_checkpoint(tmp_path) == str(
        tmp_path / "ckpt-1")
