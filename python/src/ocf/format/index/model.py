"""The validated, in-memory view of a checkpoint's index.

These plain objects are what the reader works with once the index has
passed every check of spec/format.md; nothing here re-checks anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

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


class TensorInfo:
    """One tensor: key, dtype, shape, and where its bytes are.

    A tensor stored in slices may have thousands (the tiles of a distributed
    save): its :attr:`slices` are built on first use, so that a caller that
    needs only the key, dtype and shape (or reads through the index columns,
    as a partial read does) never pays for one object per slice.
    """

    __slots__ = ("_build_slices", "_slices", "block", "dtype", "key", "shape")

    def __init__(self, key: str, dtype: dtypes.Dtype, shape: tuple[int, ...],
                 block: Block | None, slices: tuple[Slice, ...] | Callable[[], tuple[Slice, ...]]
                 ) -> None:
        self.key = key
        self.dtype = dtype
        self.shape = shape
        self.block = block  # set when stored whole
        self._slices: tuple[Slice, ...] | None = slices if isinstance(slices, tuple) else None
        self._build_slices = None if isinstance(slices, tuple) else slices

    @property
    def slices(self) -> tuple[Slice, ...]:
        """The slices of a tensor stored in slices, in table order; () when stored whole."""
        if self._slices is None:
            assert self._build_slices is not None
            self._slices, self._build_slices = self._build_slices(), None
        return self._slices

    def __repr__(self) -> str:
        stored = "whole" if self.block is not None else "in slices"
        return f"TensorInfo({self.key!r}, {self.dtype.name}, {list(self.shape)}, {stored})"

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


class SliceBoxes(NamedTuple):
    """The slices of one tensor (:meth:`Tables.slice_boxes`): slice ``i`` holds the
    elements from ``lo[i]`` to ``hi[i]`` (int64, past the end) in block ``blocks[i]``."""

    lo: np.ndarray
    hi: np.ndarray
    blocks: np.ndarray


class BlockColumns(NamedTuple):
    """The block table as arrays (:attr:`Tables.block_columns`); the CRCs of block ``j``
    are ``crcs[crc_start[j] : crc_start[j] + chunk_counts[j]]``."""

    shards: np.ndarray
    offsets: np.ndarray
    raw_lengths: np.ndarray
    stores_raw: np.ndarray
    chunk_sizes: np.ndarray
    chunk_counts: np.ndarray
    crc_start: np.ndarray
    crcs: np.ndarray


class PlainChunk(NamedTuple):
    """A tensor stored whole and uncompressed in one chunk (:meth:`Tables.plain_chunk`)."""

    shard: int
    offset: int
    length: int
    crc: int
    dtype: np.dtype[np.generic]
    shape: tuple[int, ...]


@dataclass
class SmallPlain:
    """Small uncompressed one-chunk tensors, column-wise, in (shard, offset) order."""

    keys: list[str]
    shards: list[int]
    offsets: list[int]
    raw_lengths: list[int]
    crcs: list[int]
    dtypes: list[np.dtype[np.generic]]
    shapes: list[tuple[int, ...]]
