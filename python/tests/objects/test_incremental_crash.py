"""A CheckpointManager with incremental=True killed by SIGKILL at random moments of
its saves, deletions and pool collections never leaves a retained checkpoint with
a missing or wrong block, resumes bit-exactly, and its next save collects what the
kill left.

A child process restores the latest checkpoint (checking that it holds exactly
the values of its number), then saves numbered checkpoints in a loop with
max_to_keep=2, so that every save also retires a checkpoint and collects the
pool; the parent kills it after a random delay. After every kill, every
checkpoint file in the directory passes a full verification (every pool object
against its SHA-256, every chunk against its CRC) and holds the values of its
number. The seed is printed; OCF_MANAGER_SEED replays it.
"""

from __future__ import annotations

import random
import signal
import textwrap
from pathlib import Path

import pytest
from incremental_support import TESTS_DIR, assert_root_consistent
from manager_support import SEED, run_saving_child

import ocf

KILLS = 12

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import ocf
    from incremental_support import state_for

    directory, count = sys.argv[2], int(sys.argv[3])
    variables = {key: ocf.Variable(value) for key, value in state_for(0).items()}
    checkpoint = ocf.Checkpoint(**variables)
    manager = ocf.CheckpointManager(checkpoint, directory, max_to_keep=2, incremental=True)
    path = manager.restore_or_initialize()
    number = int(variables["number"].value)
    for key, value in state_for(number).items():  # bit-exact resume
        assert np.array_equal(variables[key].value, value), key
    print("ready", number, flush=True)
    for _ in range(count):
        number += 1
        for key, value in state_for(number).items():
            variables[key].value[...] = value
        assert manager.save(checkpoint_number=number) == f"{directory}/ckpt-{number}"
        print("saved", number, flush=True)
""")


def _run_child(directory: Path, count: int, kill_after: float | None) -> tuple[int, list[int]]:
    """Run the saving child, SIGKILLed ``kill_after`` seconds after it is ready; the
    number it resumed from and the numbers it reported saved."""
    resumed, saved, code, err = run_saving_child(
        [CHILD, str(TESTS_DIR), str(directory), str(count)], kill_after, timeout=120)
    assert code in (0, -signal.SIGKILL), err
    return resumed, saved


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_incremental_saves_never_breaks_a_retained_checkpoint(
        tmp_path: Path) -> None:
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}-incremental")
    directory = tmp_path / "run"
    saved = 0
    for kill in range(KILLS):
        context = f"seed {SEED}, kill {kill}"
        before = ocf.latest_checkpoint(directory)
        resumed, numbers = _run_child(directory, 1_000_000, rng.uniform(0.0, 1.5))
        assert resumed == (0 if before is None else int(Path(before).name.split("-")[1])), \
            f"{context}: resumed from {resumed}, the latest was {before}"
        assert resumed >= saved, f"{context}: resumed {resumed}, but save {saved} had returned"
        assert numbers == list(range(resumed + 1, resumed + 1 + len(numbers))), context
        saved = max([saved, *numbers])
        latest = ocf.latest_checkpoint(directory)
        checkpoints = assert_root_consistent(directory, leftovers_allowed=True)
        if saved:
            assert latest is not None, context
            assert int(Path(latest).name.split("-")[1]) >= saved, context
        # max_to_keep + 1 listed during the deletions, + 1 written but not yet named.
        assert len(checkpoints) <= 4, f"{context}: {checkpoints}"
    assert saved > 0, f"seed {SEED}: no save finished in {KILLS} runs"
    # A new manager resumes from the latest and its saves collect every leftover.
    resumed, numbers = _run_child(directory, 2, None)
    assert numbers == [resumed + 1, resumed + 2]
    checkpoints = assert_root_consistent(directory, leftovers_allowed=False)
    assert [p.name for p in checkpoints] == [f"ckpt-{resumed + 1}", f"ckpt-{resumed + 2}"]
