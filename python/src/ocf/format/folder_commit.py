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

Replacing a folder deletes everything in it, so a folder is replaced only if
it holds nothing but what the writer writes (``own_entries``), and never the
working directory, a folder holding it, or a mount point; these are INVALID
before anything is written.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import sys
from pathlib import Path

from ocf.format.commit import TEMP_MARKER, fsync_dir, new_write_id, temp_names_of, temp_path
from ocf.format.errors import InvalidError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)
_PREVIOUS_SUFFIX = ".previous"
_FOREIGN_SHOWN = 10  # entries named in a refusal


class StagedFolder:
    """A folder written under a temporary sibling and published at ``target`` whole.

    ``write_id`` lets several processes write into the same staging folder
    (one of them draws it and shares it); each write has a new one.
    ``own_entries`` is a regular expression of the names the writer writes in
    the folder: an existing folder at ``target`` holding any other entry is
    refused, not replaced. None: the folder is the writer's alone (a
    ``checkpoint-N`` its program names and rotates).

    Examples:
        >>> staged = StagedFolder(Path("out/checkpoint-8"))
        >>> staged.create()
        >>> (staged.folder / "model.ocf").write_bytes(data)
        >>> staged.commit()
    """

    def __init__(self, target: str | os.PathLike[str], write_id: str | None = None, *,
                 own_entries: str | None = None) -> None:
        if os.path.basename(os.path.normpath(os.fspath(target))) in (".", ".."):
            raise InvalidError("a checkpoint folder is written here and replaced whole; this "
                               "path names a folder by '.' or '..', not by a name of its own: "
                               "save into a named folder", path=os.fspath(target))
        self.target = Path(os.path.abspath(target))
        self._own_entries = None if own_entries is None else re.compile(own_entries)
        self.staging = temp_path(self.target, write_id or new_write_id())
        self.folder = self.staging / self.target.name  # where the files are written

    def create(self) -> None:
        """Make the (empty) staging folder, and the target's parent if it is missing.

        A target that could not be replaced without deleting what is not the
        writer's is INVALID (:meth:`check_replaceable`), before anything is written.
        """
        self.check_replaceable()
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
        if replace and os.path.lexists(self.target):
            self.check_replaceable()  # again: the folder may have changed during the write
            if not _exchange(self.folder, self.target):
                os.rename(self.target, self.staging / (self.target.name + _PREVIOUS_SUFFIX))
                fsync_dir(self.staging)
                os.rename(self.folder, self.target)
        else:
            os.rename(self.folder, self.target)
        fsync_dir(self.target.parent)
        shutil.rmtree(self.staging)

    def check_replaceable(self) -> None:
        """INVALID, naming the path, if replacing the target would delete what is not
        the writer's: a file or symbolic link there, a folder holding entries other than
        ``own_entries``, the working directory or a folder holding it, a mount point."""
        try:
            mode = os.lstat(self.target).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            raise InvalidError("a checkpoint folder is written here, and this path exists "
                               "and is not a folder", path=self.target)
        if os.path.ismount(self.target):
            raise InvalidError("a checkpoint folder is replaced by renaming, and this path is "
                               "a mount point: save into a folder inside it", path=self.target)
        working, target = Path(os.path.realpath(os.getcwd())), Path(os.path.realpath(self.target))
        if working == target or target in working.parents:  # even through a linked parent
            raise InvalidError("a checkpoint folder is replaced whole, and this one is or "
                               "holds the working directory: save into a folder inside it",
                               path=self.target)
        if self._own_entries is not None:
            foreign = sorted(name for name in os.listdir(self.target)
                             if not self._own_entries.fullmatch(name))
            if foreign:
                shown = ", ".join(foreign[:_FOREIGN_SHOWN]) + (
                    f" and {len(foreign) - _FOREIGN_SHOWN} more"
                    if len(foreign) > _FOREIGN_SHOWN else "")
                raise InvalidError("a checkpoint folder is replaced whole, and this one holds "
                                   f"entries the save does not write ({shown}): save into a new "
                                   "or empty folder, or move them away", path=self.target)

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
        name = entry.name[1:entry.name.rindex(TEMP_MARKER)]  # the name may hold the marker
        previous = entry / (name + _PREVIOUS_SUFFIX)
        if previous.is_dir() and not os.path.lexists(directory / name):
            os.rename(previous, directory / name)
            fsync_dir(directory)
        shutil.rmtree(entry)


def folder_names(prefix: str) -> str:
    """The regular expression of ``<prefix>-<n>`` folder names, for :func:`remove_leftovers`."""
    return rf"{re.escape(prefix)}-[0-9]+"


def _sync_tree(folder: Path) -> None:
    """fsync every regular file and directory under ``folder``. Nothing else is opened:
    a symbolic link is not followed, and a FIFO or device would block or act on open."""
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name),
                             os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a symbolic link
                    continue
                raise
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
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
