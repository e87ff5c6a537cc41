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
from collections.abc import Callable
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
from ocf.format.writing.banding import part_of
from ocf.format.writing.committers import Committer, remove_temporaries_of
from ocf.format.writing.items import Item, Tensors
from ocf.v1 import index_pb2

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
        # Compared already when writes_whole chose its layout (Item.same_as_base).
        stored = None if item.same_as_base is False else self._stored_for(item)
        if stored is None or stored.dtype != item.dtype \
                or stored.block.raw_length != len(item.raw):
            return None
        if item.same_as_base is None and not self._same_bytes(stored, item.raw):
            return None
        if stored.shard.pool_sha256:
            return partial(self._reference, stored, stored.shard)
        with self._adopting:
            self._unchanged[stored.shard_number] = \
                self._unchanged.get(stored.shard_number, 0) + len(item.raw)
        return partial(self._reference_own, stored)

    def _stored_for(self, item: Item) -> _Stored | None:
        """The stored block of the base whose place ``item`` takes: the same slice, or
        for a band of rows the run of chunks of a tensor the base stores whole that
        holds its rows (the base wrote it whole, every band changed)."""
        key = self._tensors.table.keys[item.row]
        box = None if item.box is None else (tuple(item.box[0]), tuple(item.box[1]))
        stored = self._stored.get((key, box))
        if stored is not None or box is None:
            return stored
        whole = self._stored.get((key, None))
        shape = self._tensors.table.shapes[item.row]
        if whole is None or any(box[0][1:]) or box[1][1:] != shape[1:] or not box[1][0]:
            return None  # no band of whole rows, or no tensor stored whole to cut it from
        row_bytes = len(item.raw) // box[1][0]
        part = part_of(whole.block, box[0][0] * row_bytes, len(item.raw))
        return None if part is None else _Stored(part, whole.dtype, whole.shard,
                                                 whole.shard_number)

    def writes_whole(self, key: str, raw: np.ndarray, boxes: list[Box]) -> bool | None:
        """Whether the tensor ``key`` (``raw``, its bytes), cut into the bands ``boxes``, is
        written as one item, and why: False when every band changed
        (:meth:`_all_changed`), True when the base stores the tensor whole and every
        byte of it is equal, compared here (the item then references that block
        unless its dtype differs; :meth:`block_for` does not compare it again); None
        (in bands) otherwise."""
        if self._all_changed(key, raw, boxes):
            return False
        whole = self._stored.get((key, None))
        if whole is None or whole.block.raw_length != len(raw) \
                or not self._same_bytes(whole, raw.data):
            return None
        return True

    def _all_changed(self, key: str, raw: np.ndarray, boxes: list[Box]) -> bool:
        """Whether each band ``boxes`` of the tensor ``key`` (``raw``, its bytes) differs
        from the base's bytes in its place in its first bytes (or has none there): the
        tensor is then written whole. Only a layout is decided here; what is reused is
        decided by comparing all of a block's bytes (:meth:`block_for`)."""
        whole = self._stored.get((key, None))
        if whole is not None and whole.block.raw_length != len(raw):
            whole = None
        row_bytes = len(raw) // (boxes[-1][0][0] + boxes[-1][1][0])
        band = boxes[0][1][0] * row_bytes
        piece = min(_FIRST_PIECE, band)
        if whole is not None and whole.shard_number in self._maps:
            return self._all_firsts_differ(whole, raw, band, piece)
        for start, extent in boxes:
            first = start[0] * row_bytes
            stored = whole if whole is not None else \
                self._stored.get((key, (tuple(start), tuple(extent))))
            if stored is None:
                continue  # nothing stored in its place: written anyway
            at = first if stored is whole else 0
            new = raw[first:first + min(piece, stored.block.raw_length - at)]
            if len(new) and _equal(self._stored_bytes(stored, at, at + len(new)), new):
                return False
        return True

    def _all_firsts_differ(self, whole: _Stored, raw: np.ndarray, band: int, piece: int
                           ) -> bool:
        """Whether the first ``piece`` bytes of every band (``band`` bytes each, the last
        maybe shorter) of ``raw`` differ from those in its place in ``whole``, a mapped
        block of the same length: one array comparison for all bands."""
        mapped = self._maps[whole.shard_number]
        offset, full = whole.block.offset, len(raw) // band
        old = mapped[offset:offset + full * band].reshape(full, band)[:, :piece]
        new = raw[:full * band].reshape(full, band)[:, :piece]
        if not (old != new).any(axis=1).all():
            return False
        last = full * band  # the short last band, if any
        end = min(last + piece, len(raw))
        return last == len(raw) or not _equal(mapped[offset + last:offset + end], raw[last:end])

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
        new = np.frombuffer(raw, np.uint8)
        # A changed block stops early: most often at its first bytes (a tensor that
        # changed changed everywhere), so a small piece is compared first.
        ends = [min(_FIRST_PIECE, len(new)), *range(_COMPARE_PIECE, len(new), _COMPARE_PIECE),
                len(new)]
        return all(_equal(self._stored_bytes(stored, start, end), new[start:end])
                   for start, end in pairwise([0, *sorted(set(ends))]))

    def _stored_bytes(self, stored: _Stored, start: int, end: int) -> np.ndarray:
        """The raw bytes ``[start, end)`` of the block ``stored``: through the map of a
        local file (no copy), else read."""
        assert self._base is not None
        offset = stored.block.offset
        mapped = self._maps.get(stored.shard_number)
        if mapped is not None:
            return mapped[offset + start:offset + end]
        source = self._base.shard_input(stored.shard_number)
        return np.frombuffer(source.pread(end - start, offset + start), np.uint8)


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
