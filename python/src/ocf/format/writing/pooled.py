"""Writing a checkpoint that may keep blocks in the pool of its managed root
(spec/pool.md, spec/commit.md "The pool of a managed root").

An incremental write stores a single file at its target, as a full save
does: the blocks whose bytes changed are written to its data region, unhashed,
and the others are referenced where the base checkpoint (of the same root)
keeps them. A block the base keeps in the pool is referenced there. A block
the base keeps in its own file is referenced through a hard link of that file
into the pool, made by the first save that reuses enough of its blocks (1 MiB and
a 16th of the file; smaller unchanged blocks are rewritten, since the link keeps
the whole file) and hashed then (SHA-256, [R-POOL-004]): the file of a committed
checkpoint never changes, and the link keeps it whole when the base is retired.
A save in which everything changed so hashes nothing and costs what a full save
costs; a save in which little changed hashes the previous save's new bytes, once.

A block is reused only when its bytes equal the stored ones, compared byte
for byte (a megabyte at a time, through the base's memory map, so that a
changed block is told early); CRCs are never taken as evidence
[R-COMMIT-007]. Large tensors are stored as bands of rows (slices), so that a
change in one row rewrites one band and not the whole tensor.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path

import numpy as np

from ocf.format import dtypes
from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import InvalidError
from ocf.format.index.model import Block, Shard
from ocf.format.pool import (
    POOL_FEATURE,
    managed_root,
    pool_directory,
    pool_object_name,
    sha256_of,
)
from ocf.format.reader import Reader
from ocf.format.slicing import Box
from ocf.format.storage.backend import Backend, Output
from ocf.format.storage.local import LocalInput
from ocf.format.storage.location import Location
from ocf.format.writing.committers import Committer, remove_temporaries_of
from ocf.format.writing.items import Item, Tensors
from ocf.v1 import index_pb2

# Tensors above this many bytes are stored as bands of rows of about this size: the
# unit a later save reuses or rewrites. One default chunk: a changed byte rewrites
# 1 MiB. Each band costs a lookup and an index row per save (some 30 us on the
# benchmark machine), so bands are not made smaller where whole tensors change.
BAND_BYTES = 1 << 20
# Tensors above this many bytes, such as embedding tables, whose updates touch runs
# of rows at scattered places, are stored as bands of FINE_BAND_BYTES (within
# _MAX_BANDS): a run of changed rows then rewrites little more than itself (2% of a
# table in 8 runs: 1.4x the changed bytes at 256 MiB, against 2.5x with 1 MiB bands).
LARGE_TABLE_BYTES = 64 << 20
FINE_BAND_BYTES = 256 << 10
# Bands per tensor at most, well inside the slices-per-tensor limit [R-SLICE-004].
_MAX_BANDS = 4096
# Bytes compared at a time when a block's bytes are checked against the stored ones:
# small enough that a changed block is told after little work, large enough that
# the per-piece cost is nothing.
_COMPARE_PIECE = 1 << 20
# The first piece compared: a changed block most often differs in it.
_FIRST_PIECE = 4096
# The unchanged bytes found in a base's own file that make this save link it into the
# pool (which hashes the whole file, and keeps all of it while a block of it is
# referenced): at least this many, and at least a _LINK_SHARE_DIVISOR-th of the file.
# Below that its unchanged blocks are rewritten: a constant beside tensors that
# change at every save must not keep every save's whole file alive.
MIN_LINKED_REUSE = 1 << 20
_LINK_SHARE_DIVISOR = 16
# What link() reports on a file system that makes no hard link there: the block is
# then written again instead of reused.
_NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP,
                  errno.EACCES}


def bands(shape: tuple[int, ...], itemsize: int, band_bytes: int | None = None
          ) -> list[Box] | None:
    """Boxes of whole rows (along the first dimension) of about ``band_bytes`` each
    that tile ``shape``; None when the tensor is small enough to stay whole."""
    total = int(np.prod(shape, dtype=np.int64)) * itemsize if shape else itemsize
    band_bytes = band_bytes_for(total) if band_bytes is None else band_bytes
    if not shape or total <= band_bytes or shape[0] < 2:
        return None
    row_bytes = total // shape[0]
    rows = max(1, band_bytes // max(row_bytes, 1), -(-shape[0] // _MAX_BANDS))
    rest = tuple(shape[1:])
    return [((start,) + (0,) * len(rest), (min(rows, shape[0] - start), *rest))
            for start in range(0, shape[0], rows)]


def band_bytes_for(total: int) -> int:
    """The size of the bands of a tensor of ``total`` bytes (before _MAX_BANDS)."""
    return FINE_BAND_BYTES if total > LARGE_TABLE_BYTES else BAND_BYTES


def banded_items(tensors: Tensors, key: str, value: object) -> Iterator[Item]:
    """The items that store ``value`` under ``key``: whole, or as bands of rows."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    boxes = bands(tuple(array.shape), array.dtype.itemsize) \
        if array.dtype.kind not in "OUS" else None
    if boxes is None:
        yield tensors.whole(key, array)
        return
    yield from tensors.slices(key, array, (0,) * array.ndim, array.shape, boxes)


