"""A CheckpointManager reopened after the last one stopped, crashed or was
interfered with: restore_or_initialize, ocf.latest_checkpoint past damaged or
missing checkpoints, and the leftovers of a killed save (removed only when the
manager's own).

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from manager_support import (
    ArrayCheckpoint,
    assert_holds,
    names,
    save_numbered,
    state_json,
    values_for,
)

import ocf
from ocf.objects.recovery import RecoveryWarning

# -- reopening, restoring, recovering --------------------------------------------


def test_a_reopened_manager_continues_where_the_last_one_stopped(tmp_path: Path) -> None:
    first = ArrayCheckpoint()
    manager = ocf.CheckpointManager(first, tmp_path, max_to_keep=2)
    for _ in range(3):
        save_numbered(manager, first)

    second = ArrayCheckpoint()
    manager.close()  # the first program ends: its writer lock goes with it
    reopened = ocf.CheckpointManager(second, tmp_path, max_to_keep=2)
    assert reopened.latest_checkpoint == str(tmp_path / "ckpt-3")
    assert names(reopened.checkpoints) == ["ckpt-2", "ckpt-3"]
    assert reopened.restore_or_initialize() == str(tmp_path / "ckpt-3")
    assert second.save_counter == 3
    np.testing.assert_array_equal(second.arrays["weights"], values_for(3)["weights"])
    assert save_numbered(reopened, second) == str(tmp_path / "ckpt-4")
    assert names(reopened.checkpoints) == ["ckpt-3", "ckpt-4"]
    assert not (tmp_path / "ckpt-2").exists()
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-4")


def test_restore_or_initialize_calls_init_fn_without_checkpoints(tmp_path: Path) -> None:
    calls = []
    manager = ocf.CheckpointManager(ArrayCheckpoint(), tmp_path,
                                    init_fn=lambda: calls.append("init"))
    assert manager.restore_or_initialize() is None
    assert calls == ["init"]
    assert ocf.CheckpointManager(ArrayCheckpoint(), tmp_path).restore_or_initialize() is None


def _three_saved(directory: Path, max_to_keep: int = 5) -> None:
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
    for _ in range(3):
        save_numbered(manager, checkpoint)


def test_latest_deleted_by_hand_falls_back_to_the_newest_remaining(tmp_path: Path) -> None:
    _three_saved(tmp_path)
    (tmp_path / "ckpt-3").unlink()
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-2")
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path)
    assert manager.latest_checkpoint == str(tmp_path / "ckpt-2")
    assert names(manager.checkpoints) == ["ckpt-1", "ckpt-2"]  # the gone entry is dropped
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-2")
    assert save_numbered(manager, checkpoint) == str(tmp_path / "ckpt-3")
    assert_holds(str(tmp_path / "ckpt-3"), 3)
    assert state_json(tmp_path)["all"] == ["ckpt-1", "ckpt-2", "ckpt-3"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "directory"])
def test_a_damaged_latest_is_skipped(tmp_path: Path, damage: str) -> None:
    _three_saved(tmp_path)
    latest = tmp_path / "ckpt-3"
    if damage == "truncate":
        data = latest.read_bytes()
        latest.write_bytes(data[: len(data) - 10])
    elif damage == "garbage":
        latest.write_bytes(b"not a checkpoint" * 100)
    elif damage == "empty":
        latest.write_bytes(b"")
    else:
        latest.unlink()
        latest.mkdir()
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-2")
    manager = ocf.CheckpointManager(ArrayCheckpoint(), tmp_path)
    assert manager.latest_checkpoint == str(tmp_path / "ckpt-2")
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-2")


def test_latest_checkpoint_is_none_without_any_committed_checkpoint(
    tmp_path: Path,
) -> None:
    assert ocf.latest_checkpoint(tmp_path / "missing") is None
    assert ocf.latest_checkpoint(tmp_path) is None
    (tmp_path / "ckpt-1").write_bytes(b"not a checkpoint")  # numbered, but not committed
    assert ocf.latest_checkpoint(tmp_path) is None
    _three_saved(tmp_path / "run")
    for number in (1, 2, 3):
        (tmp_path / "run" / f"ckpt-{number}").unlink()
    with pytest.warns(RecoveryWarning, match="no checkpoint its state file .* names opens"):
        assert ocf.latest_checkpoint(tmp_path / "run") is None
    with pytest.warns(RecoveryWarning, match="found no committed checkpoint"):
        manager = ocf.CheckpointManager(ArrayCheckpoint(), tmp_path / "run")
    assert manager.latest_checkpoint is None
    assert manager.checkpoints == []


def test_crash_between_writing_and_recording_leaves_the_old_latest(tmp_path: Path) -> None:
    """The state after a kill between steps 1 and 2: a complete checkpoint not yet named."""
    _three_saved(tmp_path, max_to_keep=2)
    ocf.save_file(values_for(4), tmp_path / "ckpt-4", metadata={"save_counter": 4})
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-3")
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=2)
    assert names(manager.checkpoints) == ["ckpt-2", "ckpt-3"]
    manager.restore_or_initialize()
    save_numbered(manager, checkpoint)  # the unnamed ckpt-4 is replaced
    assert names(manager.checkpoints) == ["ckpt-3", "ckpt-4"]
    assert_holds(str(tmp_path / "ckpt-4"), 4)


def test_crash_during_deletion_is_finished_by_the_next_save(tmp_path: Path) -> None:
    """The state after a kill in step 3: entries listed whose files are gone or still there."""
    _three_saved(tmp_path, max_to_keep=None)  # state lists ckpt-1..3
    (tmp_path / "ckpt-1").unlink()  # deleted before the kill; ckpt-2 not yet
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
    assert names(manager.checkpoints) == ["ckpt-2", "ckpt-3"]
    manager.restore_or_initialize()
    save_numbered(manager, checkpoint)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-4"]
    assert state_json(tmp_path)["all"] == ["ckpt-4"]


def test_unknown_files_are_never_deleted_and_own_leftovers_are(tmp_path: Path) -> None:
    _three_saved(tmp_path, max_to_keep=1)
    keep = {
        "notes.txt": b"mine",
        "ckpt-99": None,  # a complete checkpoint the state does not name
        ".ckpt-x.ocf-tmp-0123456789abcdef": b"not one of the manager's names",
        ".other-1.ocf-tmp-0123456789abcdef": b"another prefix",
        ".ckpt-5.ocf-tmp-0123": b"not a write id",
    }
    for name, data in keep.items():
        if data is None:
            ocf.save_file(values_for(99), tmp_path / name, metadata={"save_counter": 99})
        else:
            (tmp_path / name).write_bytes(data)
    leftovers = [".ckpt-4.ocf-tmp-0123456789abcdef", ".checkpoint.json.ocf-tmp-fedcba9876543210"]
    for name in leftovers:
        (tmp_path / name).write_bytes(b"a killed write")
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
    assert all((tmp_path / name).exists() for name in leftovers)  # constructing removes nothing
    manager.restore_or_initialize()
    for _ in range(2):
        save_numbered(manager, checkpoint)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*keep, "checkpoint.json", "ckpt-5"])
    assert_holds(str(tmp_path / "ckpt-99"), 99)


def test_checkpoints_in_the_directory_form_are_deleted_whole(tmp_path: Path) -> None:
    class DirectoryCheckpoint(ArrayCheckpoint):
        def write(self, path: str) -> str:
            ocf.save_file(self.arrays, path, layout="directory",
                          metadata={"save_counter": self._save_counter})
            return path

    checkpoint = DirectoryCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
    for _ in range(3):
        save_numbered(manager, checkpoint)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-3"]
    assert_holds(str(tmp_path / "ckpt-3"), 3)
