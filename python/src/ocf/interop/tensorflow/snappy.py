"""A bounded pure-Python decoder of raw Snappy blocks (not the framing format).

SSTable blocks with type byte 1 hold one raw Snappy block. TensorFlow never
compresses its bundle index, but LevelDB-style tables may, so a robust
reader accepts them. The format (google/snappy, format_description.txt):

    preamble  varint32 length of the uncompressed data
    elements  a tag byte whose low two bits select the kind:
      00 literal   length-1 in the upper 6 bits; 60..63 mean the length-1
                   follows in 1..4 little-endian bytes; then the bytes
      01 copy      length 4..11 (3 bits), offset 11 bits (3 in the tag + 1 byte)
      10 copy      length 1..64 (6 bits), offset in 2 little-endian bytes
      11 copy      length 1..64 (6 bits), offset in 4 little-endian bytes

A copy repeats ``length`` bytes starting ``offset`` bytes back in the output
and may overlap what it writes (offset < length repeats a pattern).

Every length and offset is checked against the input, the output so far
and the declared size before use; the declared size is also bounded by the
densest possible encoding, so a hostile preamble cannot cause a large
allocation. Errors are MalformedError.
"""

from __future__ import annotations

from ocf.format.errors import MalformedError
from ocf.interop.tensorflow.encoding import Path, decode_varint

# The densest element is a 3-byte copy of 64 bytes, so no valid block
# decodes to more than 64/3 bytes per input byte; 22 is a safe bound.
MAX_RATIO = 22


def decompress(data: bytes | memoryview, *, path: Path = None) -> bytes:
    """The uncompressed bytes of one raw Snappy block."""
    size, pos = decode_varint(data, 0, len(data), bits=32, path=path, what="snappy length")
    if size > MAX_RATIO * len(data):
        raise MalformedError(
            f"snappy block of {len(data)} bytes claims {size} uncompressed bytes", path=path
        )
    out = bytearray()
    end = len(data)
    while pos < end:
        tag = data[pos]
        kind = tag & 3
        if kind == 0:
            pos = _literal(data, pos, end, tag, out, path)
        else:
            pos = _copy(data, pos, end, tag, kind, out, path)
        if len(out) > size:
            raise MalformedError(f"snappy block decodes past its declared {size} bytes", path=path)
    if len(out) != size:
        raise MalformedError(
            f"snappy block decodes to {len(out)} bytes, declared {size}", path=path
        )
    return bytes(out)


def _literal(
    data: bytes | memoryview, pos: int, end: int, tag: int, out: bytearray, path: Path
) -> int:
    length = tag >> 2
    pos += 1
    if length >= 60:
        extra = length - 59
        if pos + extra > end:
            raise MalformedError("truncated snappy literal length", path=path)
        length = int.from_bytes(data[pos : pos + extra], "little")
        pos += extra
    length += 1
    if pos + length > end:
        raise MalformedError(
            f"snappy literal of {length} bytes runs past the end of the block", path=path
        )
    out += data[pos : pos + length]
    return pos + length


def _copy(
    data: bytes | memoryview,
    pos: int,
    end: int,
    tag: int,
    kind: int,
    out: bytearray,
    path: Path,
) -> int:
    if kind == 1:
        if pos + 2 > end:
            raise MalformedError("truncated snappy copy", path=path)
        length = 4 + ((tag >> 2) & 7)
        offset = ((tag >> 5) << 8) | data[pos + 1]
        pos += 2
    else:
        width = 2 if kind == 2 else 4
        if pos + 1 + width > end:
            raise MalformedError("truncated snappy copy", path=path)
        length = (tag >> 2) + 1
        offset = int.from_bytes(data[pos + 1 : pos + 1 + width], "little")
        pos += 1 + width
    if offset == 0 or offset > len(out):
        raise MalformedError(
            f"snappy copy offset {offset} outside the {len(out)} bytes decoded so far",
            path=path,
        )
    start = len(out) - offset
    if offset >= length:
        out += out[start : start + length]
    else:
        # Overlapping copy: the source grows as it is written, repeating
        # the last `offset` bytes.
        pattern = bytes(out[start:])
        out += (pattern * (length // offset + 1))[:length]
    return pos
