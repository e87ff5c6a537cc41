"""Object stores through fsspec: the storage backend of URLs (``s3://bucket/ckpt``).

An object cannot be renamed or memory-mapped, but creating or replacing one
object is atomic, so the commit protocol becomes "upload under the final
name, and complete the upload last" (spec/commit.md, "Object stores"). The
reading side is :mod:`ocf.format.storage.reading` (ranged GETs), the
writing side :mod:`ocf.format.storage.uploading` (multipart uploads that
complete only at commit); this module puts them behind the same
:class:`ocf.format.storage.backend.Backend` as local files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ocf.format.errors import InvalidError
from ocf.format.storage.location import Location, ObjectPath, head_object, object_kind
from ocf.format.storage.reading import ObjectInput, read_small_object, resolve_object
from ocf.format.storage.uploading import (
    ObjectOutput,
    list_names,
    put_object,
    remove_checkpoint,
    remove_object,
    remove_objects,
)


def _object(path: Location) -> ObjectPath:
    if not isinstance(path, ObjectPath):
        raise TypeError(f"{path!r} is not an object-store path")
    return path


class ObjectStoreBackend:
    """The :class:`ocf.format.storage.backend.Backend` of fsspec URLs."""

    temporary_names = False  # uploads go straight to their final names
    parallel_requests = 16  # each request is a round trip: a few at once hide them

    def resolve_checkpoint(self, where: Location) -> ObjectPath:
        return resolve_object(_object(where))

    def open_index(self, path: Location, *, follow: bool = True) -> ObjectInput:
        return ObjectInput.open_index(_object(path))

    def open_shard(self, path: Location, length: int) -> ObjectInput:
        return ObjectInput.open(_object(path), length)

    def open_pool_shard(self, pool: Location, name: str, length: int) -> ObjectInput:
        return ObjectInput.open(_object(pool / name), length)  # a store has no links

    def read_small(self, path: Location, limit: int) -> bytes | None:
        return read_small_object(_object(path), limit)

    def exists(self, path: Location) -> bool:
        return object_kind(_object(path)) is not None

    def list_names(self, directory: Location) -> list[str]:
        return list_names(_object(directory))

    def entry_name(self, directory: str, path: str) -> str | None:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return name if path.rstrip("/") == f"{directory.rstrip('/')}/{name}" else None

    def prepare_target(self, target: Location, layout: Literal["file", "directory"]) -> bool:
        """Refuse a target of the other form; an object store needs no directories.

        The multi-file form asks only whether an object has the target's name: one
        HEAD, where telling a prefix apart would also list (every writer of a
        multi-writer save asks before its first byte goes out)."""
        path = _object(target)
        if layout == "directory":
            if head_object(path) is not None:
                raise InvalidError("target exists and is an object, not a prefix",
                                   path=target, requirement="R-COMMIT-005")
            return False
        if object_kind(path) == "directory":
            raise InvalidError("target is a prefix holding objects; use layout='directory' "
                               "to write the multi-file form", path=target,
                               requirement="R-COMMIT-005")
        return False

    def remove_created_directory(self, target: Location) -> None:
        """Nothing to remove: a prefix exists only while objects below it do."""

    def make_directory(self, directory: Location) -> None:
        """Nothing to create: a prefix exists once an object below it does."""

    def create_output(self, final: Location, write_id: str | None) -> ObjectOutput:
        # Under its final name: the object exists once its upload completes.
        return ObjectOutput(_object(final))

    def sync_directory(self, directory: Location) -> None:
        """Nothing to sync: an object is durable once its upload completes."""

    def write_small(self, path: Location, data: bytes) -> None:
        # One PUT replaces the object atomically, durable once acknowledged [R-COMMIT-005].
        put_object(_object(path), data)

    def remove(self, path: Location) -> None:
        remove_object(_object(path))

    def remove_names(self, directory: Location, names: Sequence[str]) -> None:
        remove_objects(_object(directory), names)

    def remove_checkpoint(self, path: Location) -> None:
        remove_checkpoint(_object(path))

    def lock_writer(self, directory: Location) -> None:
        # fsspec offers no lock that dies with its holder, and a lease object would
        # need a clock both writers trust: one writer per prefix is the caller's duty.
        return None


OBJECT_STORE = ObjectStoreBackend()
