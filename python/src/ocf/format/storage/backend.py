"""The one interface between the format and the places where checkpoints live.

The reader, the writer, the merge of parts and the checkpoint manager see a
checkpoint's location only through a :class:`Backend`: they open
:class:`Input` files, write :class:`Output` files, and list, remove and
atomically replace small files through it, and never ask whether a path is
local or remote. :func:`backend_of` picks the backend of a location; it is
the only place that tells the kinds of location apart.

Two backends exist: local files (:mod:`ocf.format.storage.local`: memory
maps, preads, fsync and rename) and object stores reached through fsspec
(:mod:`ocf.format.storage.object_store`: ranged GETs, multipart uploads
that complete at commit). A new backend is one module implementing
:class:`Backend` plus one line in :func:`backend_of`.

Commit semantics every backend provides (spec/commit.md): an :class:`Output`
is invisible under its final name until :meth:`Output.publish` (local files
are written under a temporary name and renamed; an object's upload
completes in :meth:`Output.close_durably`), and
:meth:`Backend.write_small` replaces a small file whole or not at all.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Protocol, TypeVar

from ocf.format.storage.local import LOCAL
from ocf.format.storage.location import Location, ObjectPath
from ocf.format.storage.object_store import OBJECT_STORE

#: The two forms of a checkpoint (spec/commit.md): one file, or a directory.
Layout = Literal["file", "directory"]


class Input(Protocol):
    """A file (or object) open for reading, of a known size."""

    @property
    def path(self) -> Location: ...

    @property
    def size(self) -> int: ...

    #: Whether :meth:`mapping` works (local files); objects are read by ranges.
    mappable: bool
    #: The bytes one read job of a whole block asks for at once.
    read_group: int

    def pread(self, length: int, offset: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``; MalformedError if the file is shorter."""

    def read_into(self, buffer: memoryview, offset: int) -> None:
        """Fill ``buffer`` with the bytes at ``offset``; MalformedError if the file is shorter."""

    def mapping(self) -> mmap.mmap:
        """The whole file mapped read-only (only when :attr:`mappable`)."""

    def close(self) -> None: ...


class Output(Protocol):
    """A file (or object) being written: the preamble first, then 64-byte aligned data."""

    @property
    def path(self) -> Location:
        """The name the bytes go to now (a temporary name, for local files)."""

    @property
    def final(self) -> Location:
        """The name under which :meth:`publish` makes the file visible."""

    position: int  # bytes written so far, the preamble included

    def align(self) -> None:
        """Pad with zeros to the next multiple of 64 bytes."""

    def write(self, data: memoryview | bytes) -> None: ...

    def write_many(self, buffers: Sequence[memoryview]) -> None:
        """Write the buffers (C-contiguous, of any format) one after the other: the
        same bytes as a write() of each, with fewer calls to the storage."""

    def flush(self) -> None:
        """Hand buffered bytes to the storage."""

    def close_durably(self) -> None:
        """Write everything out and make it durable; for an object, complete the upload,
        which is also the object's commit [R-COMMIT-005]."""

    def publish(self) -> None:
        """Make the durable file visible under :attr:`final`, atomically [R-COMMIT-001]."""

    def discard(self) -> None:
        """Drop the file; nothing appears under its final name."""


class WriterLock(Protocol):
    """A held one-writer lock of a directory."""

    def release(self) -> None: ...


