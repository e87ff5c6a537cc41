"""The header of a GGUF file, parsed and checked without llama.cpp.

GGUF (versions 2 and 3; all little-endian):

* magic ``GGUF``, a uint32 version, a uint64 tensor count and a uint64
  count of metadata key-value pairs;
* each pair: a string key, a uint32 value type, the value. Strings are a
  uint64 byte length and UTF-8 bytes; value types are the integers
  (uint8 ... int64), float32, float64, bool (one byte, 0 or 1), string and
  array (a uint32 element type, a uint64 count, the elements: arrays of
  arrays are allowed);
* each tensor's info: a string name, a uint32 number of dimensions, that
  many uint64 dimensions (innermost first, the reverse of NumPy's order),
  a uint32 ggml type (ocf.interop.gguf.ggml_types) and a uint64 offset into
  the data section;
* padding up to the alignment (the uint32 ``general.alignment``, default
  32), then the data section, where each tensor starts at an offset that
  is a multiple of the alignment.

Every file is hostile: each count, length, offset and alignment is checked
against the bytes the file holds before anything is allocated for it, the
header as a whole is bounded (MAX_HEADER_BYTES) and arrays nest at most
MAX_ARRAY_DEPTH deep. Each problem is a MalformedError (or InvalidError,
LimitExceededError, UnsupportedVersionError) naming the file, the field
and its offset.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from math import prod
from typing import IO

import numpy as np

from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    UnsupportedVersionError,
)
from ocf.format.limits import MAX_ELEMENTS, MAX_RANK, MAX_TENSORS, nonzero_product
from ocf.format.memory import needing
from ocf.format.metadata import MetadataValue
from ocf.interop.gguf.ggml_types import TYPES, GGMLType

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
# Header bytes read (metadata and tensor infos): a tokenizer's vocabulary takes a few
# MiB; parsed values take at most about 8 times their bytes in Python objects.
MAX_HEADER_BYTES = 256 << 20
MAX_ARRAY_DEPTH = 8
MAX_ALIGNMENT = 1 << 30

# Value types: number -> (name, struct format; None for string, array, bool).
_SCALARS: dict[int, tuple[str, str]] = {
    0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"),
    4: ("uint32", "<I"), 5: ("int32", "<i"), 6: ("float32", "<f"), 10: ("uint64", "<Q"),
    11: ("int64", "<q"), 12: ("float64", "<d"),
}
BOOL, STRING, ARRAY = 7, 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
# The fewest bytes a pair, a tensor info and an array element of each type take.
_MIN_PAIR = 8 + 4 + 1
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file; ``shape`` in NumPy's order (outermost first)."""

    name: str
    shape: tuple[int, ...]
    ggml: GGMLType
    offset: int  # into the data section
    nbytes: int


@dataclass(frozen=True)
class Header:
    """A checked GGUF header."""

    version: int
    metadata: dict[str, MetadataValue]
    tensors: list[TensorInfo]  # in the order of the file
    alignment: int
    data_start: int  # file offset of the data section


