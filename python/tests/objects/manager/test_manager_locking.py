"""One CheckpointManager saves into a directory at a time: a second process is
refused until the holder dies, two managers of one program take turns through
close().

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from manager_support import (
    TESTS_DIR,
    ArrayCheckpoint,
    values_for,
)

import ocf

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import ocf
    from manager_support import ArrayCheckpoint, values_for

    manager = ocf.CheckpointManager(ArrayCheckpoint(values_for(1)), sys.argv[2])
    manager.save()
    print("holding", flush=True)
    time.sleep(600)
""")


def test_a_second_process_saving_into_the_directory_is_refused_until_the_holder_dies(
        tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(TESTS_DIR), str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as holder:
        _refused_until_killed(holder, tmp_path)


def _refused_until_killed(holder: subprocess.Popen[str], tmp_path: Path) -> None:
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding", holder.communicate()[1]
        second = ocf.CheckpointManager(ArrayCheckpoint(values_for(2)), tmp_path)
        assert second.latest_checkpoint == str(tmp_path / "ckpt-1")  # reading is allowed
        with pytest.raises(ocf.InvalidError, match=rf"{tmp_path}: another CheckpointManager "
                           rf"or incremental writer \(process {holder.pid}\) is saving "
                           r"into this directory"):
            second.save()
        assert sorted(os.listdir(tmp_path)) == ["checkpoint.json", "ckpt-1"]  # untouched
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert second.restore_or_initialize() == str(tmp_path / "ckpt-1")
        assert second.save() == str(tmp_path / "ckpt-2")  # the kill released the lock
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_two_managers_of_one_program_take_turns_through_close(tmp_path: Path) -> None:
    first = ocf.CheckpointManager(ArrayCheckpoint(values_for(1)), tmp_path)
    first.save()
    with ocf.CheckpointManager(ArrayCheckpoint(values_for(2)), tmp_path) as second:
        with pytest.raises(ocf.InvalidError, match="of this program"):
            second.save()
        first.close()
        second.restore_or_initialize()  # not to number a checkpoint below the first's
        assert second.save() is not None
    with ocf.CheckpointManager(ArrayCheckpoint(values_for(3)), tmp_path) as third:
        third.restore_or_initialize()
        assert third.save() is not None  # the with block released the second's lock
