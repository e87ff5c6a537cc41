"""A managed directory whose state file is lost or damaged is recovered, never restarted.

Without a usable ``checkpoint.json``, ``ocf.latest_checkpoint``, the manager
(``restore_or_initialize``) and ``ocf inspect`` find the newest committed
checkpoint by scanning (single files and directories; leftovers and damaged
files ignored) and say so with a RecoveryWarning; the manager never numbers a
checkpoint at or below one the directory holds [R-COMMIT-010]. The SIGKILL
test deletes or damages the state file between and during killed runs, and
checks that every run resumes from the newest committed checkpoint; its seed
is printed and OCF_MANAGER_SEED replays one.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from cli_support import run, run_json
from manager_support import (
    SEED,
    TESTS_DIR,
    ArrayCheckpoint,
    assert_holds,
    first_line,
    values_for,
)

import ocf
from ocf.objects.recovery import RecoveryWarning
from ocf.objects.state_file import STATE_FILE_NAME


def saved_run(directory: Path, last: int, keep: int = 3) -> ocf.Checkpoint:
    """A run of ocf.Checkpoint saves 1..last through a manager (keeping ``keep``)."""
    weights = ocf.Variable(np.zeros(8, np.float32))
    checkpoint = ocf.Checkpoint(weights=weights)
    with ocf.CheckpointManager(checkpoint, directory, max_to_keep=keep) as manager:
        for step in range(1, last + 1):
            weights.value[...] = step
            manager.save()
    return checkpoint


def files_of(directory: Path) -> dict[str, bytes]:
    """Every committed checkpoint file's bytes, by relative path."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != STATE_FILE_NAME}


