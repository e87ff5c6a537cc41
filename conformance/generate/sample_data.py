"""Sample tensor contents, as canonical bytes, for every dtype of spec/format.md.

Values are given as integers or as IEEE bit patterns and packed with
``struct`` (little-endian), so they do not depend on any float library:
special values (NaN with payloads, infinities, -0, subnormals, extremes) are
exact. No random generator is used.
"""

from __future__ import annotations

import struct
from typing import Any

import semantic


def pack(fmt: str, values: list[Any]) -> bytes:
    return struct.pack(f"<{len(values)}{fmt}", *values)


# float16: 1, -2, +inf, -inf, quiet NaN, -0, smallest subnormal, largest finite,
# a signalling NaN with payload, 0.5.
F16 = [0x3C00, 0xC000, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x0001, 0x7BFF, 0x7D01, 0x3800]
BF16 = [0x3F80, 0xC000, 0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x0001, 0x7F7F, 0xFFC1, 0x3F00]
F32 = [0x3F800000, 0xC0000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000, 0x00000001,
       0x7F7FFFFF, 0x7FA00001]
F64 = [0x3FF0000000000000, 0xC000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
       0x7FF8000000000000, 0x8000000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF,
       0x7FF4000000000001, 0x3FB999999999999A]

STRINGS = [b"", b"a", b"\x00\xff" * 3, "\u00fcn\u00efcode".encode(), b"\n" * 9, b"z"]


def dtype_samples() -> dict[str, tuple[list[int], bytes]]:
    """name -> (shape, canonical bytes), one tensor per dtype."""
    out: dict[str, tuple[list[int], bytes]] = {
        "bool": ([2, 3], bytes([1, 0, 1, 0, 0, 1])),
        "int8": ([5], pack("b", [-128, -1, 0, 1, 127])),
        "int16": ([2, 3], pack("h", [-32768, -1, 0, 1, 32767, 0x1234])),
        "int32": ([2, 3, 4], pack("i", [(k * 0x0A0B0C0D) % (1 << 32) - (1 << 31)
                                        for k in range(24)])),
        "int64": ([6], pack("q", [-(1 << 63), -1, 0, 1, (1 << 63) - 1, 0x0102030405060708])),
        "uint8": ([16, 16], bytes(range(256))),
        "uint16": ([4], pack("H", [0, 1, 0x1234, 0xFFFF])),
        "uint32": ([2, 2], pack("I", [0, 1, 0x12345678, 0xFFFFFFFF])),
        "uint64": ([3], pack("Q", [0, 0x0102030405060708, (1 << 64) - 1])),
        "float16": ([10], pack("H", F16)),
        "bfloat16": ([2, 5], pack("H", BF16)),
        "float32": ([3, 3], pack("I", F32)),
        "float64": ([10], pack("Q", F64)),
        # complex: real part first [R-DATA-005]
        "complex64": ([3], pack("I", [0x3F800000, 0xC0000000, 0x7F800000, 0x7FC00000,
                                      0x80000000, 0x00000001])),
        "complex128": ([2], pack("Q", [0x3FF0000000000000, 0xFFF0000000000000,
                                       0x7FF8000000000000, 0x8000000000000000])),
        # every one of the 256 codes, NaNs included
        "float8_e4m3fn": ([16, 16], bytes(range(256))),
        "float8_e5m2": ([16, 16], bytes(range(255, -1, -1))),
        "bytes": ([2, 3], semantic.join_strings(STRINGS)),
    }
    for name, (shape, raw) in out.items():
        semantic.check_raw(name, shape, raw)
    return out


def ramp(dtype: str, shape: list[int], *, step: int = 1) -> bytes:
    """Distinct, compressible values 0, step, 2*step, ... of an integer or float dtype."""
    n = semantic.count(shape)
    if dtype == "float32":
        return pack("f", [float(k * step) for k in range(n)])
    if dtype == "float64":
        return pack("d", [float(k * step) for k in range(n)])
    if dtype == "bytes":
        return semantic.join_strings([f"s{k * step}".encode() for k in range(n)])
    if dtype == "bool":
        return bytes((k * step) % 2 for k in range(n))
    code = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B",
            "uint16": "H", "uint32": "I", "uint64": "Q"}[dtype]
    bits = struct.calcsize(code) * 8
    signed = code.islower()
    values = []
    for k in range(n):
        v = (k * step) % (1 << bits)
        if signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        values.append(v)
    return pack(code, values)
