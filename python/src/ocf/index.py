"""Decoding and validating a checkpoint index (spec/format.md).

:func:`decode_index` turns the index bytes of an index file into an
:class:`IndexModel`: plain, checked Python objects. Every rule the spec puts
on the index alone is checked here, before any tensor byte is read, in the
reader's order of checks [R-ERR-002]. Checks that need the file system
(shard files exist and have the recorded length) belong to the reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate, pairwise
from typing import NoReturn

from google.protobuf.message import DecodeError

from ocf import dtypes
from ocf.codec import Compression
from ocf.container import ALIGNMENT, INDEX_FILE_NAME, PREAMBLE_SIZE
from ocf.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    UnknownRequiredFeatureError,
)
from ocf.limits import (
    MAX_CHUNK_SIZE,
    MAX_CHUNKS_PER_BLOCK,
    MAX_ELEMENTS,
    MAX_FILE_OFFSET,
    MAX_KEY_BYTES,
    MAX_RANK,
    MAX_SHARDS,
    MAX_SLICES_PER_TENSOR,
    MAX_TENSORS,
    MAX_ZSTD_RATIO,
    MIN_CHUNK_SIZE,
)
from ocf.metadata import MetadataValue, decode_map
from ocf.slicing import boxes_tile
from ocf.v1 import index_pb2, tensor_pb2

# Feature names this implementation understands [R-FEAT-001]. Format 1.0
# defines none [R-FEAT-002].
SUPPORTED_FEATURES: frozenset[str] = frozenset()

SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_CODECS = {c.value: c for c in Compression}


@dataclass(frozen=True)
class Block:
    """A validated StoredData: one contiguous run of chunks in one shard."""

    shard: int
    offset: int
    stored_length: int
    raw_length: int
    compression: Compression
    byte_shuffle: bool
    chunk_size: int
    chunk_crcs: tuple[int, ...]
    chunk_stored_lengths: tuple[int, ...]  # empty for CODEC_NONE

    @property
    def chunk_count(self) -> int:
        return len(self.chunk_crcs)

    @property
    def raw_chunk_size(self) -> int:
        """Raw bytes per chunk (the last chunk may hold fewer)."""
        return self.chunk_size or self.raw_length

    def raw_range(self, i: int) -> tuple[int, int]:
        """Raw byte range [start, end) of chunk ``i``."""
        start = i * self.raw_chunk_size
        return start, min(start + self.raw_chunk_size, self.raw_length)

    @cached_property
    def chunk_offsets(self) -> tuple[int, ...]:
        """Offset in the shard of each chunk, followed by the end of the block."""
        if self.compression is Compression.NONE:
            sizes: Iterable[int] = (end - start for start, end in map(self.raw_range,
                                                                      range(self.chunk_count)))
        else:
            sizes = self.chunk_stored_lengths
        return tuple(accumulate(sizes, initial=self.offset))


@dataclass(frozen=True)
class Piece:
    """One slice of a tensor stored in pieces: a box and its bytes."""

    start: tuple[int, ...]
    extent: tuple[int, ...]
    block: Block


@dataclass(frozen=True)
class TensorInfo:
    """A validated tensor entry."""

    key: str
    dtype: dtypes.DTypeInfo
    shape: tuple[int, ...]
    block: Block | None  # set when stored whole
    pieces: tuple[Piece, ...]  # set when stored in slices

    @property
    def blocks(self) -> tuple[Block, ...]:
        return (self.block,) if self.block is not None else tuple(p.block for p in self.pieces)

    @property
    def stored_length(self) -> int:
        return sum(b.stored_length for b in self.blocks)

    @property
    def codec_name(self) -> str:
        names = {b.compression.name.lower() + ("+shuffle" if b.byte_shuffle else "")
                 for b in self.blocks}
        return ",".join(sorted(names)) or "none"


@dataclass(frozen=True)
class ShardInfo:
    """A validated shard: '' for the index file itself, else a file name."""

    path: str
    length: int
    region_end: int  # end of the data region [64, region_end)


@dataclass(frozen=True)
class IndexModel:
    """A decoded, validated index."""

    required_features: tuple[str, ...]
    writer: str
    shards: tuple[ShardInfo, ...]
    tensors: dict[str, TensorInfo]
    metadata: dict[str, MetadataValue]


class _Checker:
    """Validates one index; carries the file path for error messages."""

    def __init__(self, path: str, index_offset: int) -> None:
        self.path = path
        self.index_offset = index_offset

    def fail(
        self, cls: type[InvalidError] | type[LimitExceededError], message: str,
        requirement: str, key: str | None = None,
    ) -> NoReturn:
        raise cls(message, path=self.path, key=key, requirement=requirement)

    # -- shards ---------------------------------------------------------------

    def shards(self, shards: list[index_pb2.Shard]) -> tuple[ShardInfo, ...]:
        if len(shards) > MAX_SHARDS:
            self.fail(LimitExceededError, f"{len(shards)} shards, above the limit of {MAX_SHARDS}",
                      "R-LIMIT-002")
        seen: set[str] = set()
        result = []
        for shard in shards:
            name = shard.path
            if name in seen:
                self.fail(InvalidError, f"shard path {name!r} listed twice", "R-SHARD-003")
            seen.add(name)
            if name == "":
                result.append(ShardInfo("", 0, self.index_offset))
                continue
            if not SHARD_NAME.fullmatch(name) or name == INDEX_FILE_NAME:
                self.fail(InvalidError, f"shard path {name!r} is not a plain file name of "
                          "[A-Za-z0-9._-] starting with a letter or digit", "R-SHARD-001")
            if not PREAMBLE_SIZE <= shard.length <= MAX_FILE_OFFSET:
                self.fail(InvalidError, f"shard {name!r} length {shard.length} is outside "
                          f"[{PREAMBLE_SIZE}, 2^63)", "R-SHARD-002")
            result.append(ShardInfo(name, shard.length, shard.length))
        return tuple(result)

    # -- tensors --------------------------------------------------------------

    def element_count(self, shape: tuple[int, ...], key: str) -> int:
        if len(shape) > MAX_RANK:
            self.fail(LimitExceededError, f"rank {len(shape)} is above the limit of {MAX_RANK}",
                      "R-TENSOR-003", key)
        count = 1
        for dim in shape:
            count *= dim
            if count > MAX_ELEMENTS:
                self.fail(LimitExceededError, f"shape {list(shape)} has more than 2^62 elements",
                          "R-TENSOR-003", key)
        return count

    def tensor(self, entry: tensor_pb2.TensorEntry, shards: tuple[ShardInfo, ...]) -> TensorInfo:
        key = entry.key
        raw_key = key.encode("utf-8")
        if not raw_key or b"\0" in raw_key:
            self.fail(InvalidError, "tensor key is empty or contains NUL", "R-TENSOR-001", key)
        if len(raw_key) > MAX_KEY_BYTES:
            self.fail(LimitExceededError, f"key is {len(raw_key)} bytes, above the limit of "
                      f"{MAX_KEY_BYTES}", "R-TENSOR-001", key[:64] + "...")
        dtype = dtypes.from_code(entry.dtype)
        if dtype is None:
            self.fail(InvalidError, f"dtype value {entry.dtype} is not defined", "R-TENSOR-002",
                      key)
        shape = tuple(entry.shape)
        count = self.element_count(shape, key)
        has_data, has_slices = entry.HasField("data"), len(entry.slices) > 0
        if has_data == has_slices:
            self.fail(InvalidError, "exactly one of data and slices must be set",
                      "R-TENSOR-004", key)
        if has_data:
            block = self.block(entry.data, dtype, count, shards, key)
            return TensorInfo(key, dtype, shape, block, ())
        if count == 0:
            self.fail(InvalidError, "a tensor with no elements must be stored whole",
                      "R-SLICE-002", key)
        pieces = self.pieces(list(entry.slices), dtype, shape, shards, key)
        return TensorInfo(key, dtype, shape, None, pieces)

    def pieces(
        self, slices: list[tensor_pb2.TensorSlice], dtype: dtypes.DTypeInfo,
        shape: tuple[int, ...], shards: tuple[ShardInfo, ...], key: str,
    ) -> tuple[Piece, ...]:
        if len(slices) > MAX_SLICES_PER_TENSOR:
            self.fail(LimitExceededError, f"{len(slices)} slices, above the limit of "
                      f"{MAX_SLICES_PER_TENSOR}", "R-SLICE-004", key)
        pieces = []
        for s in slices:
            start, extent = tuple(s.start), tuple(s.extent)
            if len(start) != len(shape) or len(extent) != len(shape) or any(
                e < 1 or b + e > d for b, e, d in zip(start, extent, shape)
            ):
                self.fail(InvalidError, f"slice start {list(start)} extent {list(extent)} is "
                          f"not a non-empty box inside shape {list(shape)}", "R-SLICE-001", key)
            box_count = self.element_count(extent, key)
            if not s.HasField("data"):
                self.fail(InvalidError, "slice has no data", "R-SLICE-003", key)
            pieces.append(Piece(start, extent, self.block(s.data, dtype, box_count, shards, key)))
        if not boxes_tile([(p.start, p.extent) for p in pieces], shape):
            self.fail(InvalidError, "slices overlap or do not cover the shape exactly",
                      "R-SLICE-002", key)
        return tuple(pieces)

    def block(
        self, data: tensor_pb2.StoredData, dtype: dtypes.DTypeInfo, count: int,
        shards: tuple[ShardInfo, ...], key: str,
    ) -> Block:
        if data.shard >= len(shards):
            self.fail(InvalidError, f"shard {data.shard} does not exist ({len(shards)} listed)",
                      "R-SHARD-001", key)
        region_end = shards[data.shard].region_end
        offset, stored, raw = data.offset, data.stored_length, data.raw_length
        if offset % ALIGNMENT:
            self.fail(InvalidError, f"offset {offset} is not a multiple of {ALIGNMENT}",
                      "R-DATA-001", key)
        if offset < PREAMBLE_SIZE or offset + stored > region_end:
            self.fail(InvalidError, f"bytes [{offset}, {offset + stored}) lie outside the data "
                      f"region [{PREAMBLE_SIZE}, {region_end}) of shard {data.shard}",
                      "R-DATA-002", key)
        if dtype.is_bytes:
            if raw < 8 * count:
                self.fail(InvalidError, f"raw length {raw} cannot hold the length table of "
                          f"{count} strings", "R-DTYPE-003", key)
        elif raw != count * dtype.itemsize:
            self.fail(InvalidError, f"raw length {raw} is not {count} elements x "
                      f"{dtype.itemsize} bytes", "R-TENSOR-005", key)
        compression = _CODECS.get(data.codec)
        if compression is None:
            self.fail(InvalidError, f"codec value {data.codec} is not defined", "R-CHUNK-003", key)
        chunks = self.chunk_count(data.chunk_size, raw, key)
        if len(data.chunk_crcs) != chunks:
            self.fail(InvalidError, f"{len(data.chunk_crcs)} chunk checksums for {chunks} "
                      "chunks", "R-CHUNK-002", key)
        block = Block(data.shard, offset, stored, raw, compression, data.byte_shuffle,
                      data.chunk_size, tuple(data.chunk_crcs), tuple(data.chunk_stored_lengths))
        if compression is Compression.NONE:
            self.uncompressed(block, key)
        else:
            self.compressed(block, dtype, key)
        return block

    def chunk_count(self, chunk_size: int, raw: int, key: str) -> int:
        if chunk_size and (chunk_size % ALIGNMENT or not MIN_CHUNK_SIZE <= chunk_size
                           <= MAX_CHUNK_SIZE):
            self.fail(InvalidError, f"chunk size {chunk_size} is not 0 or a multiple of 64 in "
                      f"[{MIN_CHUNK_SIZE}, {MAX_CHUNK_SIZE}]", "R-CHUNK-001", key)
        if raw == 0:
            return 0
        chunks = 1 if chunk_size == 0 else -(-raw // chunk_size)
        if chunks > MAX_CHUNKS_PER_BLOCK:
            self.fail(LimitExceededError, f"{chunks} chunks, above the limit of "
                      f"{MAX_CHUNKS_PER_BLOCK}", "R-LIMIT-002", key)
        return chunks

    def uncompressed(self, block: Block, key: str) -> None:
        if block.chunk_stored_lengths or block.byte_shuffle or block.stored_length != \
                block.raw_length:
            self.fail(InvalidError, "uncompressed data must have stored length equal to raw "
                      "length, no chunk stored lengths and no byte shuffle", "R-CHUNK-003", key)

    def compressed(self, block: Block, dtype: dtypes.DTypeInfo, key: str) -> None:
        lengths = block.chunk_stored_lengths
        if len(lengths) != block.chunk_count or sum(lengths) != block.stored_length or (
            lengths and min(lengths) < 1
        ):
            self.fail(InvalidError, "zstd chunk stored lengths must be one per chunk, each at "
                      "least 1, summing to the stored length", "R-CHUNK-004", key)
        if block.byte_shuffle and dtype.is_bytes:
            self.fail(InvalidError, "byte shuffle needs a fixed-size dtype", "R-CODEC-002", key)
        for i, stored in enumerate(lengths):
            start, end = block.raw_range(i)
            if end - start > stored * MAX_ZSTD_RATIO:
                self.fail(LimitExceededError, f"chunk {i} claims {end - start} raw bytes from "
                          f"{stored} stored bytes, more than zstd can produce", "R-CHUNK-004",
                          key)

    # -- whole index ----------------------------------------------------------

    def no_overlaps(self, tensors: dict[str, TensorInfo]) -> None:
        spans = [(b.shard, b.offset, b.offset + b.stored_length, key)
                 for key, t in tensors.items() for b in t.blocks if b.stored_length]
        spans.sort()
        for (shard_a, _, end_a, key_a), (shard_b, start_b, _, key_b) in pairwise(spans):
            if shard_a == shard_b and end_a > start_b:
                self.fail(InvalidError, f"stored bytes overlap those of tensor {key_a!r} in "
                          f"shard {shard_a}", "R-DATA-003", key_b)


def decode_index(data: bytes, path: str, index_offset: int) -> IndexModel:
    """Parse and validate the index bytes of the index file at ``path``."""
    message = index_pb2.Index()
    try:
        message.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise MalformedError(f"index does not parse as ocf.v1.Index: {exc}", path=path,
                             requirement="R-FILE-007") from None
    unknown = [f for f in message.header.required_features if f not in SUPPORTED_FEATURES]
    if unknown:
        raise UnknownRequiredFeatureError(
            f"checkpoint requires features this reader does not implement: {', '.join(unknown)}",
            path=path, requirement="R-FEAT-001")
    checker = _Checker(path, index_offset)
    shards = checker.shards(list(message.shards))
    if len(message.tensors) > MAX_TENSORS:
        checker.fail(LimitExceededError, f"{len(message.tensors)} tensors, above the limit of "
                     f"{MAX_TENSORS}", "R-LIMIT-002")
    tensors: dict[str, TensorInfo] = {}
    for entry in message.tensors:
        info = checker.tensor(entry, shards)
        if info.key in tensors:
            checker.fail(InvalidError, "key appears twice", "R-TENSOR-001", info.key)
        tensors[info.key] = info
    checker.no_overlaps(tensors)
    try:
        metadata = decode_map(message.metadata)
    except LimitExceededError as exc:
        raise LimitExceededError(exc.detail, path=path, requirement=exc.requirement) from None
    return IndexModel(tuple(message.header.required_features), message.header.writer, shards,
                      tensors, metadata)
