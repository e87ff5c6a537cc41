"""Writing OCF files as objects of an object store (spec/commit.md, "Object stores").

An object store has no rename, but creating or replacing one object is
atomic: readers see the old object or the new one, whole, never a part.
So each file is uploaded straight under its final name: a small one in
one PUT, a large one as a multipart upload, which becomes visible only
when the upload is completed [R-COMMIT-005]. Until then nothing exists
under that name; a crash leaves at most an unfinished multipart upload,
which no reader sees (and which a bucket lifecycle rule reclaims).
"""

from __future__ import annotations

import contextlib
from typing import Any

from ocf.commit import is_temp_name
from ocf.container import INDEX_FILE_NAME, PREAMBLE, PREAMBLE_SIZE, padding
from ocf.storage.location import ObjectPath, object_kind

# Upload part size: the bytes of an object held in memory before they are
# sent. S3 takes parts of 5 MiB to 5 GiB and at most 10,000 per object, so
# objects up to 312 GiB.
PART_SIZE = 32 << 20
_ZEROS = bytes(64)


class ObjectOutput:
    """One object being written: preamble first, then 64-byte aligned blocks.

    The interface of the writer's local output file; the object appears
    under its name only in :meth:`close_durably`.
    """

    def __init__(self, path: ObjectPath, part_size: int = PART_SIZE) -> None:
        self.path = path
        self._file: Any = path.fs.open(path.key, "wb", block_size=part_size)
        self._file.write(PREAMBLE)
        self.position = PREAMBLE_SIZE

    def align(self) -> None:
        pad = padding(self.position)
        if pad:
            self._file.write(_ZEROS[:pad])
            self.position += pad

    def write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._file.write(view)
        self.position += view.nbytes

    def flush(self) -> None:
        """Nothing to do: parts go out as they fill, the rest on close."""

    def close_durably(self) -> None:
        """Complete the upload: from now on the object exists, whole and durable."""
        self._file.close()

    def discard(self) -> None:
        """Abandon the upload; nothing appears under the name."""
        self._file.discard()  # aborts a multipart upload already started
        # Marked closed so that closing (or collecting) the file uploads nothing.
        self._file.closed = True


def put_object(path: ObjectPath, data: bytes) -> None:
    """Create or replace the object at ``path`` with ``data`` in one atomic PUT."""
    path.fs.pipe_file(path.key, data)


def remove_unreferenced_objects(directory: ObjectPath, referenced: set[str]) -> None:
    """Delete shard objects below ``directory`` that its new index does not use.

    Runs only after the index PUT, under the one-writer rule of
    [R-COMMIT-004]: a previous version's shards, or those of a crashed write.
    """
    names = list_names(directory)
    stale = [directory / name for name in names
             if (name.startswith("data-") and name.endswith(".ocfd") and name not in referenced)
             or is_temp_name(name)]
    for path in stale:
        remove_object(path)


def list_names(directory: ObjectPath) -> list[str]:
    """Names of the objects directly below ``directory`` (asked afresh, not cached)."""
    try:
        entries = directory.fs.ls(directory.key, detail=True, refresh=True)
    except FileNotFoundError:
        return []
    prefix = directory.key + "/"
    return [str(e["name"])[len(prefix):] for e in entries
            if e.get("type") == "file" and str(e["name"]).startswith(prefix)]


def remove_object(path: ObjectPath) -> None:
    """Delete one object, quietly if it is already gone."""
    with contextlib.suppress(FileNotFoundError):
        path.fs.rm_file(path.key)


def remove_checkpoint(path: ObjectPath) -> None:
    """Delete the checkpoint at ``path``: its object, or every object below ``path/``.

    In the multi-file form ``index.ocf`` goes first, so that a deletion cut
    short leaves objects that no reader takes for a checkpoint [R-COMMIT-006].
    """
    if object_kind(path) == "file":
        remove_object(path)
        return
    remove_object(path / INDEX_FILE_NAME)
    path.fs.invalidate_cache(path.key)  # find() lists from the cache otherwise
    try:
        found = path.fs.find(path.key)
    except FileNotFoundError:
        return
    # Only below "path/": never "path0/..." of a neighbour whose name extends this one.
    keys = [key for key in found if str(key).startswith(path.key + "/")]
    if keys:
        with contextlib.suppress(FileNotFoundError):
            path.fs.rm(keys)
