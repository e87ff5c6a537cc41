"""The commit protocol of spec/commit.md: publish a checkpoint atomically.

Nothing is written under a name a reader would open until it is complete
and on disk: files are written under temporary names (a leading "." and
".ocf-tmp-"), fsynced, and renamed; the directory is fsynced after the
rename so the new name survives a power cut [R-COMMIT-001] [R-COMMIT-002].
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TEMP_MARKER = ".ocf-tmp-"


def new_write_id() -> str:
    """16 random hex digits naming one write's temporary files and shards."""
    return secrets.token_hex(8)


def temp_path(target: Path, write_id: str) -> Path:
    """The temporary name, beside ``target``, under which it is written."""
    return target.with_name(f".{target.name}{TEMP_MARKER}{write_id}")


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TEMP_MARKER in name


def fsync_dir(directory: Path) -> None:
    """Make a rename or creation in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(temp: Path, target: Path) -> None:
    """Atomically give the complete, fsynced file ``temp`` the name ``target``."""
    os.replace(temp, target)
    fsync_dir(target.parent)


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
