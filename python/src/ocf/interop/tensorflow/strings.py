"""TensorFlow's data-file layout of a DT_STRING tensor.

    [varint64 len_0 .. len_{n-1}] [fixed32 masked crc] [bytes_0 .. bytes_{n-1}]

The fixed32 is the masked CRC-32C of the lengths, each taken as a 4-byte
little-endian integer (8 bytes if it exceeds 2**32 - 1), not of their varint
bytes. The entry's crc32c continues that running CRC over the 4 stored
checksum bytes and then all string bytes, and is masked.
"""

from __future__ import annotations

from ocf.format.checksum import crc32c
from ocf.format.errors import InvalidError
from ocf.interop.tensorflow.encoding import (
    Path,
    check_masked_crc,
    decode_varint,
    encode_varint,
    fixed32,
    mask_crc,
)

_U32_MAX = 0xFFFFFFFF


def _length_bytes(length: int) -> bytes:
    width = 4 if length <= _U32_MAX else 8
    return length.to_bytes(width, "little")


def encode(values: list[bytes]) -> tuple[bytes, int]:
    """The stored bytes of the strings and the masked entry crc32c."""
    lengths = b"".join(encode_varint(len(v)) for v in values)
    crc = crc32c(b"".join(_length_bytes(len(v)) for v in values))
    checksum = mask_crc(crc).to_bytes(4, "little")
    crc = crc32c(checksum, crc)
    body = b"".join(values)
    return lengths + checksum + body, mask_crc(crc32c(body, crc))


def decode(
    data: bytes | memoryview,
    count: int,
    stored_crc: int,
    *,
    verify: bool,
    path: Path,
    key: str,
) -> list[bytes]:
    """The ``count`` strings stored in ``data`` (the entry's whole extent)."""
    view = memoryview(data).cast("B")  # a flat byte view, whatever was passed
    size = len(view)
    check_size(size, count, path, key)
    lengths: list[int] = []
    pos = 0
    for _ in range(count):
        length, pos = decode_varint(view, pos, size - 4, path=path, what="string length")
        lengths.append(length)
    body_at = pos + 4
    if sum(lengths) != size - body_at:
        raise InvalidError(
            f"string lengths add up to {sum(lengths)} bytes but the entry holds "
            f"{size - body_at} string bytes",
            path=path,
            key=key,
        )
    if verify:
        _verify(view, lengths, pos, stored_crc, path, key)
    out: list[bytes] = []
    for length in lengths:
        out.append(bytes(view[body_at : body_at + length]))
        body_at += length
    return out


def _verify(
    view: memoryview, lengths: list[int], pos: int, stored_crc: int, path: Path, key: str
) -> None:
    crc = crc32c(b"".join(_length_bytes(n) for n in lengths))
    check_masked_crc(fixed32(view, pos), mask_crc(crc), path, key, what="string length ")
    check_masked_crc(stored_crc, mask_crc(crc32c(view[pos:], crc)), path, key)


def check_size(size: int, count: int, path: Path, key: str) -> None:
    """Refuse an entry whose size cannot hold ``count`` strings (1 length byte each + crc)."""
    if count + 4 > size:
        raise InvalidError(
            f"string tensor of {count} elements cannot fit in {size} bytes", path=path, key=key
        )
