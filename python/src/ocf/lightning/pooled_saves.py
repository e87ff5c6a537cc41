"""Incremental saves of :class:`~ocf.lightning.OCFCheckpointIO` (``incremental=True``).

Lightning decides where each checkpoint goes and which to delete; the plugin
only writes and removes files. Each save in a directory writes only the
blocks whose bytes differ from the previous checkpoint the plugin wrote or
loaded in that directory into the directory's pool (spec/pool.md) and
references the others. After each save (Lightning replaces ``last.ckpt`` by
saving over it) and each removal, the pool objects no checkpoint of the
directory lists any more are deleted, as :class:`ocf.CheckpointManager` does
with ``incremental=True`` (:mod:`ocf.objects.incremental`). A lock makes saves and removals take
turns: Lightning's ``AsyncCheckpointIO`` saves in a thread while the
training thread removes, and a collection running during a save would take
the save's new, still unlisted, pool objects for garbage.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ocf.format.storage.location import StorageOptions, locate
from ocf.objects.incremental import IncrementalSaves
from ocf.objects.pool_root import local_pool_root


class PooledSaves:
    """The state of one plugin's incremental saves: a base per directory, one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[Path, Path] = {}  # directory -> the checkpoint saved or loaded last

    @contextmanager
    def saving(self, path: str | os.PathLike[str], storage_options: StorageOptions | None
               ) -> Iterator[str | None]:
        """Within the block, save ``path`` incrementally on the base given (None: write
        every block); the next save in its directory then builds on it. An object store
        is INVALID, named: it has no pool."""
        where = local_pool_root(locate(path, storage_options))
        saves = IncrementalSaves(where.parent)
        with self._lock:
            base = self._latest.get(where.parent)
            usable = saves.writer_options(None if base is None or not base.is_file() else
                                          os.fspath(base))["base"]  # None if it does not open
            assert usable is None or isinstance(usable, str)
            yield usable
            self._latest[where.parent] = where
            saves.collect()  # what the file saved over alone referenced

    def loaded(self, path: str | os.PathLike[str]) -> None:
        """A resumed run's first save builds on the checkpoint it resumed from."""
        where = locate(path)
        if isinstance(where, Path):
            with self._lock:
                self._latest[where.parent] = where

    def removing(self, path: str | os.PathLike[str], remove: Callable[[], object]) -> None:
        """Call ``remove`` (deleting ``path``), then collect its directory's pool."""
        with self._lock:
            remove()
            where = locate(path)
            if isinstance(where, Path) and where.parent.is_dir():
                IncrementalSaves(where.parent).collect()
