"""Writing a foreign-format file so that a crash never leaves half of it at its path.

The file is written under a temporary name in the destination's directory,
flushed to disk, then renamed over the destination in one step, as OCF's
own single-file commit does (spec/commit.md).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO


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
