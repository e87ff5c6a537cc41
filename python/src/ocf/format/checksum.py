"""CRC-32C as spec/format.md, "Checksums" defines it [R-CRC-001].

Castagnoli polynomial (reflected 0x82F63B78), initial value and final XOR
0xFFFFFFFF, not masked. The check value of ASCII "123456789" is 0xE3069283.
The C implementation releases the GIL, so threads checksum in parallel.
"""

from __future__ import annotations

import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``value`` (the CRC of earlier bytes)."""
    return int(_crc32c.crc32c(data, value))
