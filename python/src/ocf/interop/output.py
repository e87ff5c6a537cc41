"""What the converters share: safe output, warnings, and errors that name the source.

A foreign-format file is written through
:func:`ocf.format.storage.local.atomic_output`: under a temporary name in the
destination's directory, fsynced, renamed over the destination, and the
directory fsynced, as OCF's own single-file commit does (spec/commit.md), so
a crash never leaves half of it at its path. A source file is opened without blocking on
a FIFO, and an OCF error raised while converting it (by :class:`ocf.Writer`,
say) is made to name it. Converters report the bytes of each tensor they
have written to whoever listens (:func:`reporting_progress`: ``ocf convert``'s
progress bar).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from io import BufferedReader

from ocf.format.errors import OCFError
from ocf.format.storage.local import open_regular


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
    return exc.located(path, exc.key or key)


def open_source(path: str) -> BufferedReader:
    """The regular file ``path`` open for reading; NotFoundError when there is none."""
    return open_regular(path, "file to convert")


_PROGRESS: ContextVar[Callable[[int], object] | None] = ContextVar("ocf_convert_progress",
                                                                  default=None)


@contextmanager
def reporting_progress(advance: Callable[[int], object]) -> Iterator[None]:
    """Call ``advance(bytes)`` as converters write tensors, within the block."""
    token = _PROGRESS.set(advance)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def written(nbytes: int) -> None:
    """Tell the listener, if any, that a converter wrote ``nbytes`` of tensor values."""
    advance = _PROGRESS.get()
    if advance is not None:
        advance(nbytes)
