"""The LevelDB-style SSTable that holds a TensorFlow bundle index (``PREFIX.index``).

Layout (TensorFlow's table_format.txt, LevelDB's table format without filter
blocks), all integers little-endian:

    data block 0 .. data block n-1   sorted (key, value) entries
    metaindex block                  always empty in TensorFlow's tables
    index block                      one entry per data block: a separator
                                     key >= every key of the block and < the
                                     next block's first key -> BlockHandle
    footer (48 bytes)                metaindex handle, index handle (varint64
                                     offset, varint64 size each), zero
                                     padding to 40 bytes, magic as two fixed32

Each block is ``contents[size] type:u8 crc:fixed32`` where the handle's size
excludes the 5-byte trailer, ``type`` is 0 (raw) or 1 (raw Snappy block) and
``crc`` is the masked CRC-32C of contents and type. Block contents are
prefix-compressed entries ``varint32 shared, varint32 non_shared, varint32
value_len, key[shared:], value`` followed by ``fixed32 restarts[n],
fixed32 n``; at a restart offset an entry stores its whole key (shared = 0).

The reader validates every offset, length and count against the bytes that
exist before slicing, and bounds the memory that prefix-compressed keys can
expand to. The builder writes what TensorFlow writes: 256 KiB data blocks,
restart interval 16 in data blocks and 1 in the index block, no compression.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from ocf.format.errors import LimitExceededError, MalformedError
from ocf.interop.tensorflow import snappy
from ocf.interop.tensorflow.encoding import (
    Path,
    check_masked_crc,
    decode_varint,
    encode_varint,
    fixed32,
    masked_crc32c,
    put_fixed32,
)

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
BLOCK_SIZE = 262144
DATA_RESTART_INTERVAL = 16
TYPE_RAW, TYPE_SNAPPY = 0, 1
# A key longer than this is refused: TensorFlow keys are object paths of at
# most a few hundred bytes (slice keys add ~20 bytes per dimension).
MAX_KEY_BYTES = 1 << 16
# Prefix compression lets a few stored bytes name a long key again and
# again; the keys of one table may expand to at most this multiple of the
# file size (plus a constant) before the reader refuses the file.
MAX_KEY_EXPANSION = 32
KEY_BUDGET_SLACK = 16 << 20

Entry = tuple[bytes, bytes]


@dataclass(frozen=True)
class BlockHandle:
    """Where a block's contents are: ``size`` bytes at ``offset`` (trailer excluded)."""

    offset: int
    size: int

    def encode(self) -> bytes:
        return encode_varint(self.offset) + encode_varint(self.size)


def decode_handle(
    data: bytes | memoryview, pos: int, end: int, path: Path
) -> tuple[BlockHandle, int]:
    offset, pos = decode_varint(data, pos, end, path=path, what="block handle offset")
    size, pos = decode_varint(data, pos, end, path=path, what="block handle size")
    return BlockHandle(offset, size), pos


# Reading.


@dataclass
class _KeyBudget:
    """How many more key bytes the reader may materialise for this table."""

    remaining: int
    path: Path

    def spend(self, n: int) -> None:
        self.remaining -= n
        if self.remaining < 0:
            raise LimitExceededError(
                "prefix-compressed keys expand beyond "
                f"{MAX_KEY_EXPANSION}x the index size; refusing the index",
                path=self.path,
            )


def read_table(data: bytes, *, path: Path = None, verify: bool = True) -> list[Entry]:
    """Every (key, value) of the table in ``data``, in order; keys strictly increase."""
    if len(data) < FOOTER_SIZE:
        raise MalformedError(
            f"file is too short to be an sstable ({len(data)} bytes, footer is {FOOTER_SIZE})",
            path=path,
        )
    footer_at = len(data) - FOOTER_SIZE
    footer = memoryview(data)[footer_at:]
    magic = fixed32(footer, 40) | fixed32(footer, 44) << 32
    if magic != MAGIC:
        raise MalformedError(f"not an sstable (bad magic number {magic:#018x})", path=path)
    metaindex, pos = decode_handle(footer, 0, 40, path)
    index, _ = decode_handle(footer, pos, 40, path)
    budget = _KeyBudget(MAX_KEY_EXPANSION * len(data) + KEY_BUDGET_SLACK, path)
    parse_block(read_block(data, metaindex, footer_at, path, verify, "metaindex"), path, budget)
    entries: list[Entry] = []
    previous: bytes | None = None
    index_block = read_block(data, index, footer_at, path, verify, "index")
    for separator, value in parse_block(index_block, path, budget):
        handle, used = decode_handle(value, 0, len(value), path)
        if used != len(value):
            raise MalformedError("index block value has bytes after its block handle", path=path)
        block = read_block(data, handle, footer_at, path, verify, "data")
        for key, val in parse_block(block, path, budget):
            if previous is not None and key <= previous:
                raise MalformedError(f"keys out of order: {key!r} after {previous!r}", path=path)
            if key > separator:
                raise MalformedError(
                    f"key {key!r} is beyond its index separator {separator!r}", path=path
                )
            entries.append((key, val))
            previous = key
    return entries


