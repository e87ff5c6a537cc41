"""Which checkpoints a CheckpointManager keeps: numbering and max_to_keep,
keep_checkpoint_every_n_hours (with an explicit clock), and keeping the best by
best_fn.

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
from ocf.objects.state_file import (
    read_state,
)


class Clock:
    """An explicit clock for the hours rule: returns ``now``, settable."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- numbering and max_to_keep ---------------------------------------------------


def test_save_numbers_by_save_counter_and_keeps_the_newest_max_to_keep(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    assert manager.directory == str(tmp_path)
    assert manager.latest_checkpoint is None
    assert manager.checkpoints == []
    paths = [save_numbered(manager, checkpoint) for _ in range(5)]
    assert paths == [str(tmp_path / f"ckpt-{n}") for n in range(1, 6)]
    assert manager.checkpoints == paths[2:]
    assert manager.latest_checkpoint == paths[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.json", "ckpt-3", "ckpt-4", "ckpt-5"]
    state = state_json(tmp_path)
    assert state["format"] == "ocf-checkpoint-state"
    assert state["version"] == 1
    assert state["latest"] == "ckpt-5"
    assert state["all"] == ["ckpt-3", "ckpt-4", "ckpt-5"]
    timestamps = state["timestamps"]
    assert isinstance(timestamps, list)
    assert len(timestamps) == 3
    assert timestamps == sorted(timestamps)
    assert isinstance(state["last_preserved_timestamp"], float)
    for number in (3, 4, 5):
        assert_holds(str(tmp_path / f"ckpt-{number}"), number)
    assert ocf.latest_checkpoint(tmp_path) == paths[-1]


def test_checkpoint_number_names_the_checkpoint_and_leaves_save_counter(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint(values_for(0))
    manager = ocf.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2,
                                    checkpoint_name="model")
    assert manager.save(checkpoint_number=100) == str(tmp_path / "model-100")
    assert manager.save(checkpoint_number=np.int64(200)) == str(tmp_path / "model-200")
    assert checkpoint.save_counter == 0
    # The manager never numbers a checkpoint below one it holds [R-COMMIT-010].
    with pytest.raises(ocf.InvalidError, match=r"next checkpoint would be model-1, but the "
                       r"directory holds model-200: restore it first"):
        manager.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.json", "model-100", "model-200"]
    assert manager.save(checkpoint_number=300) == str(tmp_path / "model-300")
    assert names(manager.checkpoints) == ["model-200", "model-300"]
    assert not (tmp_path / "model-100").exists()
    with pytest.raises(ocf.InvalidError, match="checkpoint_number"):
        manager.save(checkpoint_number=-1)


def test_saving_a_number_again_moves_it_to_the_newest(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint(values_for(0))
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    for number in (1, 2, 3, 1):
        checkpoint.arrays = values_for(number)
        manager.save(checkpoint_number=number)
    assert names(manager.checkpoints) == ["ckpt-2", "ckpt-3", "ckpt-1"]
    assert state_json(tmp_path)["latest"] == "ckpt-1"
    checkpoint.arrays = values_for(4)
    manager.save(checkpoint_number=4)
    assert names(manager.checkpoints) == ["ckpt-3", "ckpt-1", "ckpt-4"]
    assert not (tmp_path / "ckpt-2").exists()


def test_max_to_keep_none_keeps_and_lists_everything(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=None)
    for _ in range(7):
        save_numbered(manager, checkpoint)
    assert names(manager.checkpoints) == [f"ckpt-{n}" for n in range(1, 8)]
    assert state_json(tmp_path)["all"] == [f"ckpt-{n}" for n in range(1, 8)]


# -- keep_checkpoint_every_n_hours -----------------------------------------------

HOUR = 3600.0


def test_keep_checkpoint_every_n_hours_preserves_one_per_period(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=2,
                                    keep_checkpoint_every_n_hours=1, clock=clock)
    for number in range(1, 8):  # saves every half hour from t=1000
        clock.now = 1000.0 + (number - 1) * HOUR / 2
        save_numbered(manager, checkpoint)
    # Leaving the managed set: 1 (t=1000) and 2 (t=2800) are under an hour after
    # the start (999), so deleted; 3 (t=4600) is kept; 4 (t=6400) is under an hour
    # after 3, deleted; 5 (t=8200) is an hour after 3, kept.
    assert names(manager.checkpoints) == ["ckpt-6", "ckpt-7"]
    on_disk = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt-"))
    assert on_disk == ["ckpt-3", "ckpt-5", "ckpt-6", "ckpt-7"]
    state = state_json(tmp_path)
    assert state["all"] == ["ckpt-6", "ckpt-7"]
    assert state["timestamps"] == [1000.0 + 5 * HOUR / 2, 1000.0 + 6 * HOUR / 2]
    assert state["last_preserved_timestamp"] == 1000.0 + 2 * HOUR

    # A new manager (without the hours rule) never deletes the preserved ones.
    manager.close()
    reopened = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1, clock=clock)
    assert names(reopened.checkpoints) == ["ckpt-6", "ckpt-7"]
    clock.now += HOUR
    save_numbered(reopened, checkpoint)
    on_disk = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt-"))
    assert on_disk == ["ckpt-3", "ckpt-5", "ckpt-8"]


def test_a_clock_that_went_back_never_deletes_early(tmp_path: Path) -> None:
    clock = Clock(100 * HOUR)
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1,
                                    keep_checkpoint_every_n_hours=1, clock=clock)
    save_numbered(manager, checkpoint)
    clock.now = 10 * HOUR  # the next process starts with a clock far behind
    manager.close()
    reopened = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=1,
                                     keep_checkpoint_every_n_hours=1, clock=clock)
    # As in TensorFlow: what was saved "in the future" leaves the managed set and is
    # never deleted, rather than being judged with timestamps that cannot be trusted.
    assert reopened.checkpoints == []
    assert reopened.latest_checkpoint == str(tmp_path / "ckpt-1")
    save_numbered(reopened, checkpoint)
    clock.now += 1
    save_numbered(reopened, checkpoint)
    assert names(reopened.checkpoints) == ["ckpt-3"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt-")) == [
        "ckpt-1", "ckpt-3"]


