"""What the converters share: safe output, warnings, and errors that name the source.

A foreign-format file is written under a temporary name in the destination's
directory, flushed to disk, then renamed over the destination in one step,
as OCF's own single-file commit does (spec/commit.md), so a crash never
leaves half of it at its path. A source file is opened without blocking on
a FIFO, and an OCF error raised while converting it (by :class:`ocf.Writer`,
say) is made to name it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ocf.errors import NotFoundError, OCFError


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only if the block completes."""
    target = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                     dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def warn_dropped(what: str, names: Iterable[str], target_format: str) -> None:
    """Tell the user that parts of an OCF checkpoint have no place in the target format."""
    listed = sorted(names)
    if listed:
        warnings.warn(f"{target_format} cannot hold {what}; not written: "
                      f"{', '.join(repr(n) for n in listed)}", stacklevel=3)


def with_path(exc: OCFError, path: str | os.PathLike[str], key: str | None = None
              ) -> OCFError:
    """``exc`` naming the file (and tensor) being converted, unless it names a file."""
    if exc.path is not None:
        return exc
    return type(exc)(exc.detail, path=path, key=exc.key or key, requirement=exc.requirement)


def open_source(path: str) -> BinaryIO:
    """The regular file ``path`` open for reading; NotFoundError when there is none.

    O_NONBLOCK: a FIFO at ``path`` must not hang the converter. Other
    failures (permissions, I/O) are the environment's and propagate.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise NotFoundError(f"cannot open the file to convert: {exc.strerror}",
                            path=path) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise NotFoundError("the file to convert is a symbolic link loop", path=path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotFoundError("the file to convert is not a regular file", path=path)
    return os.fdopen(fd, "rb")
