"""The manager's state file (checkpoint.json, ocf.objects.state_file) as hostile
input: every damage raises the right OCFError naming the file, the size limit holds
for reading and writing, and a non-file never blocks.

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
from manager_support import (
    GOOD,
    ArrayCheckpoint,
    state_with,
    values_for,
)

import ocf
from ocf.objects.recovery import RecoveryWarning
from ocf.objects.state_file import (
    STATE_FILE_NAME,
    CheckpointState,
    read_state,
    write_state,
)

# -- hostile state files ---------------------------------------------------------

HOSTILE: dict[str, tuple[bytes, type[ocf.OCFError]]] = {
    "truncated": (state_with()[:-7], ocf.MalformedError),
    "empty": (b"", ocf.MalformedError),
    "not_utf8": (state_with(latest="\u00e9").replace(b"\\u00e9", b"\xe9"), ocf.MalformedError),
    "nan": (state_with().replace(b"0.0", b"NaN"), ocf.MalformedError),
    "deep": (b"[" * 200_000 + b"]" * 200_000, ocf.MalformedError),
    "huge_integer": (state_with().replace(b"0.0", b"9" * 5000), ocf.MalformedError),
    "duplicate_key": (state_with()[:-1] + b', "latest": "ckpt-1"}', ocf.MalformedError),
    "huge": (state_with()[:-1] + b"," + b" " * (1 << 20) + b"}", ocf.LimitExceededError),
    "list": (b"[1, 2]", ocf.InvalidError),
    "format": (state_with(format="tf-checkpoint"), ocf.InvalidError),
    "version_str": (state_with(version="1"), ocf.InvalidError),
    "version_2": (state_with(version=2), ocf.UnsupportedVersionError),
    "latest_int": (state_with(latest=3), ocf.InvalidError),
    "latest_missing": (json.dumps({k: v for k, v in GOOD.items() if k != "latest"}).encode(),
                       ocf.InvalidError),
    "all_str": (state_with(all="ckpt-1"), ocf.InvalidError),
    "all_int": (state_with(all=[1]), ocf.InvalidError),
    "parent": (state_with(all=["../x"]), ocf.InvalidError),
    "parent_latest": (state_with(latest="../x"), ocf.InvalidError),
    "dotdot": (state_with(all=[".."]), ocf.InvalidError),
    "dot": (state_with(all=["."]), ocf.InvalidError),
    "absolute": (state_with(latest="/etc/passwd"), ocf.InvalidError),
    "subdirectory": (state_with(all=["sub/ckpt-1"]), ocf.InvalidError),
    "backslash": (state_with(all=["..\\x"]), ocf.InvalidError),
    "nul": (state_with(all=["ckpt\u00001"]), ocf.InvalidError),
    "empty_name": (state_with(latest=""), ocf.InvalidError),
    "twice": (state_with(all=["ckpt-1", "ckpt-1"], timestamps=[1.0, 2.0]), ocf.InvalidError),
    "timestamps_short": (state_with(timestamps=[]), ocf.InvalidError),
    "timestamp_str": (state_with(timestamps=["1"]), ocf.InvalidError),
    "timestamp_bool": (state_with(timestamps=[True]), ocf.InvalidError),
    "timestamp_inf": (state_with(timestamps=[1.5]).replace(b"1.5", b"1e999"), ocf.InvalidError),
    "preserved_none": (state_with(last_preserved_timestamp=None), ocf.InvalidError),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_state_files_raise_the_right_error(tmp_path: Path, case: str) -> None:
    data, error = HOSTILE[case]
    ocf.save_file(values_for(1), tmp_path / "ckpt-1", metadata={"save_counter": 1})
    (tmp_path / STATE_FILE_NAME).write_bytes(data)
    with pytest.raises(error, match=re.escape(str(tmp_path / STATE_FILE_NAME))) as caught:
        read_state(tmp_path)
    assert type(caught.value) is error


@pytest.mark.parametrize("case", sorted(set(HOSTILE) - {"version_2"}))
def test_a_damaged_state_file_is_bypassed_by_scanning_with_a_warning(
        tmp_path: Path, case: str) -> None:
    data, error = HOSTILE[case]
    ocf.save_file(values_for(1), tmp_path / "ckpt-1", metadata={"save_counter": 1})
    (tmp_path / STATE_FILE_NAME).write_bytes(data)
    damaged = re.escape(f"{tmp_path}: its state file is damaged and was not used "
                        f"({error.category.value}:")
    with pytest.warns(RecoveryWarning, match=damaged):
        assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")
    with pytest.warns(RecoveryWarning, match="the newest is 'ckpt-1'"):
        manager = ocf.CheckpointManager(ArrayCheckpoint(), tmp_path)
    assert manager.latest_checkpoint == str(tmp_path / "ckpt-1")


def test_a_state_file_of_a_newer_version_is_not_bypassed(tmp_path: Path) -> None:
    ocf.save_file(values_for(1), tmp_path / "ckpt-1", metadata={"save_counter": 1})
    (tmp_path / STATE_FILE_NAME).write_bytes(state_with(version=2))
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.latest_checkpoint(tmp_path)
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.CheckpointManager(ArrayCheckpoint(), tmp_path)


def test_the_good_state_of_the_hostile_cases_is_accepted(tmp_path: Path) -> None:
    ocf.save_file(values_for(1), tmp_path / "ckpt-1", metadata={"save_counter": 1})
    (tmp_path / STATE_FILE_NAME).write_bytes(state_with())
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")


def test_a_state_file_above_the_limit_is_never_written(tmp_path: Path) -> None:
    many = tuple(f"ckpt-{n}" for n in range(60_000))
    state = CheckpointState(many[-1], many, tuple(range(60_000)), 0.0)
    with pytest.raises(ocf.LimitExceededError):
        write_state(tmp_path, state)
    assert list(tmp_path.iterdir()) == []
    write_state(tmp_path, CheckpointState(many[-1], many[:100], tuple(range(100)), 0.0))
    assert read_state(tmp_path) == CheckpointState(
        many[-1], many[:100], tuple(float(t) for t in range(100)), 0.0)


def test_a_state_file_that_is_not_a_regular_file_is_refused_and_scanned_past(
        tmp_path: Path) -> None:
    (tmp_path / STATE_FILE_NAME).mkdir()
    with pytest.raises(ocf.InvalidError, match="directory"):
        read_state(tmp_path)
    ocf.save_file(values_for(3), tmp_path / "ckpt-3", metadata={"save_counter": 3})
    with pytest.warns(RecoveryWarning, match="found a directory.*the newest is 'ckpt-3'"):
        assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-3")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_state_file_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / STATE_FILE_NAME)
    result: list[BaseException | str | None] = []

    def look() -> None:
        try:
            result.append(read_state(tmp_path))  # type: ignore[arg-type]
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(5)
    assert result, "read_state hung on a FIFO"
    assert isinstance(result[0], ocf.InvalidError)
    with pytest.warns(RecoveryWarning, match="damaged"):
        assert ocf.latest_checkpoint(tmp_path) is None


@pytest.mark.parametrize("metrics", ['[{"loss": "low"}]', '[{"loss": 1}, null]', '{"loss": 1}',
                                     '[[1]]'])
def test_a_state_file_with_bad_metrics_is_invalid(tmp_path: Path, metrics: str) -> None:
    (tmp_path / STATE_FILE_NAME).write_text(
        '{"format": "ocf-checkpoint-state", "version": 1, "latest": "ckpt-1", '
        '"all": ["ckpt-1"], "timestamps": [1.0], "last_preserved_timestamp": 0.0, '
        f'"metrics": {metrics}}}')
    with pytest.raises(ocf.InvalidError, match=rf"{STATE_FILE_NAME}: .*(metric|list)"):
        read_state(tmp_path)
