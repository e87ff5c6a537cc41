"""Incremental saves of a :class:`~ocf.objects.manager.CheckpointManager`
(spec/pool.md; spec/commit.md, "The pool of a managed root").

With ``incremental=True`` a manager's directory is a managed root: each
save writes a single file holding only the blocks whose bytes differ from
the latest checkpoint's, and references the others in the pool
``<directory>/ocf-pool``, into which the file of the latest checkpoint is
linked when a block of it is first reused (:mod:`ocf.format.writing.pooled`).
Every checkpoint stays complete and verifiable on its own; it needs only the
pool beside it.

Retention is the manager's as before: max_to_keep, the hours rule and
keep-best delete checkpoints (their index files). After each save's
deletions, the pool objects that no index of the directory lists any more
are deleted (:func:`ocf.format.pool_gc.collect_pool`), so that a block
stays exactly while a retained checkpoint references it. A process killed
at any moment leaves every retained checkpoint whole: a pool object is a
link to the durable file of a committed checkpoint, made durable before an
index names it, an index is deleted before the objects only it listed, and
nothing listed is ever deleted. What a kill can leave (a killed save's new
links, a retired checkpoint's objects) is collected by the next save.
"""

from __future__ import annotations

import os
import warnings

from ocf.format.errors import InvalidError, OCFError
from ocf.format.pool_gc import collect_pool
from ocf.format.reader import Reader
from ocf.format.storage.location import Location


class IncrementalSaves:
    """What a manager adds to its saves in the managed root ``root``."""

    def __init__(self, root: Location) -> None:
        if not isinstance(root, os.PathLike):
            raise InvalidError("incremental saves need a local directory (the pool of an "
                               "object store is not defined)", path=str(root))
        self._root = root

    def writer_options(self, latest: str | None) -> dict[str, object]:
        """The options of ocf.Writer for the next save: into the pool, reusing the
        bytes of ``latest`` (the latest checkpoint) where they are unchanged."""
        return {"incremental": True, "base": self._usable(latest)}

    @staticmethod
    def _usable(latest: str | None) -> str | None:
        """``latest`` when it opens; else None, and the save writes every block."""
        if latest is None:
            return None
        try:
            Reader(latest).close()
        except OCFError as exc:
            warnings.warn(f"the latest checkpoint does not open ({exc}); this save "
                          "writes every block", stacklevel=4)
            return None
        return latest

    def collect(self) -> list[str]:
        """Delete the pool objects that no checkpoint of the root lists; their names."""
        return collect_pool(os.fspath(self._root))
