"""Allocations sized by a file, and what a reader says when memory runs out [R-ERR-003].

Every buffer a reader allocates for a tensor, an index or a decoded chunk
is sized by numbers the file holds, and the reader has checked those
numbers against what the file can justify before it asks for the memory
(spec/format.md, "Limits" [R-LIMIT-003]): an uncompressed block lies in
its shard, a zstd chunk expands at most 32768-fold, the index is at most
256 MiB, and so on. What remains is a checkpoint whose valid contents need
more memory than the machine gives: that is reported as
:class:`~ocf.format.errors.OutOfMemoryError`, naming the tensor (or the
index), the file and the bytes, never as a bare MemoryError nor as a
format error.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from numpy.typing import DTypeLike

from ocf.format.errors import OutOfMemoryError

# What threading raises when the system refuses a new thread (its stack).
_NO_THREAD = "can't start new thread"


@contextmanager
def needing(nbytes: int, what: str, *, path: str | os.PathLike[str] | None,
            key: str | None = None) -> Iterator[None]:
    """Run a step that allocates about ``nbytes`` for ``what``; a MemoryError in it
    becomes an OutOfMemoryError naming ``what``, ``path``, ``key`` and the bytes."""
    try:
        yield
    except OutOfMemoryError:
        raise
    except MemoryError:
        raise out_of_memory(nbytes, what, path=path, key=key) from None
    except OSError as exc:  # mmap's word for it
        if exc.errno != errno.ENOMEM:
            raise
        raise out_of_memory(nbytes, what, path=path, key=key) from None
    except RuntimeError as exc:  # threading's word for a stack it could not map
        if _NO_THREAD not in str(exc):
            raise
        raise out_of_memory(nbytes, f"{what} (on a worker thread that could not start)",
                            path=path, key=key) from None


def out_of_memory(nbytes: int, what: str, *, path: str | os.PathLike[str] | None,
                  key: str | None = None) -> OutOfMemoryError:
    """The error for a step that could not get its ``nbytes`` bytes."""
    into = ", or into an array of your own with Reader.read_into" if key is not None else ""
    return OutOfMemoryError(
        f"{what} needs {nbytes:,} bytes ({nbytes / 2**20:,.1f} MiB) of memory or more, "
        f"which this process could not get; the file is not at fault: read it with more "
        f"memory{into}", needed=nbytes, path=path, key=key)


def allocate(shape: int | tuple[int, ...], dtype: DTypeLike, what: str, *,
             path: str | os.PathLike[str] | None, key: str | None = None,
             zeroed: bool = False) -> np.ndarray:
    """A new array for ``what``, or OutOfMemoryError when the memory is not there.

    ``zeroed`` asks for zero-filled memory, whose pages the system provides
    only once they are written.
    """
    dims = (shape,) if isinstance(shape, int) else shape
    # Exact Python integers (NumPy's would wrap), and far cheaper than np.prod per call.
    nbytes = math.prod(int(d) for d in dims) * np.dtype(dtype).itemsize
    with needing(nbytes, what, path=path, key=key):
        array: np.ndarray = (np.zeros if zeroed else np.empty)(dims, dtype=dtype)
    return array
