"""Fixed-size byte layouts of OCF files: the preamble and the footer.

spec/format.md, "Files":

    preamble (64 bytes, every OCF file)
      0   8  magic  89 4F 43 46 0D 0A 1A 0A               [R-FILE-002]
      8  56  reserved: written as zeros, ignored on read   [R-FILE-003]

    footer (32 bytes, last bytes of an index file)
      0   8  index_offset   u64
      8   8  index_length   u64
     16   4  index_crc32c   u32
     20   2  format_major   u16
     22   2  format_minor   u16
     24   8  magic  89 4F 43 46 45 4E 44 0A               [R-FILE-004]

All integers little-endian [R-FILE-001]. The index bytes end where the
footer begins [R-FILE-005].
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Protocol

from ocf.format.checksum import crc32c
from ocf.format.errors import (
    IntegrityError,
    LimitExceededError,
    MalformedError,
    UnsupportedVersionError,
)
from ocf.format.limits import MAX_INDEX_BYTES
from ocf.format.memory import needing

PREAMBLE_MAGIC = b"\x89OCF\r\n\x1a\n"
PREAMBLE_SIZE = 64
PREAMBLE = PREAMBLE_MAGIC + bytes(PREAMBLE_SIZE - len(PREAMBLE_MAGIC))

FOOTER_MAGIC = b"\x89OCFEND\n"
_FOOTER = struct.Struct("<QQIHH8s")
FOOTER_SIZE = _FOOTER.size
MIN_FILE_SIZE = PREAMBLE_SIZE + FOOTER_SIZE

ALIGNMENT = 64
FORMAT_MAJOR = 1
# 1.1 added the object graph (spec/objects.md), which 1.0 readers ignore; 1.2 the pool
# (spec/pool.md, announced by a required feature) and higher limits on slices per
# tensor and index bytes; spec/format.md, "Versioning and compatibility", lists both.
FORMAT_MINOR = 2

INDEX_FILE_NAME = "index.ocf"


@dataclass(frozen=True)
class Footer:
    """The decoded footer of an index file."""

    index_offset: int
    index_length: int
    index_crc32c: int
    format_major: int = FORMAT_MAJOR
    format_minor: int = FORMAT_MINOR

    def pack(self) -> bytes:
        return _FOOTER.pack(
            self.index_offset,
            self.index_length,
            self.index_crc32c,
            self.format_major,
            self.format_minor,
            FOOTER_MAGIC,
        )


def check_preamble(head: bytes, path: str | os.PathLike[str], *, quote: bool = True) -> None:
    """Refuse a file whose first bytes are not the OCF preamble magic; the message shows
    them only when ``quote`` (the file the caller named, not one an index names)."""
    if head[: len(PREAMBLE_MAGIC)] != PREAMBLE_MAGIC:
        found = f"first bytes are {head[:8].hex(' ')}" if quote else \
            "it does not start with the preamble magic"
        raise MalformedError(
            f"not an OCF file: {found}, expected {PREAMBLE_MAGIC.hex(' ')}",
            path=path,
            requirement="R-FILE-002",
        )


def parse_footer(tail: bytes, file_size: int, path: str | os.PathLike[str]) -> Footer:
    """Decode and check the last FOOTER_SIZE bytes of an index file of ``file_size`` bytes.

    Checks follow the reader's order of spec/format.md: magic, version, index
    size limit, then the position of the index within the file.
    """
    if file_size < MIN_FILE_SIZE or len(tail) != FOOTER_SIZE:
        raise MalformedError(
            f"file is {file_size} bytes, shorter than the {MIN_FILE_SIZE} bytes of "
            "preamble and footer: truncated",
            path=path,
            requirement="R-FILE-004",
        )
    offset, length, crc, major, minor, magic = _FOOTER.unpack(tail)
    if magic != FOOTER_MAGIC:
        raise MalformedError(
            f"footer magic is {magic.hex(' ')}, expected {FOOTER_MAGIC.hex(' ')}: "
            "truncated or not an OCF index file",
            path=path,
            requirement="R-FILE-004",
        )
    if major != FORMAT_MAJOR:
        raise UnsupportedVersionError(
            f"format version {major}.{minor}; this reader implements major version "
            f"{FORMAT_MAJOR}",
            path=path,
            requirement="R-VER-001",
        )
    if length > MAX_INDEX_BYTES:
        raise LimitExceededError(
            f"index is {length} bytes, above the limit of {MAX_INDEX_BYTES}",
            path=path,
            requirement="R-LIMIT-001",
        )
    if offset < PREAMBLE_SIZE or offset + length != file_size - FOOTER_SIZE:
        raise MalformedError(
            f"index at offset {offset} with length {length} does not end where the "
            f"footer begins (byte {file_size - FOOTER_SIZE})",
            path=path,
            requirement="R-FILE-005",
        )
    return Footer(offset, length, crc, major, minor)


class IndexSource(Protocol):
    """An open index file: its size, and exact reads at offsets (a local file or an object)."""

    @property
    def path(self) -> str | os.PathLike[str]: ...

    @property
    def size(self) -> int: ...

    def pread(self, length: int, offset: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``; MALFORMED if the file is shorter."""
        ...


def read_index_bytes(source: IndexSource) -> tuple[bytes, Footer]:
    """The index bytes of an index file and its footer, checked in the reader's order of
    spec/format.md: preamble [R-FILE-002], footer (parse_footer), then the index
    checksum [R-FILE-006]. The one reading of an index tail, for checkpoints and parts."""
    path, size = source.path, source.size
    tail = b""
    if size >= MIN_FILE_SIZE:  # else parse_footer reports the truncation
        check_preamble(source.pread(PREAMBLE_SIZE, 0), path)
        tail = source.pread(FOOTER_SIZE, size - FOOTER_SIZE)
    footer = parse_footer(tail, size, path)
    with needing(footer.index_length, "reading the index", path=path):
        data = source.pread(footer.index_length, footer.index_offset)
    if crc32c(data) != footer.index_crc32c:
        raise IntegrityError(f"index checksum is {crc32c(data):#010x}, the footer says "
                             f"{footer.index_crc32c:#010x}", path=path,
                             requirement="R-FILE-006")
    return data, footer


def padding(position: int) -> int:
    """Zero bytes needed after ``position`` to reach the next 64-byte boundary."""
    return -position % ALIGNMENT
