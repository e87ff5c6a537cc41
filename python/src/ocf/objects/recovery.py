"""Recovering a managed checkpoint directory whose state file is gone or damaged.

A :class:`ocf.CheckpointManager` records its checkpoints in
``checkpoint.json``; losing that file (deleted by hand, a damaged copy, a
sync tool) must not restart training from scratch and then overwrite the
run's newer checkpoints (spec/commit.md, [R-COMMIT-010]). So without a
usable state file, :func:`ocf.latest_checkpoint`, the manager and
``ocf inspect`` scan the directory instead:

- a candidate is an entry named ``<name>-<number>`` (the manager's own
  names; any name when the caller does not know it), a single file or a
  directory of the multi-file form;
- a candidate counts only if it is committed: it opens, which checks its
  footer, its index (CRC-32C, structure) and every shard's presence and
  length, without reading tensor bytes; temporary names of a killed write,
  shards without an index and damaged files are ignored;
- the newest is the one with the highest number (ties: the greater name).

Whatever it finds is announced with a :class:`RecoveryWarning` naming the
directory, the checkpoint and why the state file was not used. A state
file of an unsupported version is not bypassed (a newer writer's state is
not ours to replace): that error stands.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from ocf.format.errors import InvalidError, OCFError, UnsupportedVersionError
from ocf.format.reader import Reader
from ocf.format.storage.backend import backend_of
from ocf.format.storage.location import (
    Location,
    ObjectPath,
    StorageOptions,
    join_path,
    locate,
)

# Any manager's numbered name: the prefix, a dash, the number.
_NUMBERED = re.compile(r"(?P<name>[^/]+)-(?P<number>[0-9]{1,18})")


class RecoveryWarning(UserWarning):
    """A checkpoint directory was read without its state file (missing or damaged):
    the checkpoints named in the message were found by scanning the directory."""


@dataclass(frozen=True)
class Found:
    """The committed checkpoints of a directory found by scanning, oldest first."""

    names: tuple[str, ...]

    @property
    def newest(self) -> str | None:
        return self.names[-1] if self.names else None


def number_of(name: str, checkpoint_name: str | None = None) -> int | None:
    """The number of a checkpoint named ``<checkpoint_name>-<number>`` (any prefix when
    ``checkpoint_name`` is None); None for any other name."""
    match = _NUMBERED.fullmatch(name)
    if match is None or (checkpoint_name is not None and match["name"] != checkpoint_name):
        return None
    return int(match["number"])


def refuse_number_below(names: Iterable[str], checkpoint_name: str, upcoming: int,
                        directory: str) -> None:
    """INVALID when a manager numbering by the checkpoint's counter would write
    ``<checkpoint_name>-<upcoming>`` at or below one of ``names`` (the checkpoints the
    directory holds): a run restarted without restoring would overwrite its own newer
    checkpoints [R-COMMIT-010]."""
    numbers = [n for name in names if (n := number_of(name, checkpoint_name)) is not None]
    if numbers and upcoming <= max(numbers):
        raise InvalidError(
            f"the next checkpoint would be {checkpoint_name}-{upcoming}, but the directory "
            f"holds {checkpoint_name}-{max(numbers)}: restore it first "
            "(restore_or_initialize()), or give save(checkpoint_number=...) a number "
            "above it [R-COMMIT-010]", path=directory)


def is_committed(path: str, storage_options: StorageOptions | None = None) -> bool:
    """True if ``path`` is a committed checkpoint that opens.

    Opening reads and checks only the footer and the index (CRC-32C and
    structure) and checks every shard's presence and length; tensor bytes
    are not read, so this costs about the index's size, not the model's.
    """
    try:
        Reader(path, storage_options=storage_options).close()
    except (OCFError, OSError):
        return False
    return True


def scan(directory: str, checkpoint_name: str | None = None,
         storage_options: StorageOptions | None = None) -> Found:
    """The committed numbered checkpoints directly inside ``directory``, oldest first."""
    where = locate(directory, storage_options)
    numbered = [(number, name) for name in _entry_names(where)
                if (number := number_of(name, checkpoint_name)) is not None]
    committed = [name for _, name in sorted(numbered)
                 if is_committed(join_path(directory, name), storage_options)]
    return Found(tuple(committed))


def _entry_names(where: Location) -> set[str]:
    """The names directly inside ``where``: files and directories, objects and, on an
    object store, the prefixes a checkpoint of the multi-file form is made of."""
    names = set(backend_of(where).list_names(where))
    if isinstance(where, ObjectPath):
        try:
            entries = where.fs.ls(where.key, detail=True, refresh=True)
        except FileNotFoundError:
            return names
        names |= {str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries
                  if e.get("type") == "directory"}
    return names


def usable_state_error(error: OCFError) -> bool:
    """Whether a state file refused with ``error`` may be bypassed by scanning: damage
    yes; a state file of a newer version, no."""
    return not isinstance(error, UnsupportedVersionError)


def announce(directory: str, found: Found, why: str) -> None:
    """Warn that ``directory`` was recovered by scanning, saying what was found."""
    if found.newest is None:
        what = "found no committed checkpoint"
    else:
        what = (f"found {len(found.names)} committed checkpoint(s) by scanning the directory; "
                f"the newest is {found.newest!r}")
    warnings.warn(RecoveryWarning(f"{directory}: {why}; {what}"), stacklevel=3)
