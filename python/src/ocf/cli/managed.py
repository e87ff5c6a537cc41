"""Directories of managed checkpoints on the command line.

A directory without ``index.ocf`` that holds a manager's ``checkpoint.json``
or numbered checkpoints (``ckpt-7``) is a run's checkpoint directory:
``ocf inspect DIR`` lists its checkpoints (sizes, dates, the latest marked)
before inspecting the latest, and every other command acts on the latest.
The state file is read as the manager reads it, as hostile input; without
a usable one the committed checkpoints are found by scanning the directory
(ocf.objects.recovery), and the listing says so.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import NotFoundError
from ocf.interop.text import format_size, format_table
from ocf.objects.recovery import RecoveryWarning, scan
from ocf.objects.state_file import (
    STATE_FILE_NAME,
    CheckpointState,
    first_intact,
    recovered_state,
)


def is_managed_directory(path: str | os.PathLike[str]) -> bool:
    """A directory (not a checkpoint) with a manager's state file, or with committed
    numbered checkpoints (a TensorFlow directory's ``ckpt-1.data-00000-of-00001`` is
    numbered, but not an OCF checkpoint)."""
    where = Path(path)
    if not where.is_dir() or (where / INDEX_FILE_NAME).exists():
        return False
    return (where / STATE_FILE_NAME).exists() or scan(str(where)).newest is not None


def _state(directory: str) -> tuple[CheckpointState, str | None]:
    """The directory's state, and what recovering it said (None: the state file
    was used as it is); NOT_FOUND when no committed checkpoint is found."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", RecoveryWarning)
        state = recovered_state(directory, None, None, time.time())
    recovered = next((str(w.message) for w in said if issubclass(w.category, RecoveryWarning)),
                     None)
    if state is None or first_intact(directory, state, None) is None:
        raise NotFoundError(recovered or f"the {STATE_FILE_NAME} of this directory names no "
                            "checkpoint that opens", path=directory)
    return state, recovered


def latest_of(directory: str | os.PathLike[str]) -> str:
    """The latest committed checkpoint of a managed directory; NOT_FOUND if none;
    a recovery by scanning is announced on stderr."""
    state, recovered = _state(os.fspath(directory))
    if recovered is not None:
        print(f"warning: {recovered}", file=sys.stderr)
    return _latest_path(os.fspath(directory), state)


def _latest_path(directory: str, state: CheckpointState) -> str:
    latest = first_intact(directory, state, None)
    assert latest is not None  # checked by _state
    return str(Path(directory) / latest)


def resolved(path: str) -> str:
    """``path``, or the latest checkpoint when it is a managed directory."""
    return latest_of(path) if is_managed_directory(path) else path


def listing(directory: str) -> dict[str, Any]:
    """The managed checkpoints of ``directory``, as ``inspect --json`` reports them
    (``recovered`` says how they were found when the state file was not used)."""
    state, recovered = _state(directory)
    latest = _latest_path(directory, state)
    checkpoints = []
    for name, timestamp in zip(state.names, state.timestamps):
        if recovered is not None:  # a scan knows no save times: the file's
            timestamp = _modified(Path(directory) / name, timestamp)
        when = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
        checkpoints.append({"name": name, "saved": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "size_bytes": _size(Path(directory) / name),
                            "latest": Path(latest).name == name})
    found: dict[str, Any] = {"directory": directory, "latest": latest,
                             "checkpoints": checkpoints}
    if recovered is not None:
        found["recovered"] = recovered
    return found


def _modified(path: Path, default: float) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return default


def print_listing(found: dict[str, Any]) -> None:
    """Print a :func:`listing`."""
    rows = [("CHECKPOINT", "SAVED (UTC)", "SIZE", "")]
    for entry in found["checkpoints"]:
        size = entry["size_bytes"]
        rows.append((entry["name"], entry["saved"].replace("T", " ").rstrip("Z"),
                     "missing" if size is None else format_size(size),
                     "latest" if entry["latest"] else ""))
    print(f"managed directory: {found['directory']} ({len(found['checkpoints'])} checkpoints)")
    if "recovered" in found:
        print(f"warning: {found['recovered']}")
    print(format_table(rows))
    print()


def _size(path: Path) -> int | None:
    try:
        files = [path] if path.is_file() else [p for p in path.iterdir() if p.is_file()]
        return sum(p.stat().st_size for p in files)
    except OSError:
        return None
