"""Where incremental saves may go: a local directory, the managed root of its pool.

An incremental save stores its blocks in the pool of its directory
(spec/pool.md); a pool on an object store is not defined by this format
version (spec/commit.md, "The pool of a managed root"). Every manager that
takes ``incremental=True`` (:class:`ocf.CheckpointManager` and those built
on it, ``ocf.lightning.OCFCheckpointIO``) refuses any other place here,
before it writes anything.
"""

from __future__ import annotations

from pathlib import Path

from ocf.format.errors import InvalidError
from ocf.format.storage.location import Location


def local_pool_root(where: Location) -> Path:
    """``where`` when it is a local directory; INVALID, naming it and why, otherwise."""
    if not isinstance(where, Path):
        raise InvalidError("incremental saves need a local directory: their blocks live in "
                           "the directory's pool (ocf-pool), and a pool on an object store "
                           "is not defined by this format version", path=str(where))
    return where
