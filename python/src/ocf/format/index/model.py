"""The validated, in-memory view of a checkpoint's index.

These plain objects are what the reader works with once the index has
passed every check of spec/format.md; nothing here re-checks anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocf.format import dtypes
from ocf.format.codecs.base import Codec


@dataclass(slots=True)
class Block:
    """One row of the block table: a run of chunks in one shard."""

    shard: int
    offset: int
    stored_length: int
    raw_length: int
    compression: Codec
    byte_shuffle: bool
    chunk_size: int
    chunk_crcs: list[int]
    # Where each chunk starts in the shard, then the block's end; empty for a
    # codec that stores raw bytes (CODEC_NONE), whose chunks sit at their raw offsets.
    chunk_starts: list[int]

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

    def stored_range(self, i: int) -> tuple[int, int]:
        """Byte range [start, end) of chunk ``i`` in its shard file."""
        if self.chunk_starts:
            return self.chunk_starts[i], self.chunk_starts[i + 1]
        start, end = self.raw_range(i)
        return self.offset + start, self.offset + end


@dataclass(slots=True)
class Slice:
    """One slice of a tensor stored in slices: a box and its block."""

    start: tuple[int, ...]
    extent: tuple[int, ...]
    block: Block


@dataclass(slots=True)
class TensorInfo:
    """One tensor: key, dtype, shape, and where its bytes are."""

    key: str
    dtype: dtypes.Dtype
    shape: tuple[int, ...]
    block: Block | None  # set when stored whole
    slices: tuple[Slice, ...]  # set when stored in slices

    @property
    def blocks(self) -> tuple[Block, ...]:
        return (self.block,) if self.block is not None else tuple(p.block for p in self.slices)

    @property
    def stored_length(self) -> int:
        return sum(b.stored_length for b in self.blocks)

    @property
    def codec_name(self) -> str:
        names = {b.compression.name + ("+shuffle" if b.byte_shuffle else "")
                 for b in self.blocks}
        return ",".join(sorted(names)) or "none"


@dataclass(frozen=True)
class Shard:
    """A validated shard: '' for the index file itself, else a file name."""

    path: str
    length: int
    region_end: int  # end of the data region [64, region_end)
    # The SHA-256 of a pool object (spec/pool.md), whose path is then a name in the
    # pool directory of the managed root; empty for a shard beside the index file.
    pool_sha256: bytes = b""