class Backend(Protocol):
    """The operations on one kind of location that the format and its users need."""

    #: Whether writes go to temporary names first, which a killed write may leave.
    temporary_names: bool
    #: How many requests are worth making at once (:func:`each`): 1 where each is a
    #: system call, more where each is a round trip to a server.
    parallel_requests: int

    # -- reading ------------------------------------------------------------------

    def resolve_checkpoint(self, where: Location) -> Location:
        """The index file of the checkpoint at ``where``: ``where`` itself (the
        single-file form) or ``where/index.ocf``; NotFoundError when neither is
        there [R-FILE-008] [R-COMMIT-003] [R-COMMIT-006]."""

    def open_index(self, path: Location, *, follow: bool = True) -> Input:
        """Open an index file: NotFoundError unless it is a regular file or an object;
        unless ``follow``, also for a symbolic link (a part index [R-PART-004])."""

    def open_shard(self, path: Location, length: int) -> Input:
        """Open a shard named by an index: it exists (NotFoundError), has ``length``
        bytes and starts with the preamble (MalformedError) [R-SHARD-002]."""

    def open_pool_shard(self, pool: Location, name: str, length: int) -> Input:
        """Open the pool object ``name`` of the pool directory ``pool``, as
        :meth:`open_shard` opens a shard, never through a symbolic link, neither at the
        directory nor at the name (NotFoundError) [R-POOL-003]."""

    def read_small(self, path: Location, limit: int) -> bytes | None:
        """The bytes of the small file at ``path``, None if there is none;
        LimitExceededError beyond ``limit`` bytes, which are never read."""

    # -- questions about names ------------------------------------------------------

    def exists(self, path: Location) -> bool:
        """Whether anything (a file, a directory, an object or a prefix) is at ``path``."""

    def list_names(self, directory: Location) -> list[str]:
        """The names directly inside ``directory`` (asked afresh, never cached)."""

    def entry_name(self, directory: str, path: str) -> str | None:
        """The name of ``path`` inside ``directory`` if it lies directly inside it."""

    # -- writing --------------------------------------------------------------------

    def prepare_target(self, target: Location, layout: Layout) -> bool:
        """Refuse a target of the other form; create a directory the multi-file form
        needs. True if a directory was created (:meth:`remove_created_directory`)."""

    def remove_created_directory(self, target: Location) -> None:
        """Undo :meth:`prepare_target`'s creation, if nothing else was put there."""

    def make_directory(self, directory: Location) -> None:
        """Create ``directory`` (and parents) durably if it does not exist."""

    def create_output(self, final: Location, write_id: str | None) -> Output:
        """A new file that appears at ``final`` when published; with a ``write_id``,
        local files are written under the temporary name of that write."""

    def sync_directory(self, directory: Location) -> None:
        """Make the names created in ``directory`` durable (local files: fsync)."""

    def write_small(self, path: Location, data: bytes) -> None:
        """Replace the file at ``path`` with ``data`` atomically and durably."""

    def remove(self, path: Location) -> None:
        """Delete one file or object, quietly if it is gone."""

    def remove_names(self, directory: Location, names: Sequence[str]) -> None:
        """Delete the files or objects ``names`` directly inside ``directory``, quietly
        for those gone (on an object store in as few requests as it takes)."""

    def remove_checkpoint(self, path: Location) -> None:
        """Delete a checkpoint of either form, its index first, so that a deletion
        cut short never leaves something that opens [R-COMMIT-006]."""

    def lock_writer(self, directory: Location) -> WriterLock | None:
        """Take the one-writer lock of ``directory`` (InvalidError naming the holder
        when another writer has it), released with the lock or the holder's process;
        None where the backend has no such lock (object stores)."""


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def each(storage: Backend, work: Callable[[_Item], _Result], items: Iterable[_Item]
         ) -> list[_Result]:
    """``work(item)`` for every item, the results in order: on a backend whose requests
    are round trips, :attr:`Backend.parallel_requests` at once, so that a caller opening
    many files waits for about one round trip, not one per file. Raises the error of
    the first item (in order) that failed, as a loop would; later items may have run."""
    todo = list(items)
    if storage.parallel_requests <= 1 or len(todo) <= 1:
        return [work(item) for item in todo]
    with ThreadPoolExecutor(min(storage.parallel_requests, len(todo)),
                            thread_name_prefix="ocf-requests") as pool:
        return list(pool.map(work, todo))


def backend_of(location: Location) -> Backend:
    """The backend of ``location``: the one place that tells locations apart."""
    return OBJECT_STORE if isinstance(location, ObjectPath) else LOCAL