def test_a_deleted_state_file_resumes_from_the_newest_and_never_overwrites(
        tmp_path: Path) -> None:
    saved_run(tmp_path, 8)  # keeps ckpt-6, ckpt-7, ckpt-8
    (tmp_path / STATE_FILE_NAME).unlink()
    before = files_of(tmp_path)
    with pytest.warns(RecoveryWarning) as said:
        assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-8")
    assert str(said[0].message) == (
        f"{tmp_path}: it has no state file (checkpoint.json); found 3 committed "
        "checkpoint(s) by scanning the directory; the newest is 'ckpt-8'")
    weights = ocf.Variable(np.zeros(8, np.float32))
    checkpoint = ocf.Checkpoint(weights=weights)
    with pytest.warns(RecoveryWarning, match="the newest is 'ckpt-8'"):
        manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-8")
    assert weights.value.tolist() == [8.0] * 8
    assert checkpoint.save_counter == 8
    paths = [manager.save() for _ in range(4)]
    manager.close()
    assert [os.path.basename(str(p)) for p in paths] == ["ckpt-9", "ckpt-10", "ckpt-11",
                                                         "ckpt-12"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.json", "ckpt-10", "ckpt-11", "ckpt-12"]
    assert not set(before) & set(files_of(tmp_path))  # old ones retired, none rewritten


def test_a_manager_that_did_not_restore_refuses_to_number_below_the_newest(
        tmp_path: Path) -> None:
    saved_run(tmp_path, 8)
    (tmp_path / STATE_FILE_NAME).unlink()
    before = files_of(tmp_path)
    with pytest.warns(RecoveryWarning):
        manager = ocf.CheckpointManager(ocf.Checkpoint(weights=ocf.Variable(np.ones(8))),
                                        tmp_path)
    with pytest.raises(ocf.InvalidError) as caught:
        manager.save()
    manager.close()
    assert str(caught.value) == (
        f"INVALID: {tmp_path}: the next checkpoint would be ckpt-1, but the directory holds "
        "ckpt-8: restore it first (restore_or_initialize()), or give "
        "save(checkpoint_number=...) a number above it [R-COMMIT-010]")
    assert files_of(tmp_path) == before
    assert not (tmp_path / STATE_FILE_NAME).exists()


@pytest.mark.parametrize("damage", [b"", b"{\"format\": ", b"\xff" * 100, b"[1, 2]"])
def test_a_damaged_state_file_is_recovered_the_same_way(tmp_path: Path, damage: bytes) -> None:
    saved_run(tmp_path, 5)
    (tmp_path / STATE_FILE_NAME).write_bytes(damage)
    checkpoint = ocf.Checkpoint(weights=ocf.Variable(np.zeros(8, np.float32)))
    with pytest.warns(RecoveryWarning, match="its state file is damaged and was not used"):
        manager = ocf.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-5")
    assert manager.save() == str(tmp_path / "ckpt-6")
    manager.close()
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-6")  # the state is whole


def test_scanning_finds_both_layouts_and_ignores_leftovers(tmp_path: Path) -> None:
    ocf.save_file(values_for(3), tmp_path / "ckpt-3", metadata={"save_counter": 3})
    ocf.save_file(values_for(4), tmp_path / "ckpt-4", layout="directory",
                  metadata={"save_counter": 4})
    ocf.save_file(values_for(5), tmp_path / "ckpt-5", metadata={"save_counter": 5})
    data = (tmp_path / "ckpt-5").read_bytes()
    (tmp_path / "ckpt-5").write_bytes(data[:-7])  # damaged: does not open
    (tmp_path / "ckpt-6").mkdir()  # a killed directory-form write: shards, no index
    (tmp_path / "ckpt-6" / "data-0123456789abcdef-00000.ocfd").write_bytes(b"\0" * 64)
    (tmp_path / ".ckpt-7.tmp-0123456789abcdef").write_bytes(b"partial")  # a temporary file
    (tmp_path / "notes-99.txt").write_text("not a checkpoint")
    with pytest.warns(RecoveryWarning, match="found 2 committed checkpoint.*'ckpt-4'"):
        latest = ocf.latest_checkpoint(tmp_path)
    assert latest == str(tmp_path / "ckpt-4")
    assert_holds(latest, 4)


def test_a_fresh_directory_says_nothing(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ocf.latest_checkpoint(tmp_path) is None
        manager = ocf.CheckpointManager(ArrayCheckpoint(values_for(1)), tmp_path)
        assert manager.restore_or_initialize() is None
        assert manager.save() == str(tmp_path / "ckpt-1")
        manager.close()


def test_inspect_lists_what_the_scan_found_and_says_how(tmp_path: Path) -> None:
    saved_run(tmp_path, 8)
    (tmp_path / STATE_FILE_NAME).unlink()
    done = run("inspect", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        f"managed directory: {tmp_path} (3 checkpoints)",
        f"warning: {tmp_path}: it has no state file (checkpoint.json); found 3 committed "
        "checkpoint(s) by scanning the directory; the newest is 'ckpt-8'"]
    assert [line.split()[0] for line in lines[3:6]] == ["ckpt-6", "ckpt-7", "ckpt-8"]
    assert lines[5].split()[-1] == "latest"
    assert f"checkpoint: {tmp_path / 'ckpt-8'}" in done.stdout
    document = run_json("inspect", str(tmp_path))  # checked against the schema
    assert document["path"] == str(tmp_path / "ckpt-8")
    assert "the newest is 'ckpt-8'" in document["managed"]["recovered"]
    verified = run("verify", str(tmp_path))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith(f"OK: {tmp_path / 'ckpt-8'}: ")
    assert "found 3 committed checkpoint(s)" in verified.stderr


# -- SIGKILL, with the state file deleted or damaged at random moments ----------------

KILLS = 10
BIG = 1 << 18  # float32 elements per checkpoint: 1 MiB

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import ocf
    from manager_support import ArrayCheckpoint, values_for

    directory, size = sys.argv[2], int(sys.argv[3])
    checkpoint = ArrayCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, directory, max_to_keep=2)
    manager.restore_or_initialize()
    print("ready", checkpoint.save_counter, flush=True)
    while True:
        number = checkpoint.save_counter + 1
        checkpoint.arrays = values_for(number, size)
        assert manager.save() == f"{directory}/ckpt-{number}"
        print("saved", number, flush=True)
""")


def _damage(directory: Path, rng: random.Random) -> str:
    """Delete or damage the state file, or leave it; what was done."""
    state = directory / STATE_FILE_NAME
    how = rng.choice(["keep", "delete", "truncate", "garbage"])
    try:
        if how == "delete":
            state.unlink()
        elif how == "truncate":
            state.write_bytes(state.read_bytes()[: rng.randrange(1, 40)])
        elif how == "garbage":
            state.write_bytes(rng.randbytes(64))
    except FileNotFoundError:
        pass  # no save has recorded anything yet
    return how


def _committed_numbers(directory: Path) -> list[int]:
    """The numbers of the checkpoints that open, each checked to hold its values."""
    numbers = []
    for entry in directory.iterdir():
        match = re.fullmatch(r"ckpt-(\d+)", entry.name)
        if match is None:
            continue
        try:
            ocf.open(entry).close()
        except ocf.OCFError:
            continue
        assert_holds(str(entry), int(match[1]), BIG)
        numbers.append(int(match[1]))
    return sorted(numbers)


def _usable_state_latest(directory: Path) -> int | None:
    """The number the state file names as latest, if the file is whole."""
    try:
        state = ocf.objects.state_file.read_state(directory)
    except ocf.OCFError:
        return None
    return None if state is None else int(state.latest.removeprefix("ckpt-"))


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_with_a_lost_or_damaged_state_file_always_resumes_from_the_newest(
        tmp_path: Path) -> None:
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}-lost-state")
    directory = tmp_path / "run"
    directory.mkdir()
    expected = 0
    for kill in range(KILLS):
        context = f"seed {SEED}, kill {kill}"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(TESTS_DIR), str(directory), str(BIG)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            ready = first_line(child.stdout).split()
            assert ready[:1] == ["ready"], child.communicate()[1]
            assert int(ready[1]) == expected, \
                f"{context}: resumed from {ready[1]}, not {expected}"
            time.sleep(rng.uniform(0.0, 0.25))
            during = _damage(directory, rng)  # while it saves
            time.sleep(rng.uniform(0.0, 0.25))
            child.send_signal(signal.SIGKILL)
            out, _ = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        saved = [int(m[1]) for line in out.splitlines()
                 if (m := re.fullmatch(r"saved (\d+)", line))]
        assert saved == list(range(expected + 1, expected + 1 + len(saved))), context
        after = _damage(directory, rng)  # after the kill
        committed = _committed_numbers(directory)
        assert not saved or max(saved) in committed, f"{context}: lost save {max(saved)}"
        named = _usable_state_latest(directory)
        # The state file decides when whole (a committed but unrecorded newer checkpoint
        # is a killed save, replaced by the next); else the newest committed one.
        newest = named if named is not None and named in committed else \
            (committed[-1] if committed else 0)
        assert newest >= max(saved, default=0), f"{context} ({during}, {after})"
        assert newest >= expected, f"{context}: went back from {expected} to {newest}"
        expected = newest
    assert expected > 0, f"seed {SEED}: no save finished in {KILLS} runs"
    assert _resumed_from(directory) == expected


def _resumed_from(directory: Path) -> int:
    """The number a new run restores, killed once it said."""
    with subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS_DIR), str(directory),
                           str(BIG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as child:
        assert child.stdout is not None
        ready = first_line(child.stdout).split()
        child.kill()
        child.communicate()
    assert ready[:1] == ["ready"]
    return int(ready[1])
