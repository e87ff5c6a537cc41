"""The primitive encodings of TensorFlow's checkpoint files.

LEB128 varints (LevelDB's ``PutVarint32/64``), little-endian fixed-width
integers, and the *masked* CRC-32C that LevelDB and TensorFlow store: a CRC
of data that itself contains CRCs is weak, so the stored value is rotated
and offset (``Mask``). Decoders take the file path for their error messages
and raise MalformedError on truncated or over-long input.
"""

from __future__ import annotations

import os

from ocf.format.checksum import crc32c
from ocf.format.errors import IntegrityError, MalformedError

MASK_DELTA = 0xA282EAD8
MAX_VARINT32_BYTES = 5
MAX_VARINT64_BYTES = 10
_U32 = 0xFFFFFFFF

Path = str | os.PathLike[str] | None


def mask_crc(crc: int) -> int:
    """LevelDB's ``crc32c::Mask``: rotate right by 15 bits, then add a constant."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & _U32


def unmask_crc(masked: int) -> int:
    """The inverse of :func:`mask_crc`."""
    rot = (masked - MASK_DELTA) & _U32
    return ((rot >> 17) | (rot << 15)) & _U32


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The masked CRC-32C of ``data``, as stored in block trailers and bundle entries."""
    return mask_crc(crc32c(data))


def check_masked_crc(stored: int, actual: int, path: Path, key: str | None = None, *,
                     what: str = "") -> None:
    """IntegrityError, its message starting with ``what``, unless the masked CRC-32C
    computed (``actual``) is the one ``stored``."""
    if actual != stored:
        raise IntegrityError(
            f"{what}checksum mismatch (stored {stored:#010x}, computed {actual:#010x})",
            path=path,
            key=key,
        )


def encode_varint(value: int) -> bytes:
    """The LEB128 encoding of a non-negative integer below 2**64."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(
    data: bytes | memoryview,
    pos: int,
    end: int,
    *,
    bits: int = 64,
    path: Path = None,
    what: str = "varint",
) -> tuple[int, int]:
    """Decode a varint of at most ``bits`` bits from ``data[pos:end]``; return (value, next pos).

    A varint running past ``end``, longer than the encoding of ``bits`` bits
    allows, or encoding a value of more than ``bits`` bits is malformed.
    """
    max_bytes = MAX_VARINT32_BYTES if bits == 32 else MAX_VARINT64_BYTES
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise MalformedError(f"truncated {what} at byte {pos}", path=path)
        byte = data[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value >> bits:
                raise MalformedError(f"{what} at byte {pos} exceeds {bits} bits", path=path)
            return value, pos + i + 1
        shift += 7
    raise MalformedError(f"{what} at byte {pos} is longer than {max_bytes} bytes", path=path)


def fixed32(data: bytes | memoryview, pos: int) -> int:
    """The little-endian uint32 at ``data[pos:pos+4]`` (the caller checked the bounds)."""
    return int.from_bytes(data[pos : pos + 4], "little")


def put_fixed32(value: int) -> bytes:
    return (value & _U32).to_bytes(4, "little")
