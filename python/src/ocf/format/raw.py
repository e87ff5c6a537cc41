"""The raw bytes of a tensor: NumPy arrays to and from spec bytes.

Fixed-size dtypes are little-endian, C order [R-DATA-005]. Byte strings
(DTYPE_BYTES) are n u64 lengths followed by the n payloads [R-DTYPE-003];
they come back as NumPy object arrays of ``bytes``.
"""

from __future__ import annotations

import numpy as np

from ocf.format.dtypes import Dtype
from ocf.format.errors import InvalidError


def to_raw(array: np.ndarray, dtype: Dtype) -> memoryview:
    """The spec bytes of ``array``, without a copy when it is already C-ordered LE."""
    if dtype.numpy is None:
        return memoryview(encode_strings(array))
    if array.dtype != dtype.numpy or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array, dtype=dtype.numpy)
    if array.ndim and array.size and not isinstance(dtype.kind, str):
        # A NumPy type exports its buffer: the cheapest flat byte view (a few
        # microseconds a tensor count when a checkpoint holds many small ones).
        return array.data.cast("B")
    return array.reshape(-1).view(np.uint8).data


def encode_strings(array: np.ndarray) -> bytes:
    """Encode an array of byte strings (object array of bytes, or NumPy 'S')."""
    items = [_as_bytes(x) for x in array.reshape(-1).tolist()]
    lengths = np.array([len(x) for x in items], dtype="<u8")
    return lengths.tobytes() + b"".join(items)


def _as_bytes(item: object) -> bytes:
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    raise InvalidError(
        f"a byte-string tensor holds a {type(item).__name__}; only bytes are storable "
        "(encode text explicitly)",
        requirement="R-DTYPE-003",
    )


def decode_strings(raw: np.ndarray, count: int, shape: tuple[int, ...]) -> np.ndarray:
    """Decode ``count`` byte strings from raw bytes (uint8 array) checked against the table."""
    table_end = 8 * count
    if table_end > raw.size:
        raise InvalidError(
            f"{raw.size} raw bytes cannot hold the length table of {count} strings",
            requirement="R-DTYPE-003",
        )
    lengths = raw[:table_end].view("<u8").tolist()
    if sum(lengths) != raw.size - table_end:
        raise InvalidError(
            f"string lengths add up to {sum(lengths)} bytes, the payload is "
            f"{raw.size - table_end}",
            requirement="R-DTYPE-003",
        )
    payload = raw[table_end:].tobytes()
    out = np.empty(count, dtype=object)
    position = 0
    for i, length in enumerate(lengths):
        out[i] = payload[position : position + length]
        position += length
    return out.reshape(shape)


def check_bool(array: np.ndarray) -> None:
    """Refuse bool tensors whose bytes are not 0 or 1 [R-DTYPE-002]."""
    if array.size and array.view(np.uint8).max() > 1:
        raise InvalidError("bool tensor holds bytes other than 0x00 and 0x01",
                           requirement="R-DTYPE-002")
