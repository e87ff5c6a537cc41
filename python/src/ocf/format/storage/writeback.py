"""Starting the writeback of a file's dirty pages early, without dropping them.

A save of gigabytes would otherwise leave every byte dirty until the final
fsync, which then waits for all of it. Starting writeback every few tens of
MiB overlaps the disk with the rest of the save. Linux's
``sync_file_range(SYNC_FILE_RANGE_WRITE)`` does exactly that and nothing
more: the pages stay in the page cache, so a restore right after a save
reads memory, not the disk. (``posix_fadvise(POSIX_FADV_DONTNEED)``, used
before, also starts writeback but drops the pages already written back,
which sent the next read of the checkpoint to the disk.) Where the call is
missing, nothing is done early and the final fsync does it all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

# From <linux/fs.h>: start writeback of the dirty pages of the range, do not wait.
_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_START = _sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing ``length`` bytes of ``fd`` from ``offset`` to disk,
    without waiting and keeping them cached. Advisory: a failure is ignored, since
    the fsync that makes the file durable comes later in every case."""
    if _START is not None and length > 0:
        _START(fd, offset, length, _SYNC_FILE_RANGE_WRITE)
