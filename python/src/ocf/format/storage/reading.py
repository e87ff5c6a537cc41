"""Reading OCF files that are objects of an object store, by byte ranges.

An object cannot be memory-mapped: every read is a ranged GET of exactly
the bytes asked for, so a reader fetches the footer and index when it
opens, and later only the chunks a read needs. The bytes are as hostile as
a local file's: a range that comes back short is a truncated file
(MALFORMED), and the reader checks checksums as usual.
"""

from __future__ import annotations

import mmap

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE_SIZE, check_preamble
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, NotFoundError
from ocf.format.storage.location import ObjectPath, head_object, object_size
from ocf.format.storage.ranges import get_with_size

# Opening an index object fetches up to this many bytes from its end in one
# request: the footer and, for most checkpoints, the whole index with it.
_TAIL_PREFETCH = 1 << 20


def resolve_object(path: ObjectPath) -> ObjectPath:
    """The index object of the checkpoint at ``path`` [R-COMMIT-006].

    An object at ``path`` is the index (single-file form); else the object
    ``path/index.ocf`` is (multi-file form). Two HEAD requests at most and
    no listing: objects below ``path/`` without an ``index.ocf`` are a write
    that never committed [R-COMMIT-003], no different from nothing.
    """
    if head_object(path) is not None:
        return path
    index = path / INDEX_FILE_NAME
    if head_object(index) is not None:
        return index
    raise NotFoundError(f"no checkpoint at this path: neither an object there nor one named "
                        f"{INDEX_FILE_NAME} below it (objects below it without "
                        f"{INDEX_FILE_NAME} are an unfinished write, not a checkpoint)",
                        path=path, requirement="R-COMMIT-006")


def read_small_object(path: ObjectPath, limit: int) -> bytes | None:
    """The bytes of the object at ``path`` (a state file), None if there is none.

    InvalidError if ``path`` is a prefix of objects, LimitExceededError if the
    object is larger than ``limit`` bytes: it is never fetched beyond that.
    """
    try:
        info = path.fs.info(path.key, refresh=True)
    except FileNotFoundError:
        return None
    if info.get("type") != "file":
        raise InvalidError("expected an object, found a prefix of objects", path=path)
    try:
        # One byte past the limit: a replacement grown since info() is caught too.
        data = path.fs.cat_file(path.key, start=0, end=limit + 1)
    except FileNotFoundError:  # deleted since info()
        return None
    if len(data) > limit:
        raise LimitExceededError(f"object is larger than {limit} bytes", path=path)
    return bytes(data)


class ObjectInput:
    """An OCF file stored as one object, read by ranges (never mapped)."""

    mappable = False
    # Bytes fetched by one ranged GET when a whole block is read: object stores
    # serve 8-16 MiB ranges best (fewer requests, still several in parallel).
    read_group = 16 << 20

    def __init__(self, path: ObjectPath, size: int) -> None:
        self.path = path
        self.size = size
        self._cache = b""  # the last bytes of the object, fetched when opened
        self._cache_start = size

    @classmethod
    def open_index(cls, path: ObjectPath) -> ObjectInput:
        """Open an index object, fetching its tail (footer and, usually, index) at once:
        on S3 in one request that also tells the object's size."""
        fetched = get_with_size(path, f"bytes=-{_TAIL_PREFETCH}", "R-COMMIT-006")
        if fetched is not None:
            tail, size = fetched
            index = cls(path, size)
            index._cache, index._cache_start = tail, size - len(tail)
            return index
        index = cls(path, object_size(path, "R-COMMIT-006"))
        if index.size:
            start = max(0, index.size - _TAIL_PREFETCH)
            index._cache = index.pread(index.size - start, start)
            index._cache_start = start
        return index

    @classmethod
    def open(cls, path: ObjectPath, expected_length: int) -> ObjectInput:
        """Open a shard named by the index: an object of the recorded length [R-SHARD-002].
        On S3 one request fetches the preamble and tells the size."""
        fetched = get_with_size(path, f"bytes=0-{PREAMBLE_SIZE - 1}", "R-SHARD-002")
        if fetched is None:
            shard = cls(path, object_size(path, "R-SHARD-002"))
            _check_length(shard, expected_length)
            preamble = shard.pread(PREAMBLE_SIZE, 0)
        else:
            preamble, size = fetched
            shard = cls(path, size)
            _check_length(shard, expected_length)
            if len(preamble) != PREAMBLE_SIZE:
                raise MalformedError(f"object ended after {len(preamble)} bytes, expected at "
                                     f"least {PREAMBLE_SIZE}: truncated", path=path)
        check_preamble(preamble, path, quote=False)
        return shard

    def pread(self, length: int, offset: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``; MALFORMED if the object is shorter."""
        if length == 0:
            return b""
        if offset >= self._cache_start:
            at = offset - self._cache_start
            data = self._cache[at : at + length]
        else:
            data = self._get(offset, offset + length)
        if len(data) != length:
            raise MalformedError(f"object ended after {offset + len(data)} bytes, expected at "
                                 f"least {offset + length}: truncated", path=self.path)
        return data

    def read_into(self, buffer: memoryview, offset: int) -> None:
        buffer[:] = self.pread(len(buffer), offset)

    def _get(self, start: int, end: int) -> bytes:
        try:
            data = self.path.fs.cat_file(self.path.key, start=start, end=end)
        except FileNotFoundError:  # deleted since it was opened
            raise NotFoundError("object disappeared while being read", path=self.path,
                                requirement="R-SHARD-002") from None
        if not isinstance(data, bytes):
            raise MalformedError(f"the store returned {type(data).__name__}, not bytes",
                                 path=self.path)
        return data

    def mapping(self) -> mmap.mmap:
        raise TypeError(f"an object cannot be memory-mapped: {self.path}")

    def close(self) -> None:
        self._cache = b""


def _check_length(shard: ObjectInput, expected: int) -> None:
    if shard.size != expected:
        raise MalformedError(f"shard is {shard.size} bytes, the index says {expected}: "
                             "truncated or replaced", path=shard.path, requirement="R-SHARD-002")

