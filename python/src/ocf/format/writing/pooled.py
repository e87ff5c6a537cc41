"""Writing a checkpoint whose blocks live in the pool of its managed root
(spec/pool.md, spec/commit.md "The pool of a managed root").

An incremental write stores the index as a single file at its target, with
an empty data region, and every block in pool objects: the blocks whose
bytes a base checkpoint of the same root already holds are referenced where
they are, the others are written to new pool objects of this write. A
block is reused only when its bytes equal the stored ones, compared byte
for byte (read through the base's memory map, a megabyte at a time, so
that a changed block is told early); CRCs are never taken as evidence
[R-COMMIT-007]. Large tensors are stored as bands of rows (slices),
so that a change in one row rewrites one band and not the whole tensor.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path

import numpy as np

from ocf.format import dtypes
from ocf.format.container import INDEX_FILE_NAME, PREAMBLE_SIZE, padding
from ocf.format.errors import InvalidError
from ocf.format.index.model import Block, Shard
from ocf.format.pool import (
    POOL_FEATURE,
    managed_root,
    pool_directory,
    pool_object_name,
)
from ocf.format.reader import Reader
from ocf.format.slicing import Box
from ocf.format.storage.backend import Backend, Output
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
# A new pool object takes blocks up to about this many bytes, then the next one: each
# finished object is hashed and made durable on a worker thread while the following
# ones are written, and an object stays in the pool only while one of its blocks is
# current, so smaller objects also free the disk sooner.
POOL_OBJECT_BYTES = 32 << 20
# Bytes of a pool object read back and hashed at a time: a piece stays in the cache of
# the core that hashes it.
_HASH_PIECE = 1 << 20
# Threads that hash and sync finished pool objects.
_FINISHERS = 2
# Bytes compared at a time when a block's bytes are checked against the stored ones:
# small enough that a changed block is told after little work, large enough that
# the per-piece cost is nothing.
_COMPARE_PIECE = 1 << 20
# The first piece compared: a changed block most often differs in it.
_FIRST_PIECE = 4096


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


def _identity_then_durable(output: Output) -> bytes:
    """The SHA-256 of the finished pool object ``output`` [R-POOL-004], read back from
    its file (the page cache: what was just written), after which the file is made
    durable. Run on a worker thread: hashing is what an incremental save pays that
    a full save does not, and it overlaps the writes of the next objects and the
    disk writing this one back."""
    digest = hashlib.sha256()
    with open(os.fspath(output.path), "rb", buffering=0) as file:
        buffer = bytearray(_HASH_PIECE)
        view = memoryview(buffer)
        left = output.position  # the object's length: every byte has been handed over
        while left:
            got = file.readinto(view[:min(left, _HASH_PIECE)])
            if not got:
                raise InvalidError("a new pool object is shorter than the bytes written "
                                   "to it", path=output.path)
            digest.update(view[:got])
            left -= got
    output.close_durably()
    return digest.digest()


@dataclass(frozen=True)
class _Stored:
    """A block of the base checkpoint that a block of this write may reuse."""

    block: Block
    dtype: dtypes.Dtype
    shard: Shard
    shard_number: int


class PoolCommitter(Committer):
    """The files of an incremental write: new pool objects of at most
    ``max_shard_size`` bytes (and about POOL_OBJECT_BYTES) in the pool directory,
    and the index file at ``target`` (its data region empty), published last
    [R-COMMIT-001]. Each finished object is hashed and fsynced on a worker thread."""

    def __init__(self, storage: Backend, target: Location, write_id: str,
                 max_shard_size: int) -> None:
        super().__init__(storage, target, write_id)
        self.shard_limit = min(max_shard_size, POOL_OBJECT_BYTES)
        self.created_directory = storage.prepare_target(target, "file")
        self.pool = pool_directory(target)  # the directory of the index file is the root
        _make_pool_directory(storage, self.pool)
        # The shards of the new index in order: pool objects of the base, by name, and
        # this write's new objects.
        self._listed: list[Shard | Output] = []
        self._numbers: dict[str, int] = {}
        self._finishers = ThreadPoolExecutor(max_workers=_FINISHERS)
        self._digests: dict[str, Future[bytes]] = {}  # of the finished new objects
        self._closed = 0  # the outputs before this one are finished and take no more blocks

    @property
    def shard(self) -> int:
        return self._numbers[self._outputs[-1].final.name]

    def output_for(self, size: int) -> Output:
        last = self._outputs[-1] if len(self._outputs) > self._closed else None
        if last is None or (last.position > PREAMBLE_SIZE and last.position
                            + padding(last.position) + size > self.shard_limit):
            self._finish_outputs()
            name = pool_object_name(self.write_id, len(self._outputs))
            created = self.storage.create_output(self.pool / name, None)  # O_EXCL, fresh
            self._outputs.append(created)
            self._numbers[name] = len(self._listed)
            self._listed.append(created)
            return created
        return last

    def _finish_outputs(self) -> None:
        """Hand the objects that take no more blocks to the finishing threads."""
        for output in self._outputs[self._closed:]:
            output.flush()  # every byte in the file before another thread reads it
            self._digests[output.final.name] = self._finishers.submit(
                _identity_then_durable, output)
        self._closed = len(self._outputs)

    def reference(self, shard: Shard) -> int:
        """The number, in the new index, of the base's pool object ``shard``."""
        number = self._numbers.get(shard.path)
        if number is None:
            number = self._numbers[shard.path] = len(self._listed)
            self._listed.append(shard)
        return number

    def commit(self, index: index_pb2.Index, name: str) -> None:
        """Sync the new pool objects and the pool directory, list every pool object
        with its SHA-256, then publish the index file [R-COMMIT-007]."""
        self.close_shards()
        if self._outputs:
            self.storage.sync_directory(self.pool)
        for entry in self._listed:
            if isinstance(entry, Shard):
                index.shards.add(path=entry.path, length=entry.length,
                                 pool_sha256=entry.pool_sha256)
            else:
                index.shards.add(path=entry.final.name, length=entry.position,
                                 pool_sha256=self._digests[entry.final.name].result())
        if self._listed:
            index.header.required_features.append(POOL_FEATURE)
        index_bytes = self._index_bytes(index)
        index_file = self.storage.create_output(self.target, self.write_id)
        self._outputs = [index_file]
        self._write_index(index_file, index_bytes)
        index_file.publish()
        self._outputs.clear()
        remove_temporaries_of(self.storage, self.target)
        self._finishers.shutdown()

    def close_shards(self) -> None:
        """Make the pool objects written so far durable (and hashed); later blocks go
        to new ones."""
        self._finish_outputs()
        for digest in self._digests.values():
            digest.result()

    def abort(self) -> None:
        self._finishers.shutdown()  # no thread still reads or syncs an object
        super().abort()


