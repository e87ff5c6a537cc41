"""Directories of managed checkpoints on the command line.

A directory holding a manager's ``checkpoint.json`` and no ``index.ocf`` is
a run's checkpoint directory: ``ocf inspect DIR`` lists its checkpoints
(sizes, dates, the latest marked) before inspecting the latest, and every
other command acts on the latest. The state file is read as the manager
reads it, as hostile input.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import NotFoundError
from ocf.interop.text import format_size, format_table
from ocf.objects.state_file import STATE_FILE_NAME, latest_checkpoint, read_state


def is_managed_directory(path: str | os.PathLike[str]) -> bool:
    where = Path(path)
    return (where.is_dir() and (where / STATE_FILE_NAME).is_file()
            and not (where / INDEX_FILE_NAME).exists())


def latest_of(directory: str | os.PathLike[str]) -> str:
    """The latest checkpoint of a managed directory that opens; NOT_FOUND if none does."""
    latest = latest_checkpoint(directory)
    if latest is None:
        raise NotFoundError(f"the {STATE_FILE_NAME} of this directory names no checkpoint "
                            "that opens", path=directory)
    return latest


def resolved(path: str) -> str:
    """``path``, or the latest checkpoint when it is a managed directory."""
    return latest_of(path) if is_managed_directory(path) else path


def listing(directory: str) -> dict[str, Any]:
    """The managed checkpoints of ``directory``, as ``inspect --json`` reports them."""
    state = read_state(directory)
    assert state is not None  # is_managed_directory saw the file
    latest = latest_of(directory)
    checkpoints = []
    for name, timestamp in zip(state.names, state.timestamps):
        when = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
        checkpoints.append({"name": name, "saved": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "size_bytes": _size(Path(directory) / name),
                            "latest": Path(latest).name == name})
    return {"directory": directory, "latest": latest, "checkpoints": checkpoints}


def print_listing(found: dict[str, Any]) -> None:
    """Print a :func:`listing`."""
    rows = [("CHECKPOINT", "SAVED (UTC)", "SIZE", "")]
    for entry in found["checkpoints"]:
        size = entry["size_bytes"]
        rows.append((entry["name"], entry["saved"].replace("T", " ").rstrip("Z"),
                     "missing" if size is None else format_size(size),
                     "latest" if entry["latest"] else ""))
    print(f"managed directory: {found['directory']} ({len(found['checkpoints'])} checkpoints)")
    print(format_table(rows))
    print()


def _size(path: Path) -> int | None:
    try:
        files = [path] if path.is_file() else [p for p in path.iterdir() if p.is_file()]
        return sum(p.stat().st_size for p in files)
    except OSError:
        return None
