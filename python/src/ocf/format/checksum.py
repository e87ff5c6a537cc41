"""CRC-32C as spec/format.md, "Checksums" defines it [R-CRC-001].

Castagnoli polynomial (reflected 0x82F63B78), initial value and final XOR
0xFFFFFFFF, not masked. The check value of ASCII "123456789" is 0xE3069283.
The C implementation releases the GIL, so threads checksum in parallel.
"""

from __future__ import annotations

from crc32c import crc32c

#: ``crc32c(data, value=0)``: the CRC-32C of ``data``, continuing from ``value``
#: (the CRC of earlier bytes). The C function itself, not a wrapper: it is
#: called once per tensor, and a checkpoint may hold hundreds of thousands.
__all__ = ["crc32c"]
