"""The commit protocol of spec/commit.md: publish a checkpoint atomically.

Nothing is written under a name a reader would open until it is complete
and on disk: files are written under temporary names (a leading "." and
".ocf-tmp-"), fsynced, and renamed; the directory is fsynced after the
rename so the new name survives a power cut [R-COMMIT-001] [R-COMMIT-002].
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Container, Iterable
from pathlib import Path

TEMP_MARKER = ".ocf-tmp-"
# The name of shard <nnnnn> of write <writeid> [R-COMMIT-002] step 3; the shards of a
# part must be named so (spec/parts.md, [R-PART-001]).
SHARD_NAME = re.compile(r"data-[0-9a-f]{16}-[0-9]{5}\.ocfd")


def new_write_id() -> str:
    """16 random hex digits naming one write's temporary files and shards."""
    return secrets.token_hex(8)


def temp_path(target: Path, write_id: str) -> Path:
    """The temporary name, beside ``target``, under which it is written."""
    return target.with_name(f".{target.name}{TEMP_MARKER}{write_id}")


def temp_names_of(final_names: str) -> re.Pattern[str]:
    """The names :func:`temp_path` gives, with a write id of :func:`new_write_id`, to
    files whose final names match the regular expression ``final_names``: what a
    cleanup may delete as its own leftovers [R-COMMIT-004]."""
    return re.compile(rf"\.(?:{final_names}){re.escape(TEMP_MARKER)}[0-9a-f]{{16}}")


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TEMP_MARKER in name


def shard_file_name(write_id: str, number: int) -> str:
    """The name of shard ``number`` of the write ``write_id`` [R-COMMIT-002] step 3."""
    return f"data-{write_id}-{number:05d}.ocfd"


def is_shard_file_name(name: str) -> bool:
    """Whether ``name`` is ``data-<writeid>-<nnnnn>.ocfd`` exactly."""
    return SHARD_NAME.fullmatch(name) is not None


def leftover_names(names: Iterable[str], referenced: Container[str], *,
                   also: Callable[[str], bool] | None = None) -> list[str]:
    """The names of ``names`` that cleanup after a commit deletes [R-COMMIT-004].

    A leftover is a shard file (``data-*.ocfd``) of a previous or crashed
    write, or a temporary file, and, when ``also`` is given, any name it
    accepts (a merge's part indexes, spec/parts.md [R-PART-007]). A name in
    ``referenced``, the shard names of the committed index, is never one,
    whatever it looks like. The one rule of every cleanup: the writer's in
    a directory, on an object store, and the merge's.
    """
    return [name for name in names if name not in referenced and (
        (name.startswith("data-") and name.endswith(".ocfd")) or is_temp_name(name)
        or (also is not None and also(name)))]


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
