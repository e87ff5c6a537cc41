"""Reading the blocks of an open checkpoint (spec/format.md, "Chunks, codecs and checksums").

The block reader owns the shard files: it maps or reads a block's bytes,
in pieces shared with worker threads, checks every chunk's CRC-32C before
any byte of it is used [R-CRC-001], and decodes chunks with their codec
[R-CODEC-001]. It knows blocks, not keys: the tensor a block belongs to
comes with each call, to name it in errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import NamedTuple

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.errors import IntegrityError, MalformedError
from ocf.format.index.model import Block, BlockColumns, SmallPlain, TensorInfo
from ocf.format.memory import allocate
from ocf.format.reading.checks import BlockChecks
from ocf.format.storage.backend import Input
from ocf.format.storage.location import Location
from ocf.format.workers import in_turn, reader_workers

# Limit of the bytes read with one system call for a run of small tensors,
# and the size from which checksums of mapped data go to worker threads.
READ_GROUP = 8 << 20
# Runs of small tensors read together have gaps of at most this many bytes.
_RUN_GAP = 4096
# A local file's uncompressed chunks are read in pieces of this many bytes (or one
# chunk, when chunks are larger), each checksummed as soon as it is read, while it
# is still in the cache of the core that read it (L2 is 512 KiB to 2 MiB a core).
HOT_PIECE = 1 << 20


class GroupRead(NamedTuple):
    """A group of chunks being read: its checksums, computed or to come."""

    info: TensorInfo
    block: Block
    chunks: range
    crcs: list[int] | Future[list[int]]


class HeldBytes(NamedTuple):
    """Bytes of shard ``shard`` from ``offset`` on, in memory: ``data`` (mapped: the whole
    shard, whose chunks a reader checks once)."""

    shard: int
    data: memoryview
    offset: int
    mapped: bool


def runs(small: SmallPlain) -> Iterator[tuple[int, int]]:
    """Index ranges [first, last] of ``small`` read with one system call each: one
    shard, gaps of at most _RUN_GAP bytes, at most READ_GROUP bytes in all."""
    offsets, lengths, shards = small.offsets, small.raw_lengths, small.shards
    first = 0
    for i in range(1, len(offsets)):
        end = offsets[i] + lengths[i]
        if (shards[i] != shards[first] or offsets[i] - offsets[i - 1] - lengths[i - 1] > _RUN_GAP
                or end - offsets[first] > READ_GROUP):
            yield first, i - 1
            first = i
    if offsets:
        yield first, len(offsets) - 1


class BlockReader:
    """The blocks of the shard files of the checkpoint at ``path``, checked on every
    read when ``verify`` [R-CRC-001]; ``bytes_read`` counts the bytes they took."""

    def __init__(self, path: Location, verify: bool) -> None:
        self.path = path
        self.verify = verify
        self.bytes_read = 0
        self.shards: list[Input] = []
        # The chunks of mapped blocks already checked, by (shard, offset, chunk).
        self._verified: set[tuple[int, int, int]] = set()
        # The same for the block tables of sliced tensors: a flag per row of their CRCs.
        self._checked: dict[int, tuple[BlockColumns, np.ndarray]] = {}
        # Per mapped shard, all its bytes, that views are sliced from.
        self._whole_maps: dict[int, memoryview] = {}

    def add_shard(self, shard: Input) -> None:
        self.shards.append(shard)

    def detach(self) -> list[Input]:
        """Stop reading: drop the maps (a map then closes as soon as no returned view
        holds it) and hand back the shard files, for the caller to close."""
        self._whole_maps.clear()
        shards, self.shards = self.shards, []
        return shards

    @property
    def mappable(self) -> bool:
        """Whether every shard can be memory-mapped (local files)."""
        return all(shard.mappable for shard in self.shards)

    def maps(self, block: Block) -> bool:
        """Whether ``block``'s raw bytes can be mapped: stored raw, in a local file."""
        return block.compression.stores_raw and self.shards[block.shard].mappable

    def buffer(self, info: TensorInfo, nbytes: int, *, zeroed: bool = False) -> np.ndarray:
        return allocate(nbytes, np.uint8, "reading this tensor", path=self.path, key=info.key,
                        zeroed=zeroed)

    # -- mapped blocks --------------------------------------------------------

    def plain_chunk(self, shard: int, offset: int, length: int, crc: int
                    ) -> memoryview | None:
        """The mapped bytes of a one-chunk uncompressed block, checked against ``crc``
        (once per reader); None when the shard cannot be mapped, or on a mismatch,
        which the general path then reports."""
        whole = self._whole_maps.get(shard)
        if whole is None:
            if not self.shards[shard].mappable:
                return None
            whole = self._whole_maps[shard] = memoryview(self.shards[shard].mapping())
        raw = whole[offset : offset + length]
        if len(raw) != length:  # cannot happen after the checks at open; never a short view
            return None
        if self.verify and (shard, offset, 0) not in self._verified:
            if crc32c(raw) != crc:
                return None
            self._verified.add((shard, offset, 0))
        self.bytes_read += length
        return raw

    def whole_map(self, shard: int) -> memoryview:
        """All bytes of the mapped shard ``shard`` (a local file)."""
        whole = self._whole_maps.get(shard)
        if whole is None:
            whole = self._whole_maps[shard] = memoryview(self.shards[shard].mapping())
        return whole

    def checks(self, info: TensorInfo, columns: BlockColumns, blocks: np.ndarray,
               slices: np.ndarray, held: HeldBytes,
               runs: tuple[np.ndarray, np.ndarray] | None = None) -> BlockChecks:
        """The checksums of every chunk of the uncompressed ``blocks`` (rows of ``columns``
        in one shard; slices ``slices`` of ``info``, for errors), whose bytes ``held``
        holds, or only of the chunks ``runs`` gives (the first and the count of each
        block's); the chunks of a mapped shard once per reader. To run on a few blocks at
        a time (:meth:`BlockChecks.check`), each just before its bytes are copied. The
        caller counts the bytes."""
        return BlockChecks(self, info, columns, blocks, slices, held, runs)

    def checked_chunks(self, columns: BlockColumns) -> np.ndarray:
        """Which chunks of the block table ``columns`` (rows of its ``crcs``) this reader
        has checked in mapped shards."""
        kept = self._checked.get(id(columns))
        if kept is None or kept[0] is not columns:
            kept = self._checked[id(columns)] = (columns, np.zeros(len(columns.crcs), bool))
        return kept[1]

    def hold(self, info: TensorInfo, shard: int, start: int, end: int, may_map: bool
             ) -> HeldBytes:
        """Bytes ``start`` to ``end`` of shard ``shard``: mapped (the whole shard) when
        ``may_map`` and it can be, else read with one request into a new buffer."""
        if may_map and self.shards[shard].mappable:
            return HeldBytes(shard, self.whole_map(shard), 0, True)
        buffer = self.buffer(info, end - start)
        self.shards[shard].read_into(buffer.data, start)
        return HeldBytes(shard, buffer.data, start, False)

    def mapped(self, block: Block) -> np.ndarray:
        if block.raw_length == 0:
            return np.empty(0, dtype=np.uint8)
        shard = self.shards[block.shard]
        assert shard.mappable  # callers map only local files
        return np.frombuffer(shard.mapping(), dtype=np.uint8,
                             count=block.raw_length, offset=block.offset)

    def verify_mapped(self, info: TensorInfo, block: Block, chunks: Iterator[int] | range,
                      raw: np.ndarray) -> None:
        """Checksum the given chunks of a mapped block (each once per reader)."""
        wanted = list(chunks)
        self.bytes_read += sum(b - a for a, b in map(block.raw_range, wanted))
        if not self.verify:
            return
        todo = [i for i in wanted if (block.shard, block.offset, i) not in self._verified]
        view = raw.data
        if block.raw_length >= READ_GROUP and len(todo) > 1:
            crcs = reader_workers().map(lambda i: _crcs(block, view, [i])[0], todo)
        else:
            crcs = _crcs(block, view, todo)
        self._check_crcs(info, block, todo, crcs)
        self._verified.update((block.shard, block.offset, i) for i in todo)

    # -- whole blocks ---------------------------------------------------------

    def read(self, info: TensorInfo, block: Block) -> np.ndarray:
        """All raw bytes of a block, read (not mapped) into a new buffer."""
        if block.compression.stores_raw:
            out = self.buffer(info, block.raw_length)
            self.fill(info, block, out)
            return out
        # Zero-filled costs a new buffer nothing more (the system's pages are zero),
        # and the decoder then skips byte streams that are all zero.
        out = self.buffer(info, block.raw_length, zeroed=True)
        self._decode_chunks(info, block, range(block.chunk_count), out, zeroed=True)
        return out

    def fill(self, info: TensorInfo, block: Block, out: np.ndarray) -> None:
        """Read (and decode) all raw bytes of a block into ``out``, a uint8 array."""
        if block.compression.stores_raw:
            self.finish_reads(self.start_raw_read(info, block, out.data))
        else:
            self._decode_chunks(info, block, range(block.chunk_count), out)

    def chunks(self, info: TensorInfo, block: Block, chunks: list[int], mapped: bool
               ) -> np.ndarray:
        """The block's raw bytes with (at least) ``chunks`` read and checked: mapped when
        ``mapped`` and it can be, else in a zero-filled buffer, whose pages are only
        allocated once written, so that the other chunks cost nothing."""
        if mapped and self.maps(block):
            raw = self.mapped(block)
            self.verify_mapped(info, block, iter(chunks), raw)
        elif block.compression.stores_raw:  # an object: fetch only those chunks
            raw = self.buffer(info, block.raw_length, zeroed=True)
            self._read_chunks(info, block, chunks, raw.data)
        else:
            raw = self.buffer(info, block.raw_length, zeroed=True)
            self._decode_chunks(info, block, iter(chunks), raw, zeroed=True)
        return raw

    def verify_block(self, info: TensorInfo, block: Block) -> None:
        """Check the stored bytes of ``block`` against their checksums, without decoding
        or keeping them: one chunk in memory at a time, none for a mapped file."""
        if self.maps(block):
            self.verify_mapped(info, block, range(block.chunk_count), self.mapped(block))
            return
        shard = self.shards[block.shard]
        for i in range(block.chunk_count):
            start, end = block.stored_range(i)
            self.bytes_read += end - start
            self._check_crc(info, block, i, crc32c(shard.pread(end - start, start)))

    def read_run(self, small: SmallPlain, first: int, last: int,
                 info_of: Callable[[str], TensorInfo]) -> Iterator[tuple[int, np.ndarray, int]]:
        """Read tensors ``first`` to ``last`` of ``small`` with one system call into a new
        buffer; for each in turn, once checked, its number, the buffer and where in it
        the tensor starts. ``info_of`` gives the tensor of a key, for errors."""
        offsets, lengths = small.offsets, small.raw_lengths
        start = offsets[first]
        buffer = self.buffer(info_of(small.keys[first]), offsets[last] + lengths[last] - start)
        self.shards[small.shards[first]].read_into(buffer.data, start)
        self.bytes_read += buffer.size
        keys, crcs, verify = small.keys, small.crcs, self.verify
        view = buffer.data  # memoryview slices cost far less than NumPy slicing, per
        for i in range(first, last + 1):  # tensor of a run of thousands
            at = offsets[i] - start
            if verify and (crc := crc32c(view[at : at + lengths[i]])) != crcs[i]:
                info = info_of(keys[i])
                assert info.block is not None
                self._check_crc(info, info.block, 0, crc)
            yield i, buffer, at

    # -- uncompressed blocks in groups of chunks --------------------------------

    def start_raw_read(self, info: TensorInfo, block: Block, out: memoryview, *,
                       batch: bool = False) -> list[GroupRead]:
        """Start reading an uncompressed block into ``out``.

        A local file's block read alone is read now, by this thread and idle
        worker threads (:meth:`_read_local`). Otherwise (an object's block, or
        one of a ``batch`` of blocks) it is read in groups of chunks, a job
        each, on worker threads and on the caller while it waits, so that the
        groups of all blocks overlap; a block of one group is read at once on
        the calling thread.
        """
        shard = self.shards[block.shard]
        self.bytes_read += block.raw_length
        if shard.mappable and not batch:
            return [GroupRead(info, block, range(block.chunk_count),
                              self._read_local(shard, block, out))]
        per_group = max(1, shard.read_group // block.raw_chunk_size) if block.chunk_count else 1
        groups = [range(first, min(first + per_group, block.chunk_count))
                  for first in range(0, block.chunk_count, per_group)]
        if len(groups) == 1:
            return [GroupRead(info, block, groups[0],
                              self._read_group(shard, block, out, groups[0]))]
        pool = reader_workers()
        return [GroupRead(info, block, chunks,
                          pool.submit(self._read_group, shard, block, out, chunks))
                for chunks in groups]

    def read_local_blocks(self, info: TensorInfo, blocks: list[tuple[Block, memoryview]]
                          ) -> None:
        """Read uncompressed blocks of local files, each into its output, then check
        their chunks in order. The blocks are taken in turn by this thread and, for
        idle cores, by worker threads, as the pieces of one large block are
        (:meth:`_read_local`): many blocks of one chunk (the bands of a tensor) then
        read as fast as one block of their size."""
        crcs: list[list[int]] = [[] for _ in blocks]

        def read(at: int) -> None:
            block, out = blocks[at]
            crcs[at] = self._read_group(self.shards[block.shard], block, out,
                                        range(block.chunk_count))

        self.bytes_read += sum(block.raw_length for block, _ in blocks)
        reader_workers().share(in_turn(len(blocks), read), len(blocks) - 1)
        if self.verify:
            for (block, _), block_crcs in zip(blocks, crcs):
                self._check_crcs(info, block, range(block.chunk_count), block_crcs)

    def read_local_chunks(self, info: TensorInfo, reads: list[tuple[int, int, memoryview]],
                          expected: np.ndarray, block_of: Callable[[int], Block]) -> None:
        """Read uncompressed blocks of one chunk each from local files (the bands of a
        tensor): ``reads`` holds (shard, offset, output) per block, ``expected`` their
        CRC-32C, ``block_of(i)`` block ``i`` (to name it in an error). Taken in turn by
        this thread and idle workers, as :meth:`read_local_blocks` takes blocks, with
        no Block built per read and the checksums compared at once."""
        found = np.zeros(len(reads), dtype=np.int64)
        verify = self.verify

        def read(at: int) -> None:
            shard, offset, out = reads[at]
            self.shards[shard].read_into(out, offset)
            if verify:
                found[at] = crc32c(out)

        self.bytes_read += sum(len(out) for _, _, out in reads)
        reader_workers().share(in_turn(len(reads), read), len(reads) - 1)
        if verify:
            wrong = np.flatnonzero(found != expected)
            if wrong.size:
                at = int(wrong[0])
                self._check_crc(info, block_of(at), 0, int(found[at]))

    def finish_reads(self, reads: list[GroupRead]) -> None:
        """Wait for group reads and check their checksums, in order."""
        # Every read ends before any error is raised: none outlives the call (the
        # caller may close the file next). Waiting runs queued reads here when no
        # worker thread could start.
        pool = reader_workers()
        outcomes: list[list[int] | BaseException] = []
        for read in reads:
            try:
                outcomes.append(read.crcs if isinstance(read.crcs, list) else
                                pool.wait(read.crcs))
            except BaseException as exc:  # raised below, once every read has ended
                outcomes.append(exc)
        for read, crcs in zip(reads, outcomes):
            if isinstance(crcs, BaseException):
                raise crcs
            if self.verify:
                self._check_crcs(read.info, read.block, read.chunks, crcs)

    def _read_local(self, shard: Input, block: Block, out: memoryview) -> list[int]:
        """Read an uncompressed block of a local file into ``out``; the CRC-32C values of
        its chunks (none when the reader does not verify).

        The block is read in pieces of about HOT_PIECE bytes (or one chunk), each
        checksummed right after it is read, while its bytes are still in the
        cache of the core that read them: checksumming them once they have gone
        back to memory costs almost twice as much (16 MiB on the benchmark
        machine: 1.2 ms more than the read, against 2.1 ms). This thread and
        worker threads take the pieces in turn, so a worker the system does not
        run soon costs at most a piece of waiting, never half the block.
        """
        step = max(1, HOT_PIECE // block.raw_chunk_size) if block.chunk_count else 1
        pieces = [range(first, min(first + step, block.chunk_count))
                  for first in range(0, block.chunk_count, step)]
        crcs: list[list[int]] = [[] for _ in pieces]

        def read(at: int) -> None:
            crcs[at] = self._read_group(shard, block, out, pieces[at])

        reader_workers().share(in_turn(len(pieces), read), len(pieces) - 1)
        return [crc for piece in crcs for crc in piece]

    def _read_group(self, shard: Input, block: Block, out: memoryview,
                    chunks: range) -> list[int]:
        """Read ``chunks`` of an uncompressed block into ``out``; their CRC-32C values,
        or none when the reader does not verify. A local file is read in pieces of
        HOT_PIECE bytes (or one chunk), each checksummed while in cache; an object
        with one ranged GET."""
        step = max(1, HOT_PIECE // block.raw_chunk_size) if shard.mappable else len(chunks)
        crcs: list[int] = []
        for first in range(chunks.start, chunks.stop, step):
            piece = range(first, min(first + step, chunks.stop))
            start, end = block.raw_range(piece[0])[0], block.raw_range(piece[-1])[1]
            shard.read_into(out[start:end], block.offset + start)
            if self.verify:
                crcs += _crcs(block, out, piece)
        return crcs

    def _read_chunks(self, info: TensorInfo, block: Block, chunks: list[int],
                     out: memoryview) -> None:
        """Read and check the given chunks of an uncompressed block into ``out``, one
        read per run of consecutive chunks (ranged GETs of an object, in parallel)."""
        groups: list[range] = []
        for i in chunks:
            if groups and groups[-1].stop == i:
                groups[-1] = range(groups[-1].start, i + 1)
            else:
                groups.append(range(i, i + 1))
        shard = self.shards[block.shard]
        self.bytes_read += sum(b - a for a, b in map(block.raw_range, chunks))
        pool = reader_workers()
        self.finish_reads([GroupRead(info, block, group,
                                     pool.submit(self._read_group, shard, block, out, group))
                           for group in groups])

    # -- encoded blocks ---------------------------------------------------------

    def _decode_chunks(self, info: TensorInfo, block: Block, chunks: Iterator[int] | range,
                       out: np.ndarray, *, zeroed: bool = False) -> None:
        """Read, check and decode the given chunks of an encoded block into ``out``
        (``zeroed``: known to hold zeros)."""
        shard = self.shards[block.shard]
        itemsize = info.dtype.itemsize if block.byte_shuffle else 1

        def decode(i: int) -> None:
            start, end = block.stored_range(i)
            stored = shard.pread(end - start, start)
            if self.verify:
                self._check_crc(info, block, i, crc32c(stored))
            a, b = block.raw_range(i)
            try:
                block.compression.decode_into(stored, out[a:b], itemsize, zeroed=zeroed)
            except MalformedError as exc:
                raise MalformedError(f"chunk {i}: {exc.detail}", path=self.path, key=info.key,
                                     requirement=exc.requirement) from None

        todo = list(chunks)
        self.bytes_read += sum(end - start for start, end in map(block.stored_range, todo))
        # Taken in turn by this thread and idle workers: one job per worker, not a future
        # per chunk, so that a process short of memory still reads (on this thread alone).
        reader_workers().share(in_turn(len(todo), lambda at: decode(todo[at])), len(todo) - 1)

    # -- checksums ----------------------------------------------------------------

    def _check_crcs(self, info: TensorInfo, block: Block, chunks: Sequence[int],
                    crcs: list[int]) -> None:
        for i, crc in zip(chunks, crcs):
            self._check_crc(info, block, i, crc)

    def _check_crc(self, info: TensorInfo, block: Block, chunk: int, crc: int) -> None:
        if crc != block.chunk_crcs[chunk]:
            # By value: some paths (bands read whole) read fresh copies of the table's rows.
            piece = next((f"slice {i}, " for i, p in enumerate(info.slices) if p.block == block),
                         "")
            raise IntegrityError(
                f"{piece}chunk {chunk} (bytes {'...'.join(map(str, block.stored_range(chunk)))} of "
                f"{self.shards[block.shard].path.name}) "
                f"has CRC-32C {crc:#010x}, the index says {block.chunk_crcs[chunk]:#010x}",
                path=self.path, key=info.key, requirement="R-CRC-001")


def _crcs(block: Block, out: memoryview, chunks: Sequence[int]) -> list[int]:
    return [crc32c(out[a:b]) for a, b in map(block.raw_range, chunks)]

