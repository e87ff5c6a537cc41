"""Chunk codecs of spec/format.md, "Chunks, codecs and checksums".

A chunk's raw bytes go through an optional byte shuffle [R-CODEC-002] and
then the codec: stored as they are (CODEC_NONE) or as exactly one
Zstandard frame (CODEC_ZSTD) [R-CODEC-001]. Decoding is the reverse and
refuses anything but one complete frame of exactly the expected size.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError, MalformedError
from ocf.v1 import tensor_pb2


class Codec(enum.Enum):
    """The codecs a writer can choose, by their names in the API and CLI."""

    NONE = tensor_pb2.CODEC_NONE
    ZSTD = tensor_pb2.CODEC_ZSTD

    @classmethod
    def parse(cls, name: str | None) -> Codec:
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
    out = np.empty_like(raw)
    _shuffle_into(out, raw, itemsize)
    return out


def _shuffle_into(out: np.ndarray, raw: np.ndarray, itemsize: int) -> None:
    """:func:`shuffle` written into ``out``: one copy through a transposed view, whose
    inner loop reads with a stride of ``itemsize`` and writes contiguously."""
    np.copyto(out.reshape(itemsize, -1), raw.reshape(-1, itemsize).T)


def unshuffle(shuffled: np.ndarray, itemsize: int) -> np.ndarray:
    """Invert :func:`shuffle`."""
    out = np.zeros_like(shuffled)
    _unshuffle_into(out, shuffled, itemsize, out_zeroed=True)
    return out


def _unshuffle_into(out: np.ndarray, shuffled: np.ndarray, itemsize: int, *,
                    out_zeroed: bool = False) -> None:
    """:func:`unshuffle` written straight into ``out``, one byte stream at a time.

    Each stream is read contiguously and written with a stride of
    ``itemsize``: 2 to 10 times faster than one copy through a transposed
    view, whose inner loop moves a single byte per step. That strided write
    is the costliest step of a shuffled read (as much CPU as decompressing),
    so when ``out`` is known to be zero-filled, streams that are all zero
    are not written at all: the low two bytes of float32 weights rounded to
    bfloat16, the high bytes of small integers.
    """
    streams = shuffled.reshape(itemsize, -1)
    elements = out.reshape(-1, itemsize)
    for j in range(itemsize):
        if out_zeroed and _all_zero(streams[j]):
            continue
        elements[:, j] = streams[j]


def _all_zero(stream: np.ndarray) -> bool:
    # The first bytes tell most streams that are not (at no cost); only a stream
    # that starts with zeros is read whole, at the speed of a vectorized max.
    return bool(stream[:4096].max(initial=0) == 0 and stream.max(initial=0) == 0)


# Per thread: compressors by level, a decompressor, and a scratch buffer. The
# zstandard objects are not thread-safe, and making one per chunk costs a
# context each time; a buffer allocated per chunk costs page faults whenever
# the allocator has given its memory back to the system in between.
_local = threading.local()
# A thread keeps a scratch buffer up to this size; larger chunks get one per
# call, so that no thread holds more than this once its reads are done.
_KEPT_SCRATCH = 4 << 20


def _scratch(size: int) -> np.ndarray:
    """A uint8 buffer of ``size`` bytes for this thread's use until it next calls this."""
    if size > _KEPT_SCRATCH:
        return np.empty(size, np.uint8)
    buffer: np.ndarray | None = getattr(_local, "scratch", None)
    if buffer is None or len(buffer) < size:
        buffer = _local.scratch = np.empty(size, np.uint8)
    return buffer[:size]


def _compressor(level: int) -> Any:
    import zstandard  # imported by the first zstd chunk: many programs never need it

    cache: dict[int, Any] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(level=level,
                                                             write_content_size=True)
    return compressor


def _decompressor() -> Any:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        import zstandard

        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


@dataclass(frozen=True)
class ChunkEncoder:
    """Encodes raw chunks for one stored data block."""

    compression: Codec
    level: int = 1
    itemsize: int = 1  # element size for the byte shuffle; 1 means no shuffle

    def encode(self, raw: memoryview) -> memoryview | bytes:
        if self.compression is Codec.NONE:
            return raw
        data = raw
        if self.itemsize > 1:
            shuffled = _scratch(len(raw))
            _shuffle_into(shuffled, np.frombuffer(raw, dtype=np.uint8), self.itemsize)
            data = shuffled.data
        # Releases the GIL while it compresses: chunks compress in parallel on threads.
        compressed: bytes = _compressor(self.level).compress(data)
        return compressed