# -- keeping the best ---------------------------------------------------------------

LOSSES = [0.5, 0.2, 0.9, 0.1, 0.7, 0.3]


def save_with_losses(manager: ocf.CheckpointManager, checkpoint: ArrayCheckpoint,
                     losses: list[float]) -> None:
    for loss in losses:
        checkpoint.arrays = values_for(checkpoint.save_counter + 1)
        assert manager.save(metrics={"loss": loss}) is not None


def test_best_fn_keeps_the_latest_and_the_best_ranked_others(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=3,
                                    best_fn=lambda m: m["loss"], best_mode="min")
    save_with_losses(manager, checkpoint, LOSSES)
    # ckpt-6 is the latest; of the others, ckpt-4 (0.1) and ckpt-2 (0.2) are the best.
    assert names(manager.checkpoints) == ["ckpt-2", "ckpt-4", "ckpt-6"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-2",
                                                          "ckpt-4", "ckpt-6"]
    state = read_state(tmp_path)
    assert state is not None
    assert state.metrics == ({"loss": 0.2}, {"loss": 0.1}, {"loss": 0.3})


def test_a_reopened_keep_best_manager_ranks_what_the_last_one_saved(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint()
    with ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=2,
                               best_fn=lambda m: m["accuracy"]) as manager:
        for accuracy in (0.9, 0.4):
            checkpoint.arrays = values_for(checkpoint.save_counter + 1)
            manager.save(metrics={"accuracy": accuracy})
    reopened = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=2,
                                     best_fn=lambda m: m["accuracy"])
    checkpoint.arrays = values_for(3)
    reopened.save(metrics={"accuracy": 0.5})
    assert names(reopened.checkpoints) == ["ckpt-1", "ckpt-3"]  # 0.9 stays, 0.4 goes


def test_best_fn_needs_metrics_and_a_score_before_anything_is_written(tmp_path: Path) -> None:
    checkpoint = ArrayCheckpoint(values_for(1))
    manager = ocf.CheckpointManager(checkpoint, tmp_path, best_fn=lambda m: m["loss"])
    with pytest.raises(ocf.InvalidError, match=r"save\(metrics=\{\.\.\.\}\)"):
        manager.save()
    with pytest.raises(KeyError, match="loss"):
        manager.save(metrics={"accuracy": 1.0})
    with pytest.raises(ocf.InvalidError, match="metric 'loss' must be a finite number"):
        manager.save(metrics={"loss": float("nan")})
    assert list(tmp_path.iterdir()) == []