@dataclass(frozen=True)
class _Stored:
    """A block of the base checkpoint that a block of this write may reuse."""

    block: Block
    dtype: dtypes.Dtype
    shard: Shard
    shard_number: int


@dataclass(frozen=True)
class Adopted:
    """A file of the base checkpoint linked into the pool as a new pool object: its
    name there, its length and its SHA-256 (computed on a worker thread)."""

    name: str
    length: int
    digest: Future[bytes]


class PoolCommitter(Committer):
    """The files of an incremental write: the single file at ``target`` (new blocks,
    then index and footer, under a temporary name renamed over the target
    [R-COMMIT-001]), and the hard links into the pool of the base's files whose
    blocks it reuses (made by :meth:`adopt`), listed as pool shards."""

    def __init__(self, storage: Backend, target: Location, write_id: str) -> None:
        super().__init__(storage, target, write_id)
        self.created_directory = storage.prepare_target(target, "file")
        self.pool = pool_directory(target)  # the directory of the index file is the root
        _refuse_a_pool_that_is_no_directory(self.pool)
        self._outputs.append(storage.create_output(target, write_id))
        # The shards of the new index in the order of their first use, by name: this
        # file (""), the base's pool objects, and the pool objects this write linked.
        self._listed: list[Shard | Adopted | None] = []  # None: this file
        self._numbers: dict[str, int] = {}
        self._links: list[Path] = []  # made by this write, removed by an abort
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ocf-pool-hash")

    @property
    def shard(self) -> int:
        """This file's number in the new index: every new block goes to it."""
        return self._number("", None)

    def _number(self, name: str, entry: Shard | Adopted | None) -> int:
        number = self._numbers.get(name)
        if number is None:
            number = self._numbers[name] = len(self._listed)
            self._listed.append(entry)
        return number

    def reference(self, shard: Shard | Adopted) -> int:
        """The number, in the new index, of the pool object ``shard``: one the base
        lists, or one this write linked."""
        return self._number(shard.path if isinstance(shard, Shard) else shard.name, shard)

    def adopt(self, source: LocalInput) -> Adopted | None:
        """Link the base's file ``source`` into the pool under a new name and start
        hashing it [R-COMMIT-007]; None when the file system makes no hard link here.
        Called once per file, by one thread at a time."""
        local = Path(os.fspath(self.pool))
        if not self._links:
            _refuse_a_pool_that_is_no_directory(local)
            self.storage.make_directory(local)  # its name in the root durable
        link = local / pool_object_name(self.write_id, len(self._links))
        try:
            os.link(os.path.realpath(source.path), link, follow_symlinks=False)
        except FileNotFoundError as exc:
            raise InvalidError("the base checkpoint's file was deleted during the save "
                               "(one writer per managed root)", path=source.path) from exc
        except OSError as exc:
            if exc.errno in _NO_HARD_LINKS:
                return None
            raise
        self._links.append(link)
        linked, opened = os.lstat(link), os.fstat(source.fd)
        if (linked.st_dev, linked.st_ino) != (opened.st_dev, opened.st_ino):
            raise InvalidError("the base checkpoint's file was replaced during the save "
                               "(one writer per managed root)", path=source.path)
        return Adopted(link.name, linked.st_size,
                       self._hasher.submit(self._identity, link.name, linked.st_size))

    def _identity(self, name: str, length: int) -> bytes:
        """The SHA-256 of the pool object ``name``, read as a reader opens it (in the
        pool directory, no link followed, size and preamble checked) [R-POOL-004]."""
        source = self.storage.open_pool_shard(self.pool, name, length)
        try:
            return sha256_of(source)
        finally:
            source.close()

    def output_for(self, size: int) -> Output:
        return self._outputs[0]

    def close_shards(self) -> None:
        """Nothing: the one file holds the index too, and becomes durable with it."""

    def commit(self, index: index_pb2.Index, name: str) -> None:
        """List this file and the pool objects with their SHA-256, make the links'
        names durable, then write the index and publish the file [R-COMMIT-007]."""
        for entry in self._listed:
            if entry is None:
                index.shards.add(path="")
            elif isinstance(entry, Shard):
                index.shards.add(path=entry.path, length=entry.length,
                                 pool_sha256=entry.pool_sha256)
            else:
                index.shards.add(path=entry.name, length=entry.length,
                                 pool_sha256=entry.digest.result())
        if self._links:
            self.storage.sync_directory(self.pool)
        if any(entry is not None for entry in self._listed):
            index.header.required_features.append(POOL_FEATURE)
        index_bytes = self._index_bytes(index)
        output = self._outputs[0]
        self._write_index(output, index_bytes)
        # From the rename on, the links belong to the index that lists them: a failure
        # after it (the root's fsync, an interrupt) must not let abort() unlink them.
        # Should the rename itself fail, they are leftovers the next collection deletes.
        self._links.clear()
        output.publish()
        self._outputs.clear()
        remove_temporaries_of(self.storage, self.target)
        self._hasher.shutdown()

    def abort(self) -> None:
        self._hasher.shutdown()  # no thread still reads a link
        for link in self._links:  # listed by no index: garbage already, gone sooner
            self.storage.remove(link)
        self._links.clear()
        super().abort()


