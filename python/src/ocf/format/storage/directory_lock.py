"""One writer per local directory: an advisory lock that dies with its holder.

A :class:`ocf.CheckpointManager` takes the lock of its directory before its
first save and keeps it until ``close()`` (or until the process ends), so a
second manager (another process, or another manager in this one) saving
into the same directory is refused instead of interleaving checkpoints and
state files. The lock is ``flock(LOCK_EX)`` on the directory itself, so no
file is added to it; the kernel drops the lock when the holding process
exits in any way, SIGKILL included, so a killed trainer never leaves the
directory locked. The refusal names the holding process when the system
says which it is (Linux's ``/proc/locks``).

``flock`` is advisory and local: it does not stop writers that do not ask
for it, and on some network file systems it is not shared between hosts.
Object stores have no equivalent in fsspec; there no lock is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import weakref
from pathlib import Path

from ocf.format.errors import InvalidError

_LOCKS_TABLE = Path("/proc/locks")
_MAX_TABLE_BYTES = 1 << 20


class DirectoryLock:
    """A held lock; :meth:`release` (or the end of the process) gives it up."""

    def __init__(self, fd: int) -> None:
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        self._finalizer()

    @property
    def held(self) -> bool:
        return self._finalizer.alive


def lock_directory(directory: Path) -> DirectoryLock:
    """Take the writer lock of ``directory``; INVALID naming the holder if it is taken."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidError(f"cannot open the directory to lock it: {exc.strerror}",
                           path=directory) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise InvalidError(f"another CheckpointManager or incremental writer ({holder}) is "
                           "saving into this directory; one writer at a time (close() the "
                           "other manager, or save elsewhere)", path=directory) from None
    except BaseException:
        os.close(fd)
        raise
    return DirectoryLock(fd)


def _holder(fd: int) -> str:
    """'process N' holding the flock of ``fd``'s inode, from /proc/locks, if it says."""
    info = os.fstat(fd)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with contextlib.suppress(OSError):
        with _LOCKS_TABLE.open("rb") as table:
            text = table.read(_MAX_TABLE_BYTES).decode("ascii", "replace")
        for line in text.splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
                pid = fields[4]
                return f"process {pid}" + (" of this program" if pid == str(os.getpid()) else "")
    return "another process or manager"
