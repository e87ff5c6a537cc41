"""Local files opened as a hostile reader must open them.

A path handed to a reader may name a FIFO (opening it blocks until a writer
appears), a device (``/dev/zero`` reads forever), a directory or a symbolic
link loop. :func:`open_regular` opens without blocking and refuses anything
but a regular file, so every reader of local files fails the same clear way.
"""

from __future__ import annotations

import errno
import os
import stat
from io import BufferedReader

from ocf.format.errors import NotFoundError


def open_regular(path: str | os.PathLike[str], what: str, *,
                 key: str | None = None) -> BufferedReader:
    """The regular file ``path`` open for binary reading.

    ``what`` names the file in messages ("TensorFlow data file"). NotFoundError
    when nothing is there, when it is a link loop, or when it is not a regular
    file. Other failures (permissions, I/O) are the environment's and propagate.
    """
    text = os.fspath(path)
    try:
        fd = os.open(text, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise NotFoundError(f"no {what}: {exc.strerror}", path=text, key=key) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise NotFoundError(f"the {what} is a symbolic link loop", path=text, key=key) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotFoundError(f"the {what} is not a regular file", path=text, key=key)
    # Reads of a regular file never block; clear O_NONBLOCK anyway for clarity.
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