def read_block(
    data: bytes, handle: BlockHandle, limit: int, path: Path, verify: bool, what: str
) -> bytes:
    """The (decompressed) contents of the block at ``handle``, which must end before ``limit``."""
    end = handle.offset + handle.size + BLOCK_TRAILER_SIZE
    if end > limit:
        raise MalformedError(
            f"{what} block at offset {handle.offset} of {handle.size} bytes runs past "
            f"the end of the table ({limit} bytes before the footer)",
            path=path,
        )
    contents = data[handle.offset : handle.offset + handle.size]
    block_type = data[handle.offset + handle.size]
    if verify:
        check_masked_crc(fixed32(data, handle.offset + handle.size + 1),
                         masked_crc32c(data[handle.offset : handle.offset + handle.size + 1]),
                         path, what=f"{what} block at offset {handle.offset}: ")
    if block_type == TYPE_RAW:
        return contents
    if block_type == TYPE_SNAPPY:
        return snappy.decompress(contents, path=path)
    raise MalformedError(
        f"{what} block at offset {handle.offset} has unknown compression type {block_type}",
        path=path,
    )


def parse_block(block: bytes, path: Path, budget: _KeyBudget | None = None) -> list[Entry]:
    """The entries of one block's contents, with its restart array checked."""
    restarts_at, restarts = _restart_array(block, path)
    starts: set[int] = set()
    entries: list[Entry] = []
    key = b""
    pos = 0
    while pos < restarts_at:
        starts.add(pos)
        shared, key, value, next_pos = _entry(block, pos, restarts_at, key, path)
        if pos in restarts and shared != 0:
            raise MalformedError(f"block entry at restart offset {pos} shares a prefix", path=path)
        if budget is not None:
            budget.spend(len(key))
        entries.append((key, value))
        pos = next_pos
    if not entries:
        if restarts != {0}:
            raise MalformedError("empty block must have the single restart offset 0", path=path)
    elif not restarts <= starts or 0 not in restarts:
        raise MalformedError("block restart offsets do not point at entries", path=path)
    return entries


def _restart_array(block: bytes, path: Path) -> tuple[int, set[int]]:
    """The offset where the restart array starts and the restart offsets."""
    if len(block) < 4:
        raise MalformedError(f"block of {len(block)} bytes is too short for its trailer", path=path)
    count = fixed32(block, len(block) - 4)
    if count == 0 or count > (len(block) - 4) // 4:
        raise MalformedError(
            f"block of {len(block)} bytes claims {count} restart points", path=path
        )
    restarts_at = len(block) - 4 - 4 * count
    offsets = [fixed32(block, restarts_at + 4 * i) for i in range(count)]
    if any(b <= a for a, b in pairwise(offsets)):
        raise MalformedError("block restart offsets are not increasing", path=path)
    if offsets[-1] > restarts_at or (offsets[-1] == restarts_at and restarts_at > 0):
        raise MalformedError(
            f"block restart offset {offsets[-1]} is outside the entries (0..{restarts_at})",
            path=path,
        )
    return restarts_at, set(offsets)


