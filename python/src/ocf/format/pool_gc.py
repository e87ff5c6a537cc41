"""Collecting the pool of a managed root (spec/commit.md, "The pool of a managed
root", [R-COMMIT-008]).

A pool object stays while the index file of any checkpoint of the root
lists it, and is garbage once none does: the new objects of a killed save,
the objects only retired checkpoints listed. Collecting reads the index of
every checkpoint in the root (every regular file directly in it that is an
index file, and ``index.ocf`` of every directory in it) and deletes the
pool objects none lists. When one of those indexes cannot be read and
decoded, nothing is deleted: a reference could hide in it. The root's
deletions are made durable before any pool object goes, so that a power
loss cannot bring back an index whose objects are gone.

One writer per root at a time ([R-COMMIT-004]): the caller holds the
root's writer lock, or is the writer that just committed.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

from ocf.format.commit import fsync_dir, is_temp_name, remove_quietly
from ocf.format.container import FOOTER_MAGIC, INDEX_FILE_NAME, PREAMBLE_MAGIC, read_index_bytes
from ocf.format.errors import OCFError
from ocf.format.index.decoding import decode_index
from ocf.format.pool import POOL_DIRECTORY, POOL_OBJECT_NAME
from ocf.format.storage.local import LOCAL


def _index_files(root: Path) -> list[Path]:
    """The index files of the checkpoints directly in ``root``, no link followed."""
    found = []
    for name in sorted(os.listdir(root)):
        if name == POOL_DIRECTORY or is_temp_name(name):
            continue
        path = root / name
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            path = path / INDEX_FILE_NAME
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue  # not a committed checkpoint [R-COMMIT-003]
        if stat.S_ISREG(mode) and _looks_like_index(path):
            found.append(path)
    return found


def _looks_like_index(path: Path) -> bool:
    """Whether ``path`` starts with the preamble magic and ends with the footer magic."""
    with open(path, "rb") as file:
        head = file.read(len(PREAMBLE_MAGIC))
        if head != PREAMBLE_MAGIC:
            return False
        file.seek(0, os.SEEK_END)
        if file.tell() < len(PREAMBLE_MAGIC) + len(FOOTER_MAGIC):
            return True  # a truncated index: undecodable, which stops the collection
        file.seek(-len(FOOTER_MAGIC), os.SEEK_END)
        return file.read() == FOOTER_MAGIC


def referenced_objects(root: str | os.PathLike[str]) -> set[str] | None:
    """The names of the pool objects that some index of ``root`` lists; None when an
    index file of the root cannot be read and decoded."""
    names: set[str] = set()
    for path in _index_files(Path(root)):
        try:
            source = LOCAL.open_index(path)
            try:
                data, footer = read_index_bytes(source)
            finally:
                source.close()
            index = decode_index(data, str(path), footer.index_offset)
        except OCFError as exc:
            warnings.warn(f"the pool of {os.fspath(root)} is not collected: {exc} (a "
                          "reference could hide in this index; move or repair it)",
                          stacklevel=3)
            return None
        names.update(shard.path for shard in index.shards if shard.pool_sha256)
    return names


def collect_pool(root: str | os.PathLike[str]) -> list[str]:
    """Delete the pool objects of ``root`` that no index of the root lists, and the
    temporary files in the pool; the names deleted (none when an index of the root
    does not decode, or there is no pool) [R-COMMIT-008]."""
    root = Path(root)
    pool = root / POOL_DIRECTORY
    try:
        if not stat.S_ISDIR(os.lstat(pool).st_mode):
            return []  # a link or a file: not a pool, never followed
    except FileNotFoundError:
        return []
    referenced = referenced_objects(root)
    if referenced is None:
        return []
    # Only names a pool writer gives: whatever else someone put there is not ours.
    garbage = [name for name in sorted(os.listdir(pool)) if name not in referenced
               and (POOL_OBJECT_NAME.fullmatch(name) or is_temp_name(name))]
    if not garbage:
        return garbage
    fsync_dir(root)  # the index deletions that made objects garbage are durable first
    for name in garbage:
        remove_quietly(pool / name)
    # The pool is not synced after: an object a power loss brings back is listed by no
    # index (their deletions were durable first) and goes with the next collection.
    return garbage
