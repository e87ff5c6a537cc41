"""Writing OCF files as objects of an object store (spec/commit.md, "Object stores").

An object store has no rename, but creating or replacing one object is
atomic: readers see the old object or the new one, whole, never a part.
So each file is uploaded straight under its final name as a multipart
upload, which becomes visible only when it is completed [R-COMMIT-005].
Until then nothing exists under that name; a crash leaves at most an
unfinished multipart upload, which no reader sees (and which a bucket
lifecycle rule reclaims).

Only :meth:`ObjectOutput.close_durably` completes an upload; an upload left
unfinished (an error, a writer dropped mid-write, interpreter shutdown) is
aborted by a finalizer, so it never publishes a truncated object over the
committed one.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE, PREAMBLE_SIZE, padding
from ocf.format.storage.location import ObjectPath, is_s3, object_kind
from ocf.format.storage.multipart import MultipartUpload

# Upload part size of filesystems other than S3: the bytes of an object held
# in memory before they are sent.
PART_SIZE = 32 << 20
_ZEROS = bytes(64)


class Upload(Protocol):
    """An object being uploaded: invisible until :meth:`complete` returns."""

    def write(self, data: memoryview) -> None: ...

    def complete(self) -> None: ...

    def abort(self) -> None: ...


class ObjectOutput:
    """One object being written: preamble first, then 64-byte aligned blocks.

    The interface of the writer's local output file; the object appears
    under its name only in :meth:`close_durably`. An output dropped without
    it (or :meth:`discard`) aborts its upload when collected, or at exit.
    On S3 the parts of the object are sent several at a time
    (:mod:`ocf.format.storage.multipart`); elsewhere through fsspec's file.
    """

    def __init__(self, path: ObjectPath, part_size: int = PART_SIZE) -> None:
        self.path = path
        self.final = path  # uploaded under its final name: no rename
        self._upload: Upload = MultipartUpload(path.fs, path.key) if is_s3(path.fs) \
            else FsspecUpload(path, part_size)
        self._upload.write(memoryview(PREAMBLE))
        self.position = PREAMBLE_SIZE

    def align(self) -> None:
        pad = padding(self.position)
        if pad:
            self._upload.write(memoryview(_ZEROS)[:pad])
            self.position += pad

    def write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._upload.write(view)
        self.position += view.nbytes

    def write_many(self, buffers: Sequence[memoryview]) -> None:
        """Write the buffers one after the other (into the upload's part buffer)."""
        for data in buffers:
            self.write(data)

    def flush(self) -> None:
        """Nothing to do: parts go out as they fill, the rest on close."""

    def close_durably(self) -> None:
        """Complete the upload: from now on the object exists, whole and durable."""
        self._upload.complete()  # the commit point of this object [R-COMMIT-005]

    def publish(self) -> None:
        """Nothing left to do: completing the upload in close_durably published it."""

    def discard(self) -> None:
        """Abandon the upload; nothing appears under the name."""
        self._upload.abort()


class FsspecUpload:
    """An upload through fsspec's buffered file, completed only by :meth:`complete`.

    fsspec's buffered files complete their upload when closed, and close
    themselves when garbage-collected: a writer dropped mid-write (an
    exception outside a ``with``, interpreter shutdown) would then publish a
    truncated object over the committed one. So the file is opened with
    ``autocommit=False``, which makes closing upload the last part without
    completing, and a finalizer aborts the upload if it is left unfinished.
    """

    def __init__(self, path: ObjectPath, part_size: int) -> None:
        self._file: Any = _open_uncommitted(path, part_size)
        # Holds the file, so that the file is never collected (and closed) before
        # this upload: its abort then always runs first [R-COMMIT-004].
        self._abandon = weakref.finalize(self, _abort_upload, self._file)

    def write(self, data: memoryview) -> None:
        self._file.write(data)

    def complete(self) -> None:
        self._file.close()  # uploads the last part; autocommit=False: completes nothing
        self._file.commit()
        self._abandon.detach()

    def abort(self) -> None:
        self._abandon()


def _open_uncommitted(path: ObjectPath, part_size: int) -> Any:
    """A buffered fsspec file at ``path`` whose upload completes only on commit().

    ``fs._open`` rather than ``fs.open``: with autocommit=False, ``open`` also
    records the file in the filesystem's transaction, which is never
    completed here and would keep every file (and its buffer) alive.
    """
    return path.fs._open(path.key, "wb", block_size=part_size, autocommit=False)


def _abort_upload(file: Any) -> None:
    """Abort the upload of ``file`` (a finalizer: never raises)."""
    try:
        file.discard()  # aborts a multipart upload already started
    except Exception:  # best effort: an unfinished upload is no object, and is billed
        pass  # only until a lifecycle rule reclaims it
    finally:
        # Marked closed so that closing (or collecting) the file sends nothing more.
        file.closed = True


def put_object(path: ObjectPath, data: bytes) -> None:
    """Create or replace the object at ``path`` with ``data`` in one atomic PUT."""
    path.fs.pipe_file(path.key, data)


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


def remove_objects(directory: ObjectPath, names: Sequence[str]) -> None:
    """Delete the objects ``names`` directly below ``directory``, quietly if gone: a
    batch deletion (S3 takes 1,000 keys a request), not one request per object."""
    keys = [(directory / name).key for name in names]
    if keys:
        with contextlib.suppress(FileNotFoundError):
            directory.fs.rm(keys)


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