class _Cursor:
    """Reads the header from the file front to back, checking every length first."""

    def __init__(self, f: IO[bytes], path: str, file_size: int) -> None:
        self.f, self.path, self.file_size = f, path, file_size
        self.offset = 0

    def fail(self, field: str, problem: str, at: int | None = None) -> MalformedError:
        where = self.offset if at is None else at
        return MalformedError(f"{field} at offset {where}: {problem}", path=self.path)

    def take(self, n: int, field: str) -> bytes:
        if n > self.file_size - self.offset:
            raise self.fail(field, f"{n} bytes run past the end of the {self.file_size}-byte "
                            "file (truncated?)")
        if self.offset + n > MAX_HEADER_BYTES:
            raise LimitExceededError(f"{field} at offset {self.offset}: the header runs past "
                                     f"{MAX_HEADER_BYTES} bytes, the most this reader takes",
                                     path=self.path)
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail(field, "the file shrank while being read")
        self.offset += n
        return data

    def u32(self, field: str) -> int:
        value: int = _U32.unpack(self.take(4, field))[0]
        return value

    def u64(self, field: str) -> int:
        value: int = _U64.unpack(self.take(8, field))[0]
        return value

    def count(self, field: str, each: int) -> int:
        """A uint64 count of items of at least ``each`` bytes, which the file must hold."""
        at = self.offset
        n = self.u64(field)
        if n * each > self.file_size - self.offset:
            raise self.fail(field, f"{n} items of at least {each} bytes each do not fit in "
                            f"the {self.file_size - self.offset} bytes left", at)
        return n

    def string(self, field: str) -> str:
        at = self.offset
        raw = self.take(self.count(field, 1), field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(field, f"string is not UTF-8: {exc.reason}", at) from None


def read_header(f: IO[bytes], path: str, file_size: int) -> Header:
    """Parse and check the header of the GGUF file open as ``f`` (at offset 0)."""
    cursor = _Cursor(f, path, file_size)
    magic = cursor.take(4, "magic")
    if magic != MAGIC:
        raise cursor.fail("magic", f"{magic!r} is not b'GGUF'", 0)
    version = cursor.u32("version")
    if version not in VERSIONS:
        swapped = "; a big-endian file, which OCF does not read" if (
            _U32.unpack(_U32.pack(version)[::-1])[0] in VERSIONS) else ""
        raise UnsupportedVersionError(f"GGUF version {version} is not read (versions "
                                      f"{VERSIONS[0]} and {VERSIONS[1]} are){swapped}",
                                      path=path)
    tensor_count = cursor.count("tensor count", _MIN_TENSOR_INFO)
    if tensor_count > MAX_TENSORS:
        raise LimitExceededError(f"{tensor_count} tensors exceed the limit of {MAX_TENSORS}",
                                 path=path, requirement="R-LIMIT-001")
    pair_count = cursor.count("metadata count", _MIN_PAIR)
    with needing(min(file_size, MAX_HEADER_BYTES) * 8, "reading the GGUF header", path=path):
        metadata = _read_metadata(cursor, pair_count)
        alignment = _alignment(cursor, metadata)
        infos = [_read_tensor_info(cursor, i) for i in range(tensor_count)]
    data_start = -(-cursor.offset // alignment) * alignment
    tensors = _checked_tensors(cursor, infos, alignment, data_start)
    return Header(version, metadata, tensors, alignment, data_start)


def _read_metadata(cursor: _Cursor, count: int) -> dict[str, MetadataValue]:
    metadata: dict[str, MetadataValue] = {}
    for i in range(count):
        at = cursor.offset
        key = cursor.string(f"metadata key {i}")
        if key in metadata:
            raise cursor.fail(f"metadata key {key!r}", "the key appears twice", at)
        value_type = cursor.u32(f"value type of {key!r}")
        metadata[key] = _value(cursor, value_type, f"value of {key!r}", 0)
    return metadata


def _value(cursor: _Cursor, value_type: int, field: str, depth: int) -> MetadataValue:
    if value_type in _SCALARS:
        fmt = _SCALARS[value_type][1]
        value: MetadataValue = struct.unpack(fmt, cursor.take(struct.calcsize(fmt), field))[0]
        return value
    if value_type == BOOL:
        return _bool(cursor, field)
    if value_type == STRING:
        return cursor.string(field)
    if value_type == ARRAY:
        return _array(cursor, field, depth)
    raise cursor.fail(field, f"unknown value type {value_type}", cursor.offset - 4)


def _bool(cursor: _Cursor, field: str) -> bool:
    byte = cursor.take(1, field)[0]
    if byte > 1:
        raise cursor.fail(field, f"a bool is 0 or 1, not {byte}", cursor.offset - 1)
    return byte == 1


def _array(cursor: _Cursor, field: str, depth: int) -> list[MetadataValue]:
    if depth >= MAX_ARRAY_DEPTH:
        raise LimitExceededError(f"{field} at offset {cursor.offset}: arrays nest deeper "
                                 f"than {MAX_ARRAY_DEPTH} levels", path=cursor.path)
    element_type = cursor.u32(f"{field} element type")
    scalar = _SCALARS.get(element_type)
    if scalar is not None:  # numbers in one read
        itemsize = struct.calcsize(scalar[1])
        n = cursor.count(f"{field} length", itemsize)
        values: list[MetadataValue] = np.frombuffer(
            cursor.take(n * itemsize, field), np.dtype(scalar[1])).tolist()
        return values
    each = {BOOL: 1, STRING: 8, ARRAY: 12}.get(element_type)
    if each is None:
        raise cursor.fail(f"{field} element type", f"unknown value type {element_type}",
                          cursor.offset - 4)
    n = cursor.count(f"{field} length", each)
    return [_value(cursor, element_type, f"{field}[{i}]", depth + 1) for i in range(n)]


def _alignment(cursor: _Cursor, metadata: dict[str, MetadataValue]) -> int:
    value = metadata.get(ALIGNMENT_KEY, DEFAULT_ALIGNMENT)
    if (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_ALIGNMENT
            or value & (value - 1)):
        raise InvalidError(f"{ALIGNMENT_KEY} is {value!r}; it must be a power of two from 1 "
                           f"to {MAX_ALIGNMENT}", path=cursor.path)
    return value


def _read_tensor_info(cursor: _Cursor, i: int) -> tuple[int, str, tuple[int, ...], int, int]:
    at = cursor.offset
    name = cursor.string(f"name of tensor {i}")
    rank = cursor.u32(f"dimension count of {name!r}")
    if rank > MAX_RANK:
        raise LimitExceededError(f"tensor info at offset {at}: {rank} dimensions exceed the "
                                 f"limit of {MAX_RANK}", path=cursor.path, key=name,
                                 requirement="R-TENSOR-003")
    dims = [cursor.u64(f"dimension {d} of {name!r}") for d in range(rank)]
    code = cursor.u32(f"type of {name!r}")
    offset = cursor.u64(f"data offset of {name!r}")
    return at, name, tuple(reversed(dims)), code, offset


def _checked_tensors(cursor: _Cursor, infos: list[tuple[int, str, tuple[int, ...], int, int]],
                     alignment: int, data_start: int) -> list[TensorInfo]:
    """Tensor infos whose types, shapes and bytes are checked; the bytes must lie in
    the data section without overlapping."""
    data_length = cursor.file_size - data_start
    if infos and data_length < 0:
        raise cursor.fail("data section", f"starts at offset {data_start}, past the end of "
                          f"the {cursor.file_size}-byte file", data_start)
    seen: set[str] = set()
    tensors = []
    for at, name, shape, code, offset in infos:
        if name in seen:
            raise cursor.fail(f"tensor info of {name!r}", "the name appears twice", at)
        seen.add(name)
        tensors.append(_tensor(cursor, at, name, shape, code, offset, alignment, data_length))
    ordered = sorted(tensors, key=lambda t: t.offset)
    for before, after in itertools.pairwise(ordered):
        if after.offset < before.offset + before.nbytes:
            raise InvalidError(f"data of {after.name!r} at offset {after.offset} overlaps "
                               f"tensor {before.name!r}", path=cursor.path, key=after.name)
    return tensors


def _tensor(cursor: _Cursor, at: int, name: str, shape: tuple[int, ...], code: int,
            offset: int, alignment: int, data_length: int) -> TensorInfo:
    ggml = TYPES.get(code)
    if ggml is None:
        raise InvalidError(f"tensor info at offset {at}: ggml type {code} is not one this "
                           f"reader knows ({', '.join(t.name for t in TYPES.values())})",
                           path=cursor.path, key=name)
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"tensor info at offset {at}: shape {list(shape)} exceeds "
                                 f"{MAX_ELEMENTS} elements", path=cursor.path, key=name,
                                 requirement="R-TENSOR-003")
    if ggml.quantized and not shape:
        raise InvalidError(f"tensor info at offset {at}: a {ggml.name} tensor needs at least "
                           "one dimension to hold its blocks", path=cursor.path, key=name)
    if shape and shape[-1] % ggml.block_elements:
        raise InvalidError(f"tensor info at offset {at}: the innermost dimension "
                           f"{shape[-1]} is not a multiple of {ggml.name}'s block of "
                           f"{ggml.block_elements} elements", path=cursor.path, key=name)
    nbytes = ggml.nbytes(prod(shape))
    if offset % alignment:
        raise MalformedError(f"tensor info at offset {at}: data offset {offset} is not a "
                             f"multiple of the alignment {alignment}", path=cursor.path,
                             key=name)
    if offset > data_length or nbytes > data_length - offset:
        raise MalformedError(f"tensor info at offset {at}: {nbytes} bytes at data offset "
                             f"{offset} run past the {data_length}-byte data section "
                             "(truncated?)", path=cursor.path, key=name)
    return TensorInfo(name, shape, ggml, offset, nbytes)
