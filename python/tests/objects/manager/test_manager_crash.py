"""A CheckpointManager killed while it saves never loses the latest checkpoint.

The SIGKILL test runs a manager saving in a loop in a child process, kills it
at random moments and checks after every kill that ``ocf.latest_checkpoint``
names a complete checkpoint of the expected values and that a new manager
continues; its seed is printed and OCF_MANAGER_SEED replays one. The strace
test checks the order of the system calls of a save: checkpoint renamed into
place, then the state file fsynced and renamed, then the directory fsynced,
and only then the old checkpoint unlinked.

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from manager_support import (
    SEED,
    TESTS_DIR,
    assert_holds,
    run_saving_child,
)
from strace_support import needs_strace, traced_calls

import ocf
from ocf.objects.state_file import (
    STATE_FILE_NAME,
    read_state,
)

# -- SIGKILL at random moments ---------------------------------------------------

KILLS = 12
BIG = 1 << 20  # float32 elements per checkpoint: 4 MiB, about 10 ms to save here

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import ocf
    from manager_support import ArrayCheckpoint, values_for

    directory, size, count, keep = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, directory, max_to_keep=keep)
    manager.restore_or_initialize()
    print("ready", checkpoint.save_counter, flush=True)
    for _ in range(count):
        number = checkpoint.save_counter + 1
        checkpoint.arrays = values_for(number, size)
        assert manager.save() == f"{directory}/ckpt-{number}"
        print("saved", number, flush=True)
""")


def _run_child(directory: Path, keep: int, count: int,
               kill_after: float | None) -> tuple[int, list[int]]:
    """Run the saving child; SIGKILL it ``kill_after`` seconds after it is ready.

    Returns the save counter it restored and the numbers it reported saved.
    """
    resumed, saved, code, err = run_saving_child(
        [CHILD, str(TESTS_DIR), str(directory), str(BIG), str(count), str(keep)],
        kill_after, timeout=30)
    assert code in (0, 0 if kill_after is None else -signal.SIGKILL), err
    return resumed, saved


def _check_after_kill(directory: Path, keep: int, saved: int, previous: int,
                      context: str) -> int:
    """The latest checkpoint is complete, restores, and is at least what was saved."""
    read_state(directory)  # whole and well formed, whatever the moment of the kill
    latest = ocf.latest_checkpoint(directory)
    if latest is None:
        assert saved == 0, f"{context}: no latest checkpoint after save {saved} returned"
        return 0
    match = re.fullmatch(r"ckpt-(\d+)", os.path.basename(latest))
    assert match is not None, context
    number = int(match[1])
    assert number >= saved, f"{context}: latest is {number}, but save {saved} had returned"
    assert number >= previous, f"{context}: latest went back from {previous} to {number}"
    assert_holds(latest, number, BIG)
    files = [p.name for p in directory.iterdir()]
    checkpoints = [n for n in files if n.startswith("ckpt-")]
    # max_to_keep + 1 listed during the deletions, + 1 written but not yet named.
    assert len(checkpoints) <= keep + 2, f"{context}: {sorted(files)}"
    return number


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("keep", [2, 1])
def test_sigkill_at_random_moments_never_loses_the_latest_checkpoint(
    tmp_path: Path, keep: int,
) -> None:
    """With max_to_keep=1 every save deletes the previous latest: the order matters most."""
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}-{keep}")
    directory = tmp_path / "run"
    saved = latest = 0
    started = time.monotonic()
    for kill in range(KILLS):
        context = f"seed {SEED}, max_to_keep {keep}, kill {kill}"
        restored, numbers = _run_child(directory, keep, 1_000_000, rng.uniform(0.0, 0.3))
        assert restored == latest, f"{context}: the child restored {restored}, not {latest}"
        assert numbers == list(range(latest + 1, latest + 1 + len(numbers))), context
        saved = max([saved, *numbers])
        latest = _check_after_kill(directory, keep, saved, latest, context)
    assert latest > 0, f"seed {SEED}: no save finished in {KILLS} runs"
    # A new manager continues; after it saved, only its newest checkpoints remain.
    restored, numbers = _run_child(directory, keep, 3, None)
    assert (restored, numbers) == (latest, [latest + 1, latest + 2, latest + 3])
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        ["checkpoint.json", *(f"ckpt-{latest + 4 - i}" for i in range(1, keep + 1))])
    assert_holds(str(directory / f"ckpt-{latest + 3}"), latest + 3, BIG)
    assert time.monotonic() - started < 60


# -- the order of a save's system calls ------------------------------------------

TRACED = ("openat", "fsync", "fdatasync", "rename", "renameat", "renameat2", "unlink",
          "unlinkat")
SAVE_THREE = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import ocf
    from manager_support import ArrayCheckpoint, values_for

    checkpoint = ArrayCheckpoint(values_for(0))
    manager = ocf.CheckpointManager(checkpoint, sys.argv[2], max_to_keep=1)
    for _ in range(3):
        manager.save()
""")


def _trace(tmp_path: Path, directory: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The calls that succeeded, as (name, paths)."""
    calls = traced_calls(tmp_path / "strace.log", TRACED,
                         [sys.executable, "-c", SAVE_THREE, str(TESTS_DIR), str(directory)])
    return [(call.name, call.paths) for call in calls if call.result >= 0]


def _index(calls: list[tuple[str, tuple[str, ...]]], start: int,
           test: Callable[[str, tuple[str, ...]], bool], what: str) -> int:
    for i in range(start, len(calls)):
        if test(*calls[i]):
            return i
    raise AssertionError(f"no {what} after call {start}")


@needs_strace
def test_a_save_publishes_the_checkpoint_then_the_state_then_deletes(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    calls = _trace(tmp_path, directory)
    state = str(directory / STATE_FILE_NAME)

    def renamed_to(target: str) -> Callable[[str, tuple[str, ...]], bool]:
        return lambda name, paths: name.startswith("rename") and paths[-1:] == (target,)

    def fsynced(path: str) -> Callable[[str, tuple[str, ...]], bool]:
        return lambda name, paths: name in ("fsync", "fdatasync") and paths == (path,)

    def unlinked(path: str) -> Callable[[str, tuple[str, ...]], bool]:
        return lambda name, paths: name.startswith("unlink") and paths[-1:] == (path,)

    old = str(directory / "ckpt-2")
    new = _index(calls, 0, renamed_to(str(directory / "ckpt-3")), "rename to ckpt-3")
    recorded = _index(calls, new, renamed_to(state), "rename of the state file")
    temp = calls[recorded][1][0]
    assert ".ocf-tmp-" in temp
    synced = _index(calls, new, fsynced(temp), "fsync of the state's temporary file")
    assert synced < recorded
    durable = _index(calls, recorded, fsynced(str(directory)), "fsync of the directory")
    deleted = _index(calls, 0, unlinked(old), "unlink of ckpt-2")
    assert durable < deleted, "ckpt-2 was deleted before the state naming ckpt-3 was durable"
    _index(calls, deleted, renamed_to(state), "rename of the state file without ckpt-2")
