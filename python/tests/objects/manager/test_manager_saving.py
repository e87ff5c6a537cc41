"""What a CheckpointManager save does and when: the Saveable protocol, the options
the manager refuses, the directory made on the first save, a checkpoint written
outside the directory, and checkpoint_interval.

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from manager_support import (
    ArrayCheckpoint,
    save_numbered,
    values_for,
)

import ocf
from ocf.objects.manager import Saveable
from ocf.objects.state_file import (
    STATE_FILE_NAME,
)


def test_array_checkpoint_is_a_saveable() -> None:
    assert isinstance(ArrayCheckpoint(), Saveable)


@pytest.mark.parametrize("kwargs", [
    {"max_to_keep": 0}, {"max_to_keep": -1}, {"max_to_keep": True}, {"max_to_keep": 2.0},
    {"keep_checkpoint_every_n_hours": 0}, {"keep_checkpoint_every_n_hours": float("nan")},
    {"checkpoint_interval": 5}, {"checkpoint_interval": 0, "step_counter": 1},
    {"checkpoint_name": "a/b"}, {"checkpoint_name": ".."}, {"checkpoint_name": ""},
])
def test_bad_options_are_refused(tmp_path: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ocf.InvalidError):
        ocf.CheckpointManager(ArrayCheckpoint(), tmp_path, **kwargs)


def test_the_directory_is_made_on_the_first_save(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, directory)
    assert not directory.exists()  # constructing writes nothing
    assert ocf.latest_checkpoint(directory) is None
    save_numbered(manager, checkpoint)
    assert ocf.latest_checkpoint(directory) == str(directory / "ckpt-1")


class Elsewhere(ArrayCheckpoint):
    def save(self, prefix: str) -> str:
        self._save_counter += 1
        return self.write(f"{prefix}-{self._save_counter}".replace("inside", "outside"))


def test_a_checkpoint_written_outside_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    manager = ocf.CheckpointManager(Elsewhere(), tmp_path / "inside")
    with pytest.raises(ocf.InvalidError, match="outside"):
        manager.save()
    assert not (tmp_path / "inside" / STATE_FILE_NAME).exists()


# -- checkpoint_interval ---------------------------------------------------------


def test_checkpoint_interval_saves_every_n_steps(tmp_path: Path) -> None:
    step = np.array(0)  # a step counter that changes in place
    checkpoint = ArrayCheckpoint(values_for(0))
    manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=None,
                                    step_counter=step, checkpoint_interval=10)
    saved = []
    for value in range(0, 35, 5):
        step[...] = value
        saved.append(manager.save() is not None)
    assert saved == [True, False, True, False, True, False, True]  # steps 0, 10, 20, 30
    step[...] = 31
    assert manager.save() is None
    assert manager.save(check_interval=False) is not None
    assert manager.save(check_interval=False) is None  # this step is saved already
    assert len(manager.checkpoints) == 5


def test_restore_or_initialize_sets_the_interval_start(tmp_path: Path) -> None:
    steps = iter([7, 7, 12, 17])
    current = {"step": 0}

    def counter() -> int:
        return current["step"]

    first = ocf.CheckpointManager(ArrayCheckpoint(values_for(1)), tmp_path,
                                  step_counter=counter, checkpoint_interval=10)
    current["step"] = next(steps)
    assert first.save() is not None
    first.close()
    second = ocf.CheckpointManager(ArrayCheckpoint(), tmp_path, step_counter=counter,
                                   checkpoint_interval=10)
    current["step"] = next(steps)
    assert second.restore_or_initialize() == str(tmp_path / "ckpt-1")
    current["step"] = next(steps)
    assert second.save() is None  # 12 < 7 + 10
    current["step"] = next(steps)
    assert second.save() is not None
