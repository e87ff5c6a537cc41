"""Chunk codecs of spec/format.md, "Chunks, codecs and checksums".

A chunk's raw bytes go through an optional byte shuffle [R-CODEC-002] and
then the codec: stored as they are (CODEC_NONE) or as exactly one
Zstandard frame (CODEC_ZSTD) [R-CODEC-001]. Decoding is the reverse and
refuses anything but one complete frame of exactly the expected size.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import zstandard

from ocf.errors import InvalidError, MalformedError
from ocf.v1 import tensor_pb2


class Compression(enum.Enum):
    """The codecs a writer can choose, by their names in the API and CLI."""

    NONE = tensor_pb2.CODEC_NONE
    ZSTD = tensor_pb2.CODEC_ZSTD

    @classmethod
    def parse(cls, name: str | None) -> Compression:
        if name is None:
            return cls.NONE
        try:
            return cls[name.upper()]
        except KeyError:
            raise InvalidError(
                f"unknown compression {name!r}; choose one of: none, zstd"
            ) from None


def shuffle(raw: np.ndarray, itemsize: int) -> np.ndarray:
    """Group byte j of every element together: out[j*m + i] = raw[i*s + j]."""
    return np.ascontiguousarray(raw.reshape(-1, itemsize).T).reshape(-1)


def unshuffle(shuffled: np.ndarray, itemsize: int) -> np.ndarray:
    """Invert :func:`shuffle`."""
    return np.ascontiguousarray(shuffled.reshape(itemsize, -1).T).reshape(-1)


@dataclass(frozen=True)
class ChunkEncoder:
    """Encodes raw chunks for one stored data block."""

    compression: Compression
    level: int = 3
    itemsize: int = 1  # element size for the byte shuffle; 1 means no shuffle

    def encode(self, raw: memoryview) -> memoryview | bytes:
        if self.compression is Compression.NONE:
            return raw
        data = raw
        if self.itemsize > 1:
            data = shuffle(np.frombuffer(raw, dtype=np.uint8), self.itemsize).data
        # A compressor per call: ZstdCompressor objects are not thread-safe,
        # and chunks are compressed on several threads at once.
        return zstandard.ZstdCompressor(level=self.level, write_content_size=True).compress(
            data
        )


def decode_zstd(stored: memoryview | bytes, raw_length: int, itemsize: int) -> np.ndarray:
    """Decode one stored zstd chunk into its ``raw_length`` raw bytes (uint8 array).

    ``itemsize`` > 1 undoes a byte shuffle. Raises MalformedError for anything
    but exactly one complete frame decoding to exactly ``raw_length`` bytes.
    """
    try:
        declared = zstandard.frame_content_size(stored)
    except zstandard.ZstdError:
        declared = -1  # no readable frame header; decompression reports it below
    if declared not in (-1, raw_length):
        raise MalformedError(
            f"zstd frame declares {declared} bytes, the index {raw_length}",
            requirement="R-CODEC-001",
        )
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = decompressor.decompress(stored)
    except zstandard.ZstdError as exc:
        raise MalformedError(f"undecodable zstd frame: {exc}", requirement="R-CODEC-001") from None
    if not decompressor.eof or decompressor.unused_data or len(out) != raw_length:
        raise MalformedError(
            f"zstd chunk decodes to {len(out)} bytes"
            f"{'' if decompressor.eof else ' (incomplete frame)'}"
            f"{' followed by extra bytes' if decompressor.unused_data else ''}, "
            f"expected one frame of {raw_length} bytes",
            requirement="R-CODEC-001",
        )
    raw = np.frombuffer(out, dtype=np.uint8)
    return unshuffle(raw, itemsize) if itemsize > 1 else raw