def _refuse_a_pool_that_is_no_directory(pool: Location) -> None:
    """InvalidError when the pool's name is taken by something other than a directory:
    it is never written through [R-POOL-003]."""
    if isinstance(pool, Path):
        try:
            mode = os.lstat(pool).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            raise InvalidError("the pool's name in the managed root is taken by a file "
                               "that is not a directory (or a symbolic link)", path=pool)


class Reuse:
    """Finds, for each block to write, equal bytes the base checkpoint stores, in the
    pool or in its own file; ``committer`` lists the pool objects it reuses and links
    the base's file into the pool when a block of it is first reused."""

    def __init__(self, base: Reader | None, tensors: Tensors, committer: PoolCommitter
                 ) -> None:
        self._base, self._tensors, self._committer = base, tensors, committer
        self._stored: dict[tuple[str, Box | None], _Stored] = {}
        self._maps: dict[int, np.ndarray] = {}  # the base's files, mapped
        # The base's own file, once linked into the pool (None: it cannot be).
        self._adopted: dict[int, Adopted | None] = {}
        self._adopting = threading.Lock()
        # The bytes of the blocks found unchanged so far in each base file of its own.
        self._unchanged: dict[int, int] = {}
        if base is None:
            return
        for key, info in base.index.tensors.items():
            placed = [(None, info.block)] if info.block is not None else [
                ((tuple(s.start), tuple(s.extent)), s.block) for s in info.slices]
            for box, block in placed:
                shard = base.index.shards[block.shard]
                if self._reusable(block.shard, shard) and block.compression.stores_raw \
                        and block.raw_length:
                    self._stored[(key, box)] = _Stored(block, info.dtype, shard, block.shard)
        # Mapped here, once, not by the threads that compare.
        for number in {stored.shard_number for stored in self._stored.values()}:
            source = base.shard_input(number)
            if source.mappable:
                self._maps[number] = np.frombuffer(source.mapping(), np.uint8)

    def _reusable(self, number: int, shard: Shard) -> bool:
        """Whether blocks of the base's shard ``number`` can be referenced: a pool
        object, or the base's own local file (which a hard link makes one)."""
        assert self._base is not None
        return bool(shard.pool_sha256) or (
            shard.path == "" and isinstance(self._base.shard_input(number), LocalInput))

    def block_for(self, item: Item) -> Callable[[], Block | None] | None:
        """None unless the base stores exactly ``item``'s bytes; else a function giving
        the block of the new index that references them, or None when they are in a
        file of the base not worth linking into the pool (the item is then written).
        Safe on any thread (it compares bytes); the function is called on the writing
        thread, in order, when the lookups of the next few MiB of items have run or
        are running (their unchanged bytes then count towards linking the file)."""
        key = self._tensors.table.keys[item.row]
        box = None if item.box is None else (tuple(item.box[0]), tuple(item.box[1]))
        stored = self._stored.get((key, box))
        if stored is None or stored.dtype != item.dtype \
                or stored.block.raw_length != len(item.raw):
            return None
        if not self._same_bytes(stored, item.raw):
            return None
        if stored.shard.pool_sha256:
            return partial(self._reference, stored, stored.shard)
        with self._adopting:
            self._unchanged[stored.shard_number] = \
                self._unchanged.get(stored.shard_number, 0) + len(item.raw)
        return partial(self._reference_own, stored)

    def _reference_own(self, stored: _Stored) -> Block | None:
        """The block of the new index for the bytes of ``stored``, in the base's own
        file; None (write them) while that file is not worth linking."""
        pooled = self._adopt(stored.shard_number)
        return None if pooled is None else self._reference(stored, pooled)

    def _adopt(self, number: int) -> Adopted | None:
        """The base's own file (shard ``number``) as a pool object of this write: linked
        once the unchanged bytes found in it are a share worth keeping the whole file
        for (None before, and when the file system makes no hard link)."""
        with self._adopting:
            if number not in self._adopted:
                assert self._base is not None
                source = self._base.shard_input(number)
                assert isinstance(source, LocalInput)
                threshold = max(MIN_LINKED_REUSE, source.size // _LINK_SHARE_DIVISOR)
                if self._unchanged.get(number, 0) < threshold:
                    return None
                self._adopted[number] = self._committer.adopt(source)
            return self._adopted[number]

    def _reference(self, stored: _Stored, pooled: Shard | Adopted) -> Block:
        """The block of the new index for the bytes of ``stored``: the same place, in the
        pool object ``pooled``, listed in the new index; the bytes are the stored ones,
        so are their chunk CRCs."""
        old = stored.block
        return Block(self._committer.reference(pooled), old.offset, old.stored_length,
                     old.raw_length, old.compression, False, old.chunk_size,
                     list(old.chunk_crcs), [])

    def _same_bytes(self, stored: _Stored, raw: memoryview) -> bool:
        """Whether the stored block holds exactly ``raw``, compared byte for byte."""
        assert self._base is not None
        source = self._base.shard_input(stored.shard_number)
        new = np.frombuffer(raw, np.uint8)
        offset = stored.block.offset
        # A local file is compared through its map (no copy); an object piece by piece.
        mapped = self._maps.get(stored.shard_number)
        # A changed block stops early: most often at its first bytes (a tensor that
        # changed changed everywhere), so a small piece is compared first.
        ends = [min(_FIRST_PIECE, len(new)), *range(_COMPARE_PIECE, len(new), _COMPARE_PIECE),
                len(new)]
        for start, end in pairwise([0, *sorted(set(ends))]):
            old = mapped[offset + start:offset + end] if mapped is not None else \
                np.frombuffer(source.pread(end - start, offset + start), np.uint8)
            if not _equal(old, new[start:end]):
                return False
        return True


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the byte arrays ``a`` and ``b`` (of one length) are equal, compared 8
    bytes at a time where they allow it (an eighth of the work of a byte compare)."""
    whole = len(a) // 8 * 8
    return bool((a[:whole].view(np.uint64) == b[:whole].view(np.uint64)).all()
                and (a[whole:] == b[whole:]).all())


def pooled_committer(layout: str, storage: Backend, target: Location, write_id: str
                     ) -> PoolCommitter:
    """The committer of an incremental write: the single-file form, on a local path,
    whose directory is the managed root."""
    if layout != "file" or not isinstance(target, Path) or target.name == INDEX_FILE_NAME:
        raise InvalidError("an incremental write stores a single index file (layout "
                           "'file', not named index.ocf) on a local path, beside the pool "
                           "of its directory", path=target)
    return PoolCommitter(storage, target, write_id)


def open_base(base: str | os.PathLike[str] | None, target: Location) -> Reader | None:
    """The base checkpoint of an incremental write to ``target``, opened; it must lie in
    the same managed root, whose pool it shares."""
    if base is None:
        return None
    reader = Reader(base)
    if managed_root(reader.path) != managed_root(target):
        reader.close()
        raise InvalidError(f"the base checkpoint {os.fspath(base)!r} is not in the managed "
                           "root of the target, whose pool an incremental save uses",
                           path=target)
    return reader