def decode_zstd(stored: memoryview | bytes, raw_length: int, itemsize: int,
                into: np.ndarray | None = None, *, into_zeroed: bool = False) -> np.ndarray:
    """Decode one stored zstd chunk into its ``raw_length`` raw bytes (uint8 array),
    written to ``into`` (a uint8 array of that length) when one is given;
    ``into_zeroed`` says that it holds zeros (bytes known to be zero are then
    not written again).

    ``itemsize`` > 1 undoes a byte shuffle. Raises MalformedError for anything
    but exactly one complete frame decoding to exactly ``raw_length`` bytes.
    The output is bounded by ``raw_length`` before any byte is decoded: a
    frame without a content size that would expand past it fails at that
    point, never after decoding the rest [R-CODEC-001].
    """
    import zstandard  # imported by the first zstd chunk: many programs never need it

    try:
        declared = zstandard.frame_content_size(stored)
    except zstandard.ZstdError:
        declared = -1  # no readable frame header; _frame_length reports it below
    if declared not in (-1, raw_length):
        raise MalformedError(
            f"zstd frame declares {declared} bytes, the index {raw_length}",
            requirement="R-CODEC-001",
        )
    length = _frame_length(stored)
    if length != len(stored):
        what = "followed by extra bytes" if length < len(stored) else "(incomplete frame)"
        raise MalformedError(
            f"zstd chunk of {len(stored)} bytes holds a frame of {length} bytes {what}, "
            "expected exactly one frame", requirement="R-CODEC-001")
    if into is None:
        # Zero-filled memory costs no more than any new memory (the system's pages
        # are zero), and lets the unshuffle skip streams of zeros.
        out, into_zeroed = np.zeros(raw_length, np.uint8), True
    else:
        out = into
    # A shuffled chunk is decoded into this thread's scratch buffer, then unshuffled
    # into ``out``; an unshuffled one straight into ``out``.
    target = _scratch(raw_length) if itemsize > 1 else out
    if declared == raw_length:
        _decompress_into(stored, target)
    else:
        target[:] = np.frombuffer(_decompress_bounded(stored, raw_length), np.uint8)
    if itemsize > 1:
        _unshuffle_into(out, target, itemsize, out_zeroed=into_zeroed)
    return out


def _decompress_into(frame: memoryview | bytes, target: np.ndarray) -> None:
    """Decode ``frame``, which declares exactly ``len(target)`` bytes, into ``target``.

    With the whole frame given and room for its declared size, zstd decodes it
    in one pass straight into ``target`` (no window buffer, no copy), with the
    GIL released; it fails if the blocks decode to another size than declared.
    """
    import zstandard

    try:
        with _decompressor().stream_reader(frame) as reader:
            count = reader.readinto(target)
            beyond = reader.read(1) if count == len(target) else b""
    except zstandard.ZstdError as exc:
        raise MalformedError(f"undecodable zstd frame: {exc}", requirement="R-CODEC-001") \
            from None
    if count != len(target) or beyond:
        raise MalformedError(
            f"zstd chunk decodes to {'more than ' if beyond else ''}{count} bytes, expected "
            f"one frame of {len(target)} bytes", requirement="R-CODEC-001")


def _decompress_bounded(frame: memoryview | bytes, raw_length: int) -> bytes:
    """Decode ``frame``, which declares no content size, to at most ``raw_length`` bytes."""
    import zstandard

    try:
        # Without a content size in the frame, the output buffer is max_output_size
        # bytes and decoding fails once the frame would outgrow it.
        out: bytes = _decompressor().decompress(frame, max_output_size=max(raw_length, 1))
    except zstandard.ZstdError as exc:
        raise MalformedError(
            f"undecodable zstd frame, or one that decodes to more than the {raw_length} "
            f"bytes expected: {exc}", requirement="R-CODEC-001") from None
    if len(out) != raw_length:
        raise MalformedError(
            f"zstd chunk decodes to {len(out)} bytes, expected one frame of {raw_length} bytes",
            requirement="R-CODEC-001",
        )
    return out


_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
_BLOCK_RLE = 1
_BLOCK_RESERVED = 3
_CHECKSUM_FLAG = 0x04  # Content_Checksum_flag of the frame header descriptor


def _frame_length(stored: memoryview | bytes) -> int:
    """The length in bytes of the zstd frame that starts ``stored``.

    Found by walking the block headers (RFC 8878, section 3.1.1), which costs
    nothing next to decoding and tells exactly where the frame ends, so that
    bytes after it are refused without decoding them.
    """
    import zstandard  # imported by the first zstd chunk: many programs never need it

    view = memoryview(stored)
    if bytes(view[:4]) != _FRAME_MAGIC:
        raise MalformedError("not a zstd frame: it does not start with the zstd magic number",
                             requirement="R-CODEC-001")
    try:
        pos = zstandard.frame_header_size(view)
    except zstandard.ZstdError as exc:
        raise MalformedError(f"not a zstd frame: {exc}", requirement="R-CODEC-001") from None
    while True:
        if pos + 3 > len(view):
            raise MalformedError("incomplete zstd frame: it ends inside a block header",
                                 requirement="R-CODEC-001")
        header = int.from_bytes(view[pos:pos + 3], "little")
        kind, size = (header >> 1) & 3, header >> 3
        if kind == _BLOCK_RESERVED:
            raise MalformedError("zstd block of the reserved type 3", requirement="R-CODEC-001")
        pos += 3 + (1 if kind == _BLOCK_RLE else size)
        if header & 1:  # Last_Block
            break
    return pos + (4 if view[4] & _CHECKSUM_FLAG else 0)