def _make_pool_directory(storage: Backend, pool: Location) -> None:
    """Create the pool directory, durably, when it does not exist [R-COMMIT-007]."""
    if isinstance(pool, Path):
        mode = _lstat_mode(pool)
        if stat.S_ISDIR(mode):
            return  # made durable by the write that created it
        if mode:  # never written through [R-POOL-003]
            raise InvalidError("the pool's name in the managed root is taken by a file "
                               "that is not a directory (or a symbolic link)", path=pool)
    storage.make_directory(pool)  # durable, with its name in the root


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return 0


class Reuse:
    """Finds, for each block to write, equal bytes the base checkpoint stores in the
    pool; ``committer`` lists the pool objects it reuses."""

    def __init__(self, base: Reader | None, tensors: Tensors, committer: PoolCommitter
                 ) -> None:
        self._base, self._tensors, self._committer = base, tensors, committer
        self._stored: dict[tuple[str, Box | None], _Stored] = {}
        self._maps: dict[int, np.ndarray] = {}  # the base's pool objects, mapped
        if base is None:
            return
        for key, info in base.index.tensors.items():
            placed = [(None, info.block)] if info.block is not None else [
                ((tuple(s.start), tuple(s.extent)), s.block) for s in info.slices]
            for box, block in placed:
                shard = base.index.shards[block.shard]
                if shard.pool_sha256 and block.compression.stores_raw and block.raw_length:
                    self._stored[(key, box)] = _Stored(block, info.dtype, shard, block.shard)
        # Mapped here, once, not by the threads that compare.
        for number in {stored.shard_number for stored in self._stored.values()}:
            source = base.shard_input(number)
            if source.mappable:
                self._maps[number] = np.frombuffer(source.mapping(), np.uint8)

    def block_for(self, item: Item) -> Callable[[], Block] | None:
        """None unless the base stores exactly ``item``'s bytes; else a function giving
        the block of the new index that references them. Safe on any thread (it only
        compares bytes); the function is called on the writing thread, in order."""
        key = self._tensors.table.keys[item.row]
        box = None if item.box is None else (tuple(item.box[0]), tuple(item.box[1]))
        stored = self._stored.get((key, box))
        if stored is None or stored.dtype != item.dtype \
                or stored.block.raw_length != len(item.raw):
            return None
        if not self._same_bytes(stored, item.raw):
            return None
        return partial(self._reference, stored)

    def _reference(self, stored: _Stored) -> Block:
        """The block of the new index for the bytes of ``stored``: the same place, in the
        base's pool object, listed in the new index; the bytes are the stored ones, so
        are their chunk CRCs."""
        old = stored.block
        return Block(self._committer.reference(stored.shard), old.offset, old.stored_length,
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


def pooled_committer(layout: str, storage: Backend, target: Location, write_id: str,
                     max_shard_size: int) -> PoolCommitter:
    """The committer of an incremental write: the single-file form, on a local path,
    whose directory is the managed root."""
    if layout != "file" or not isinstance(target, Path) or target.name == INDEX_FILE_NAME:
        raise InvalidError("an incremental write stores a single index file (layout "
                           "'file', not named index.ocf) on a local path, beside the pool "
                           "of its directory", path=target)
    return PoolCommitter(storage, target, write_id, max_shard_size)


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
