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
the save's new, still unlisted, pool objects for garbage. Each save and
removal also holds the directory's writer lock, as a CheckpointManager does
(one writer per directory, spec/commit.md): another process saving into it
could otherwise have its fresh pool objects collected. Another holder is
INVALID, named, before anything is written or deleted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from ocf.format.storage.local import LOCAL
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
        where.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, _writer_lock(where.parent):
            base = self._latest.get(where.parent)
            options = saves.writer_options(None if base is None or not base.is_file() else
                                           os.fspath(base))
            yield cast("str | None", options["base"])  # None if it does not open
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
        where = locate(path)
        if not (isinstance(where, Path) and where.parent.is_dir()):
            with self._lock:
                remove()
            return
        with self._lock, _writer_lock(where.parent):
            remove()
            IncrementalSaves(where.parent).collect()


@contextmanager
def _writer_lock(directory: Path) -> Iterator[None]:
    """Hold the directory's one-writer lock within the block; INVALID naming the holder."""
    lock = LOCAL.lock_writer(directory)
    try:
        yield
    finally:
        lock.release()