def _entry(
    block: bytes, pos: int, end: int, previous: bytes, path: Path
) -> tuple[int, bytes, bytes, int]:
    """One entry at ``pos``: (shared length, key, value, next entry's offset)."""
    shared, pos = decode_varint(block, pos, end, bits=32, path=path, what="shared key length")
    unshared, pos = decode_varint(block, pos, end, bits=32, path=path, what="key length")
    value_len, pos = decode_varint(block, pos, end, bits=32, path=path, what="value length")
    if shared > len(previous):
        raise MalformedError(
            f"block entry shares {shared} bytes with a key of {len(previous)} bytes", path=path
        )
    if unshared + value_len > end - pos:
        raise MalformedError(
            f"block entry at byte {pos} of {unshared + value_len} bytes runs past the entries",
            path=path,
        )
    if shared + unshared > MAX_KEY_BYTES:
        raise LimitExceededError(
            f"key of {shared + unshared} bytes exceeds the limit of {MAX_KEY_BYTES}", path=path
        )
    key = previous[:shared] + block[pos : pos + unshared]
    pos += unshared
    return shared, key, block[pos : pos + value_len], pos + value_len


# Writing.


class BlockBuilder:
    """Builds one block's contents: prefix-compressed entries and restart array."""

    def __init__(self, restart_interval: int) -> None:
        self._interval = restart_interval
        self._buffer = bytearray()
        self._restarts = [0]
        self._counter = 0
        self._last = b""

    @property
    def empty(self) -> bool:
        return not self._buffer

    def size_estimate(self) -> int:
        return len(self._buffer) + 4 * len(self._restarts) + 4

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self._counter < self._interval:
            limit = min(len(key), len(self._last))
            while shared < limit and key[shared] == self._last[shared]:
                shared += 1
        else:
            self._restarts.append(len(self._buffer))
            self._counter = 0
        self._buffer += encode_varint(shared) + encode_varint(len(key) - shared)
        self._buffer += encode_varint(len(value)) + key[shared:] + value
        self._last = key
        self._counter += 1

    def finish(self) -> bytes:
        return (
            bytes(self._buffer)
            + b"".join(put_fixed32(r) for r in self._restarts)
            + put_fixed32(len(self._restarts))
        )


def shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key k with start <= k < limit (LevelDB's bytewise FindShortestSeparator)."""
    common = 0
    while common < min(len(start), len(limit)) and start[common] == limit[common]:
        common += 1
    if common < min(len(start), len(limit)):
        byte = start[common]
        if byte < 0xFF and byte + 1 < limit[common]:
            return start[:common] + bytes([byte + 1])
    return start


def short_successor(key: bytes) -> bytes:
    """A short key >= ``key`` (LevelDB's bytewise FindShortSuccessor)."""
    for i, byte in enumerate(key):
        if byte != 0xFF:
            return key[:i] + bytes([byte + 1])
    return key


class TableBuilder:
    """Builds a whole table in memory from strictly increasing keys."""

    def __init__(self, block_size: int = BLOCK_SIZE) -> None:
        self._block_size = block_size
        self._out = bytearray()
        self._data = BlockBuilder(DATA_RESTART_INTERVAL)
        self._index = BlockBuilder(1)
        self._last: bytes | None = None
        self._pending: BlockHandle | None = None

    def add(self, key: bytes, value: bytes) -> None:
        if self._last is not None and key <= self._last:
            raise ValueError(f"table keys must strictly increase: {key!r} after {self._last!r}")
        if self._pending is not None:
            assert self._last is not None
            self._index.add(shortest_separator(self._last, key), self._pending.encode())
            self._pending = None
        self._data.add(key, value)
        self._last = key
        if self._data.size_estimate() >= self._block_size:
            self._flush()

    def _flush(self) -> None:
        if self._data.empty:
            return
        self._pending = self._write_block(self._data.finish())
        self._data = BlockBuilder(DATA_RESTART_INTERVAL)

    def _write_block(self, contents: bytes) -> BlockHandle:
        handle = BlockHandle(len(self._out), len(contents))
        trailer = bytes([TYPE_RAW])
        self._out += contents + trailer + put_fixed32(masked_crc32c(contents + trailer))
        return handle

    def finish(self) -> bytes:
        self._flush()
        metaindex = self._write_block(BlockBuilder(DATA_RESTART_INTERVAL).finish())
        if self._pending is not None:
            assert self._last is not None
            self._index.add(short_successor(self._last), self._pending.encode())
            self._pending = None
        index = self._write_block(self._index.finish())
        footer = (metaindex.encode() + index.encode()).ljust(40, b"\0")
        self._out += footer + put_fixed32(MAGIC) + put_fixed32(MAGIC >> 32)
        return bytes(self._out)
