"""CODEC_ZSTD: a chunk is stored as exactly one Zstandard frame [R-CODEC-001].

Decoding refuses anything but one complete frame of exactly the expected
size, and bounds the output by that size before decoding a byte.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ocf.format.codecs.base import Codec
from ocf.format.codecs.shuffle import scratch, shuffled_scratch, unshuffle_into
from ocf.format.errors import MalformedError
from ocf.format.limits import MAX_ZSTD_RATIO
from ocf.v1 import tensor_pb2

# Per thread: compressors by level and a decompressor. The zstandard objects are
# not thread-safe, and making one per chunk costs a context each time.
_local = threading.local()


class Zstd(Codec):
    name = "zstd"
    value = tensor_pb2.CODEC_ZSTD
    stores_raw = False
    max_ratio = MAX_ZSTD_RATIO

    def encode(self, raw: memoryview, level: int, itemsize: int = 1) -> memoryview | bytes:
        data = shuffled_scratch(raw, itemsize) if itemsize > 1 else raw
        # Releases the GIL while it compresses: chunks compress in parallel on threads.
        compressed: bytes = _compressor(level).compress(data)
        return compressed

    def decode_into(self, stored: memoryview | bytes, out: np.ndarray, itemsize: int = 1, *,
                    zeroed: bool = False) -> None:
        raw_length = len(out)
        declared = _declared_size(stored)
        if declared not in (-1, raw_length):
            raise MalformedError(f"zstd frame declares {declared} bytes, the index {raw_length}",
                                 requirement="R-CODEC-001")
        length = _frame_length(stored)
        if length != len(stored):
            what = "followed by extra bytes" if length < len(stored) else "(incomplete frame)"
            raise MalformedError(
                f"zstd chunk of {len(stored)} bytes holds a frame of {length} bytes {what}, "
                "expected exactly one frame", requirement="R-CODEC-001")
        # A shuffled chunk is decoded into this thread's scratch buffer, then unshuffled
        # into ``out``; an unshuffled one straight into ``out``.
        target = scratch(raw_length) if itemsize > 1 else out
        if declared == raw_length:
            _decompress_into(stored, target)
        else:
            target[:] = np.frombuffer(_decompress_bounded(stored, raw_length), np.uint8)
        if itemsize > 1:
            unshuffle_into(out, target, itemsize, out_zeroed=zeroed)


ZSTD = Zstd()


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


def _declared_size(stored: memoryview | bytes) -> int:
    """The Frame_Content_Size of the frame starting ``stored``; -1 when it declares none,
    or has no readable header (which :func:`_frame_length` then reports)."""
    import zstandard

    try:
        declared: int = zstandard.frame_content_size(stored)
    except zstandard.ZstdError:
        return -1
    return declared


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
    import zstandard

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
