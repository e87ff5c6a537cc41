"""Publish a folder of files as a whole: the previous folder or the new one, never half.

Frameworks' checkpoint folders (a Transformers ``checkpoint-N``, an
Accelerate state folder) hold several files that only make sense together,
and the programs reading them take the folder's name as the sign that it is
complete. A :class:`StagedFolder` is written under a temporary sibling
``.<name>.ocf-tmp-<writeid>/<name>`` (the folder under its own final name
inside a hidden directory, so a framework writing into it sees the name it
expects); :meth:`StagedFolder.commit` fsyncs every file and directory in it,
then moves it to ``<name>`` in one rename and fsyncs the parent, as the
commit protocol publishes an index file (spec/commit.md).

A folder that already exists is replaced by exchanging the two names in one
``renameat2(RENAME_EXCHANGE)`` where the system has it (Linux), so a reader
finds the old folder or the new one, whole, at every moment. Elsewhere the
old folder is first moved into the hidden directory as
``<name>.previous`` and the new one renamed into place; a crash between the
two renames leaves no folder at the name, and :func:`remove_leftovers`, run
before the next write, moves the old one back. Either way the old folder is
deleted only after the new one has its name.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import sys
from pathlib import Path

from ocf.format.commit import TEMP_MARKER, fsync_dir, new_write_id, temp_names_of, temp_path
from ocf.format.errors import InvalidError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)
_PREVIOUS_SUFFIX = ".previous"


class StagedFolder:
    """A folder written under a temporary sibling and published at ``target`` whole.

    ``write_id`` lets several processes write into the same staging folder
    (one of them draws it and shares it); each write has a new one.

    Examples:
        >>> staged = StagedFolder(Path("out/checkpoint-8"))
        >>> staged.create()
        >>> (staged.folder / "model.ocf").write_bytes(data)
        >>> staged.commit()
    """

    def __init__(self, target: str | os.PathLike[str], write_id: str | None = None) -> None:
        self.target = Path(os.path.abspath(target))  # a name of its own, even for "." or ".."
        self.staging = temp_path(self.target, write_id or new_write_id())
        self.folder = self.staging / self.target.name  # where the files are written

    def create(self) -> None:
        """Make the (empty) staging folder, and the target's parent if it is missing.

        A target that exists and is not a folder (a file, a symbolic link) is
        INVALID: replacing it would delete what is there, or where it points.
        """
        if os.path.lexists(self.target) and (self.target.is_symlink()
                                             or not self.target.is_dir()):
            raise InvalidError("a checkpoint folder is written here, and this path exists "
                               "and is not a folder", path=self.target)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir()
        self.folder.mkdir()

    def commit(self, *, replace: bool = True) -> None:
        """Make every file durable, then give the folder its name and delete the old one.

        With ``replace=False`` a folder that appeared at the target meanwhile is
        kept: the rename fails (OSError) unless it is empty.
        """
        _sync_tree(self.folder)
        fsync_dir(self.staging)
        if not replace or not self.target.exists():
            os.rename(self.folder, self.target)
        elif not _exchange(self.folder, self.target):
            os.rename(self.target, self.staging / (self.target.name + _PREVIOUS_SUFFIX))
            fsync_dir(self.staging)
            os.rename(self.folder, self.target)
        fsync_dir(self.target.parent)
        shutil.rmtree(self.staging)

    def discard(self) -> None:
        """Delete the staging folder of a write that failed; the target is untouched."""
        shutil.rmtree(self.staging, ignore_errors=True)


def remove_leftovers(parent: str | os.PathLike[str], final_names: str) -> None:
    """Delete the staging folders that crashed writes left in ``parent``.

    ``final_names`` is a regular expression of the folder names whose
    leftovers these are. A folder moved aside by a replacement that crashed
    before the new one had its name is moved back first. Only one writer may
    write these folders at a time (as for a checkpoint path, spec/commit.md).
    """
    directory = Path(parent)
    if not directory.is_dir():
        return
    pattern = temp_names_of(final_names)
    for entry in sorted(directory.iterdir()):
        if not (pattern.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink()):
            continue
        name = entry.name[1:entry.name.index(TEMP_MARKER)]
        previous = entry / (name + _PREVIOUS_SUFFIX)
        if previous.is_dir() and not os.path.lexists(directory / name):
            os.rename(previous, directory / name)
            fsync_dir(directory)
        shutil.rmtree(entry)


def folder_names(prefix: str) -> str:
    """The regular expression of ``<prefix>-<n>`` folder names, for :func:`remove_leftovers`."""
    return rf"{re.escape(prefix)}-[0-9]+"


def _sync_tree(folder: Path) -> None:
    """fsync every regular file and directory under ``folder`` (symlinks are not followed)."""
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(root))


def _exchange(first: Path, second: Path) -> bool:
    """Swap the two names atomically; False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                 _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))
