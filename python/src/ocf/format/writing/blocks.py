"""Writing write items as blocks (spec/format.md, "Data region" and "Chunks").

The one emitter of a writer's bytes: each block starts on a 64-byte
boundary [R-DATA-001] in the file its committer gives it, and is
checksummed per chunk [R-CRC-001], compressed on worker threads when the
codec compresses. Small uncompressed blocks are batched: gathered a few MiB
at a time and written with one call, their offsets computed together and
their index rows added as columns. A batch writes exactly the bytes one
block at a time would, so every write path gives the same file.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.codecs.base import Codec
from ocf.format.container import ALIGNMENT, padding
from ocf.format.index.encoding import TableBuilder
from ocf.format.index.model import Block
from ocf.format.slicing import Box
from ocf.format.storage.backend import Output
from ocf.format.writing.committers import Committer
from ocf.format.writing.items import Item
from ocf.format.writing.tiles import TileRun

# Blocks at least this large are checksummed on a worker thread while the main
# thread writes them.
_PARALLEL_CRC = 4 << 20
# Small blocks are gathered up to about this many bytes and written together: few
# system calls, and memory stays bounded.
_BATCH_BYTES = 4 << 20
_ZEROS = memoryview(bytes(ALIGNMENT))
# An incremental write looks up (compares with stored bytes) about this many bytes of
# items a job: few jobs, and the writes wait for little.
_LOOKUP_BYTES = 4 << 20

# What a lookup found for an item: a function that, called on the writing thread in
# order, gives the stored block it reuses, or None to write it after all.
Found = Callable[[], Block | None]


class BlockEmitter:
    """Writes items as the next blocks of ``committer``'s files and adds them to
    ``table``; ``threads`` worker threads checksum and encode. ``reuse`` (an
    incremental write, ocf.format.writing.pooled), called on a worker thread, tells
    whether an item's bytes are stored already: it gives then a function that, called
    on the writing thread, returns the stored block, and the item is not written (or
    None, when reusing them is not worth it after all: the item is written)."""

    def __init__(self, committer: Committer, table: TableBuilder, codec: Codec, level: int,
                 byte_shuffle: bool, chunk_size: int, threads: int,
                 reuse: Callable[[Item], Found | None] | None = None
                 ) -> None:
        self._committer, self._table = committer, table
        self._reuse = reuse
        self._codec, self._level, self._byte_shuffle = codec, level, byte_shuffle
        self._chunk_size = chunk_size
        self._threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads)

    def emit(self, items: Iterable[Item | TileRun], chunk_size: int | None = None) -> None:
        """Write ``items`` in order, their blocks in chunks of ``chunk_size`` bytes (None:
        the emitter's). When taking the next item raises (it failed its checks), the
        items before it are written before the error propagates."""
        chunk = chunk_size or self._chunk_size
        batch: list[Item] = []
        gathered = 0
        try:
            for item, found in self._looked_up(items):
                if isinstance(item, TileRun):
                    self._write_batch(batch)
                    gathered = 0
                    self._write_tiles(item, chunk)
                    continue
                reused = found() if found is not None else None
                if reused is not None:  # already in the pool: nothing to write
                    self._table.add_block(item.row, reused, item.box)
                    continue
                size = chunk if item.chunk_size is None else item.chunk_size
                if not self._batches(item, size):  # after the blocks gathered before it
                    self._write_batch(batch)
                    gathered = 0
                    self._table.add_block(item.row, self._store(item, size), item.box)
                    continue
                batch.append(item)
                gathered += len(item.raw)
                if gathered >= _BATCH_BYTES:
                    self._write_batch(batch)
                    gathered = 0
        finally:
            self._write_batch(batch)

    def _looked_up(self, items: Iterable[Item | TileRun]
                   ) -> Iterator[tuple[Item | TileRun, Found | None]]:
        """Each item with what ``reuse`` found for it (None: write it). The lookups (byte
        comparisons) run on the worker threads, a group of items of about _LOOKUP_BYTES
        a job, a few groups ahead of the writes, which they then overlap; an item
        already found changed (``Item.same_as_base`` False) is not looked up. When taking
        the next item raises, the items before it come first; no lookup outlives the
        generator (the caller may then close what they read)."""
        if self._reuse is None:
            yield from ((item, None) for item in items)
            return
        window: deque[tuple[list[Item], Future[list[Found | None]]]] = deque()
        group: list[Item] = []
        gathered = 0
        try:
            try:
                for item in items:
                    # Tiles are never reused; nor is an item already found changed.
                    if isinstance(item, TileRun) or item.same_as_base is False:
                        self._look_up(group, window)
                        group, gathered = [], 0
                        while window:
                            yield from _oldest(window)
                        yield item, None
                        continue
                    group.append(item)
                    gathered += len(item.raw)
                    if gathered >= _LOOKUP_BYTES:
                        self._look_up(group, window)
                        group, gathered = [], 0
                        if len(window) > self._threads:
                            yield from _oldest(window)
            except Exception:
                self._look_up(group, window)
                while window:
                    yield from _oldest(window)
                raise
            self._look_up(group, window)
            while window:
                yield from _oldest(window)
        finally:
            for _, pending in window:
                pending.cancel()
            wait([pending for _, pending in window])

    def _look_up(self, group: list[Item], window: deque[tuple[
            list[Item], Future[list[Found | None]]]]) -> None:
        reuse = self._reuse
        assert reuse is not None
        if group:
            window.append((group, self._pool.submit(lambda: [reuse(item) for item in group])))

    def close(self, *, cancel: bool = False) -> None:
        self._pool.shutdown(cancel_futures=cancel)

    # -- batches of small blocks ----------------------------------------------

    def _batches(self, item: Item, chunk_size: int) -> bool:
        """Whether ``item`` is written in a batch: uncompressed, one chunk, not empty."""
        return self._codec.stores_raw and 0 < len(item.raw) <= chunk_size

    def _write_batch(self, batch: list[Item]) -> None:
        """Write the items of ``batch`` as the next blocks, each of one uncompressed chunk,
        a shard at a time, and empty it (first: a failed write is not tried again)."""
        items = batch.copy()
        batch.clear()
        first = 0
        while first < len(items):
            first = self._write_run(items, first)

    def _write_run(self, items: list[Item], first: int) -> int:
        """Write the items from ``first`` on that fit in the shard the first goes to (one
        at least), side by side at 64-byte boundaries; the index of the first not
        written. Offsets and shards are those one :meth:`_store` each would give."""
        output = self._committer.output_for(len(items[first].raw))
        output.align()
        limit = self._committer.shard_limit
        position = output.position
        buffers: list[memoryview] = []
        raws: list[memoryview] = []
        rows: list[int] = []
        offsets: list[int] = []
        sizes: list[int] = []
        boxes: list[Box | None] = []
        for item in itertools.islice(items, first, None):
            size = len(item.raw)
            offset = position + padding(position)
            if rows and offset + size > limit:
                break
            if offset > position:
                buffers.append(_ZEROS[: offset - position])
            buffers.append(item.raw)
            raws.append(item.raw)
            rows.append(item.row)
            offsets.append(offset)
            sizes.append(size)
            boxes.append(item.box)
            position = offset + size
        # A batch of megabytes (the bands of an incremental write) is checksummed on a
        # worker thread while this one writes it, as a large block is.
        pending = self._pool.submit(_checksums, raws) \
            if position - offsets[0] >= _PARALLEL_CRC else None
        crcs = _checksums(raws) if pending is None else []
        if len(buffers) == 1:  # write() gathers small writes (a write() call a tensor)
            output.write(buffers[0])
        else:
            output.write_many(buffers)
        crcs = crcs if pending is None else pending.result()
        self._table.add_plain_blocks(rows, self._committer.shard, offsets, sizes, crcs, boxes)
        return first + len(rows)

    # -- runs of tiles ----------------------------------------------------------

    def _write_tiles(self, run: TileRun, chunk_size: int) -> None:
        """Write the tiles of ``run`` as the next blocks, one after the other at 64-byte
        boundaries, as many at a time as fit in the shard: the bytes and index rows
        one block each would give, with no Python object per tile. Compressed tiles
        are encoded one at a time."""
        size = run.tile_size
        if not self._codec.stores_raw:
            for i in range(len(run)):
                box = (tuple(run.starts[i].tolist()), tuple(run.extents[i].tolist()))
                item = Item(run.row, run.dtype, run.data[i * size : (i + 1) * size], box)
                self._table.add_block(run.row, self._store(item, chunk_size), box)
            return
        stride = size + padding(size)
        chunk_size = chunk_size if size > chunk_size else 0
        first = 0
        while first < len(run):
            output = self._committer.output_for(size)
            output.align()
            position, limit = output.position, self._committer.shard_limit
            fit = len(run) - first
            if limit - position - size < (fit - 1) * stride:  # fewer fit: at least one
                fit = max(1, (limit - position - size) // stride + 1)
            tiles = run.data[first * size : (first + fit) * size]
            checksums = self._tile_checksums(tiles, size, chunk_size)
            output.write_many(_spaced(tiles, size, stride))
            offsets = position + stride * np.arange(fit, dtype=np.int64)
            self._table.add_tile_blocks(run.row, self._committer.shard, offsets, size,
                                        chunk_size, checksums.result(),
                                        run.starts[first : first + fit],
                                        run.extents[first : first + fit])
            first += fit

    def _tile_checksums(self, tiles: memoryview, size: int, chunk_size: int
                        ) -> Future[list[int]]:
        """The CRC-32C of every chunk of every tile of ``tiles`` (each ``size`` bytes),
        on a worker thread, while this one writes them."""
        step = chunk_size or size

        def checksums() -> list[int]:
            if size % step == 0:  # chunks tile the tiles: rows of one array (thousands)
                return list(map(crc32c, np.ndarray((len(tiles) // step, step), np.uint8,
                                                   tiles)))
            return [crc32c(tiles[a : a + min(step, size - (a % size))])
                    for t in range(0, len(tiles), size) for a in range(t, t + size, step)]

        return self._pool.submit(checksums)

    # -- one block at a time ----------------------------------------------------

    def _store(self, item: Item, chunk_size: int) -> Block:
        """Write ``item`` as the next block, in chunks of ``chunk_size`` bytes: empty,
        chunked, or encoded."""
        raw = item.raw
        size = len(raw)
        output = self._committer.output_for(size)
        output.align()
        shard, offset, codec = self._committer.shard, output.position, self._codec
        if not size:
            return Block(shard, offset, 0, 0, codec, False, 0, [], [])
        chunk_size = chunk_size if size > chunk_size else 0
        ranges = [(0, size)] if not chunk_size else [
            (s, min(s + chunk_size, size)) for s in range(0, size, chunk_size)]
        if codec.stores_raw:
            crcs = self._write_raw(output, raw, ranges)
            return Block(shard, offset, size, size, codec, False, chunk_size, crcs, [])
        shuffle = self._byte_shuffle and item.dtype.itemsize > 1
        crcs, starts = [], [offset]
        for stored, crc in self._encoded(raw, ranges, item.dtype.itemsize if shuffle else 1):
            crcs.append(crc)
            starts.append(starts[-1] + len(stored))
            output.write(stored)
        return Block(shard, offset, starts[-1] - offset, size, codec, shuffle, chunk_size,
                     crcs, starts)

    def _write_raw(self, output: Output, raw: memoryview, ranges: list[tuple[int, int]]
                   ) -> list[int]:
        """Write ``raw`` as it is; the CRC-32C of its chunks ``ranges``."""
        def checksums() -> list[int]:
            return [crc32c(raw[a:b]) for a, b in ranges]

        if len(raw) < _PARALLEL_CRC:
            crcs = checksums()
            output.write(raw)
            return crcs
        pending = self._pool.submit(checksums)
        output.write(raw)
        return pending.result()

    def _encoded(self, raw: memoryview, ranges: list[tuple[int, int]], itemsize: int
                 ) -> Iterator[tuple[memoryview | bytes, int]]:
        """Encoded chunks and their CRC-32C in order, at most a few in flight so memory
        stays bounded. Each is encoded and checksummed on a worker thread, leaving this
        one only the writes."""
        window: deque[Future[tuple[memoryview | bytes, int]]] = deque()
        for a, b in ranges:
            window.append(self._pool.submit(self._encode_chunk, raw[a:b], itemsize))
            if len(window) > 2 * self._threads:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()

    def _encode_chunk(self, raw: memoryview, itemsize: int) -> tuple[memoryview | bytes, int]:
        stored = self._codec.encode(raw, self._level, itemsize)
        return stored, crc32c(stored)


def _checksums(buffers: list[memoryview]) -> list[int]:
    """The CRC-32C of each buffer of ``buffers``."""
    return [crc32c(buffer) for buffer in buffers]


def _oldest(window: deque[tuple[list[Item], Future[list[Found | None]]]]
            ) -> Iterator[tuple[Item, Found | None]]:
    """The items of the oldest group of ``window`` with their lookups."""
    group, pending = window.popleft()
    yield from zip(group, pending.result())


def _spaced(tiles: memoryview, size: int, stride: int) -> list[memoryview]:
    """The tiles of ``tiles`` (``size`` bytes each), each followed by the zeros that
    bring it to ``stride`` bytes, but the last: one buffer when there are no zeros."""
    if stride == size:
        return [tiles]
    gap = _ZEROS[: stride - size]
    buffers: list[memoryview] = []
    for at in range(0, len(tiles), size):
        buffers += [tiles[at : at + size], gap]
    return buffers[:-1]
