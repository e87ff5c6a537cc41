"""The index keys of the slices of a partitioned tensor (TensorFlow's EncodeTensorNameSlice).

A partitioned tensor has a parent entry under its name listing its slices;
each slice is stored as an ordinary entry under a binary key built with
TensorFlow's "ordered code" (sorts like the values it encodes):

    0x00                                 WriteNumIncreasing(0): slice keys
                                         sort before every tensor name
    name, 0x00 -> 00 ff, 0xff -> ff 00    WriteString, then the terminator 00 01
    WriteNumIncreasing(rank)             a length byte, then big-endian bytes
    per dimension: WriteSignedNumIncreasing(start), (length)   -1 = whole dim

WriteSignedNumIncreasing stores an int64 in the fewest bytes n whose
7n - 1 value bits hold it (sign-extended two's complement, big-endian) and
marks n in the leading bits: n ones after the sign bit, so 0..63 are the
single byte 0x80 | value and -1 is 0x7f.
"""

from __future__ import annotations

from collections.abc import Sequence

# XOR masks for the first two bytes of an n-byte signed encoding.
_HEADER_BITS: tuple[tuple[int, int], ...] = (
    (0x00, 0x00),
    (0x80, 0x00),
    (0xC0, 0x00),
    (0xE0, 0x00),
    (0xF0, 0x00),
    (0xF8, 0x00),
    (0xFC, 0x00),
    (0xFE, 0x00),
    (0xFF, 0x00),
    (0xFF, 0x80),
    (0xFF, 0xC0),
)
FULL_EXTENT = -1


def num_increasing(value: int) -> bytes:
    """OrderedCode::WriteNumIncreasing of a uint64: a length byte, then big-endian bytes."""
    length = (value.bit_length() + 7) // 8
    return bytes([length]) + value.to_bytes(length, "big")


def signed_num_increasing(value: int) -> bytes:
    """OrderedCode::WriteSignedNumIncreasing of an int64."""
    magnitude = ~value if value < 0 else value
    length = (magnitude.bit_length() + 7) // 7
    encoded = bytearray((value & ((1 << (8 * length)) - 1)).to_bytes(length, "big"))
    first, second = _HEADER_BITS[length]
    encoded[0] ^= first
    if length > 1:
        encoded[1] ^= second
    return bytes(encoded)


def ordered_string(text: bytes) -> bytes:
    """OrderedCode::WriteString: escape 0x00 and 0xff, then terminate with 00 01."""
    return text.replace(b"\xff", b"\xff\x00").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def slice_key(name: str, extents: Sequence[tuple[int, int]]) -> bytes:
    """The index key of one slice: ``extents`` is (start, length) per dimension, length -1 = all."""
    parts = [num_increasing(0), ordered_string(name.encode("utf-8")), num_increasing(len(extents))]
    for start, length in extents:
        parts.append(signed_num_increasing(start))
        parts.append(signed_num_increasing(length))
    return b"".join(parts)


def is_slice_key(key: bytes) -> bool:
    """Whether an index key is a slice key (tensor names never start with NUL)."""
    return key[:1] == b"\x00"
