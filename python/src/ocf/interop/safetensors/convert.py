"""safetensors files to OCF checkpoints and back, without the safetensors package.

The safetensors layout: an unsigned 64-bit little-endian length N, then N
bytes of UTF-8 JSON, then the data buffer. The JSON object maps each tensor
name to ``{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}``
(offsets relative to the data buffer) and may hold ``"__metadata__"``, a
map of strings to strings. Every header is treated as hostile: its length,
JSON, dtypes, shapes and offsets are checked (the tensors must tile the
buffer exactly, as the safetensors package requires) before any data is
read, and each problem is an OCF error naming the file and tensor. Names
and metadata must be valid Unicode (JSON's ``\\ud800`` escapes can spell a
lone surrogate, which UTF-8 cannot encode).

What OCF keeps (typed metadata of the checkpoint):

``safetensors.metadata``
    The ``__metadata__`` map of strings, when the file has one.
``safetensors.order``
    ``{"metadata": [...], "tensors": [...]}``: the order of the metadata
    keys in the header and of the tensors in the data buffer. The
    safetensors package writes metadata keys in a random (hash) order, so a
    bit-exact round trip needs it.

Writing follows the safetensors package: tensors in the recorded order
(then any others by descending dtype, as the package sorts them, then by
name), compact JSON with ``__metadata__`` first, the header padded with
spaces to a multiple of 8 bytes. A file the package wrote therefore
converts to OCF and back to the same bytes. The checkpoint's other metadata
entries that are strings join ``__metadata__`` (after those of
``safetensors.metadata``, which win a clash); entries of other types and an
object graph have no place in safetensors: they are dropped with a warning.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any, NoReturn

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, OCFError
from ocf.format.limits import MAX_ELEMENTS, MAX_RANK, MAX_TENSORS, nonzero_product
from ocf.format.memory import needing
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import pieces
from ocf.format.reader import Reader
from ocf.format.storage.local import atomic_output
from ocf.format.writer import Writer
from ocf.interop.output import open_source, warn_dropped, with_path, written

METADATA_KEY = "safetensors.metadata"
ORDER_KEY = "safetensors.order"
_HEADER_FIELD = "__metadata__"
_OWN_KEYS = (METADATA_KEY, ORDER_KEY)
_LENGTH = struct.Struct("<Q")
# The safetensors package refuses larger headers; so does this reader.
MAX_HEADER_BYTES = 100_000_000

# safetensors dtype name -> OCF dtype name, in the order of the package's
# Dtype enum, by which it sorts tensors (highest first) when writing.
DTYPES: dict[str, str] = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32",
    "C64": "complex64", "F64": "float64", "I64": "int64", "U64": "uint64",
}
# Defined by safetensors but with no OCF dtype (sub-byte and scale-only floats).
UNSUPPORTED = ("F4", "F6_E2M3", "F6_E3M2", "F8_E8M0")
_TO_SAFETENSORS = {ocf: st for st, ocf in DTYPES.items()}
_RANK = {st: i for i, st in enumerate(DTYPES)}


@dataclass(frozen=True)
class Entry:
    """One tensor of a safetensors header."""

    name: str
    dtype: dtypes.Dtype
    shape: tuple[int, ...]
    begin: int  # offsets into the data buffer
    end: int


@dataclass(frozen=True)
class Header:
    """A checked safetensors header."""

    entries: list[Entry]  # in data-buffer order
    metadata: dict[str, str] | None
    metadata_order: list[str]
    data_start: int  # file offset of the data buffer


# -- reading ----------------------------------------------------------------------


def read_header(f: Any, path: str, file_size: int) -> Header:
    """Parse and check the header of the safetensors file open as ``f``."""
    if file_size < _LENGTH.size:
        raise MalformedError(f"file of {file_size} bytes is shorter than the 8-byte header "
                             "length of a safetensors file", path=path)
    (length,) = _LENGTH.unpack(f.read(_LENGTH.size))
    if length > MAX_HEADER_BYTES:
        raise LimitExceededError(f"header length {length} exceeds the safetensors limit of "
                                 f"{MAX_HEADER_BYTES} bytes", path=path)
    if _LENGTH.size + length > file_size:
        raise MalformedError(f"header length {length} runs past the end of the "
                             f"{file_size}-byte file", path=path)
    with needing(length, "reading the header", path=path):
        fields = _parse_json(f.read(length), path)
    metadata, order = _metadata(fields.pop(_HEADER_FIELD, None), path)
    if len(fields) > MAX_TENSORS:
        raise LimitExceededError(f"{len(fields)} tensors exceed the limit of {MAX_TENSORS}",
                                 path=path, requirement="R-LIMIT-001")
    entries = [_entry(name, value, path) for name, value in fields.items()]
    data_start = _LENGTH.size + length
    _check_tiling(entries, file_size - data_start, path)
    entries.sort(key=lambda e: (e.begin, e.end))
    return Header(entries, metadata, order, data_start)


def _parse_json(raw: bytes, path: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedError(f"header is not UTF-8: {exc}", path=path) from None
    if not text.startswith("{"):
        raise MalformedError("header does not start with '{'", path=path)

    def no_constants(name: str) -> NoReturn:
        raise MalformedError(f"header holds the non-JSON number {name}", path=path)

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise MalformedError(f"header names {key!r} twice", path=path)
            result[key] = value
        return result

    try:
        fields = json.loads(text, object_pairs_hook=unique, parse_constant=no_constants)
    except OCFError:
        raise
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4300 digits
        raise MalformedError(f"header is not valid JSON: {exc}", path=path) from None
    except RecursionError:
        raise MalformedError("header JSON nests too deeply", path=path) from None
    if not isinstance(fields, dict):
        raise MalformedError("header is not a JSON object", path=path)
    for name in fields:
        _check_text(name, "tensor name", path)
    return fields


def _check_text(text: str, what: str, path: str, key: str | None = None) -> None:
    """Refuse a string UTF-8 cannot encode (a lone surrogate from a JSON escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedError(f"{what} {text!r} is not valid Unicode: {exc.reason} at "
                             f"character {exc.start}", path=path, key=key) from None


def _metadata(value: object, path: str) -> tuple[dict[str, str] | None, list[str]]:
    if value is None:
        return None, []
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MalformedError(f"{_HEADER_FIELD} must be a map of strings to strings",
                             path=path)
    for key, text in value.items():
        _check_text(key, f"{_HEADER_FIELD} key", path)
        _check_text(text, f"{_HEADER_FIELD} value of {key!r}", path)
    return value, list(value)


def _entry(name: str, value: object, path: str) -> Entry:
    def bad(problem: str) -> MalformedError:
        return MalformedError(problem, path=path, key=name)

    if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data_offsets"}:
        raise bad("a tensor entry must be an object with exactly dtype, shape and "
                  "data_offsets")
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    if dtype in UNSUPPORTED:
        raise InvalidError(f"safetensors dtype {dtype} has no OCF equivalent", path=path,
                           key=name, requirement="R-DTYPE-001")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise bad(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise bad(f"shape {shape!r} is not a list of non-negative integers")
    if len(shape) > MAX_RANK or nonzero_product(tuple(shape)) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {shape} exceeds the limits of {MAX_RANK} dimensions "
                                 f"and {MAX_ELEMENTS} elements", path=path, key=name,
                                 requirement="R-TENSOR-003")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))
            and offsets[0] <= offsets[1]):
        raise bad(f"data_offsets {offsets!r} are not [begin, end] with 0 <= begin <= end")
    info = dtypes.BY_NAME[DTYPES[dtype]]
    expected = int(np.prod(shape, dtype=object)) * info.itemsize
    if offsets[1] - offsets[0] != expected:
        raise InvalidError(f"data_offsets {offsets} span {offsets[1] - offsets[0]} bytes; a "
                           f"{dtype} tensor of shape {shape} takes {expected}", path=path,
                           key=name)
    return Entry(name, info, tuple(shape), offsets[0], offsets[1])


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_tiling(entries: list[Entry], data_length: int, path: str) -> None:
    """The tensors must cover the data buffer exactly: no overlap, no gap, nothing after."""
    position, previous = 0, None
    for entry in sorted(entries, key=lambda e: (e.begin, e.end)):
        if entry.begin < position:
            raise InvalidError(f"data_offsets [{entry.begin}, {entry.end}] overlap tensor "
                               f"{previous!r}", path=path, key=entry.name)
        if entry.begin > position:
            raise InvalidError(f"{entry.begin - position} bytes before data_offsets "
                               f"[{entry.begin}, {entry.end}] belong to no tensor", path=path,
                               key=entry.name)
        position, previous = entry.end, entry.name
    if position > data_length:
        raise MalformedError(f"tensor data ends at {position} but the file holds "
                             f"{data_length} data bytes (truncated?)", path=path, key=previous)
    if position < data_length:
        raise InvalidError(f"{data_length - position} bytes after the last tensor belong to "
                           "no tensor", path=path)


def read_tensor(fd: int, entry: Entry, header: Header, path: str) -> np.ndarray:
    """The values of ``entry`` as a new array, read from the open safetensors file ``fd``."""
    return read_elements(fd, entry, header, path, 0, prod(entry.shape)).reshape(entry.shape)


def read_elements(fd: int, entry: Entry, header: Header, path: str, begin: int, end: int
                  ) -> np.ndarray:
    """Elements ``begin`` to ``end`` (C order, flattened) of ``entry``, as a new array."""
    assert entry.dtype.numpy is not None  # safetensors has no variable-length dtype
    itemsize = entry.dtype.itemsize
    with needing((end - begin) * itemsize, "reading this tensor", path=path, key=entry.name):
        out = np.empty((end - begin) * itemsize, dtype=np.uint8)
    offset = header.data_start + entry.begin + begin * itemsize
    got = os.preadv(fd, [out.data], offset) if out.size else 0
    if got != out.size:
        raise MalformedError(f"read {got} of {out.size} bytes; the file shrank",
                             path=path, key=entry.name)
    return out.view(entry.dtype.numpy)


def ocf_metadata(header: Header) -> dict[str, MetadataValue]:
    """The OCF metadata keeping what a safetensors header holds besides tensors."""
    metadata: dict[str, MetadataValue] = {ORDER_KEY: {
        "metadata": list(header.metadata_order), "tensors": [e.name for e in header.entries]}}
    if header.metadata is not None:
        metadata[METADATA_KEY] = dict(header.metadata)
    return metadata


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the safetensors file ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    path = os.fspath(src)
    with open_source(path) as f:
        header = read_header(f, path, os.fstat(f.fileno()).st_size)
        metadata = ocf_metadata(header)
        key = None
        try:  # the Writer refuses names OCF cannot hold (empty, NUL, too long)
            with Writer(dst, metadata=metadata, **options) as writer:
                for entry in header.entries:
                    key = entry.name
                    writer.write(key, read_tensor(f.fileno(), entry, header, path))
                    written(entry.end - entry.begin)
                key = None  # what commit refuses concerns no one tensor
        except OCFError as exc:
            raise with_path(exc, path, key) from None


# -- writing ----------------------------------------------------------------------


def _order(reader: Reader) -> tuple[list[str], list[str]]:
    """Tensor names and metadata keys in writing order (see the module docstring)."""
    recorded = reader.metadata.get(ORDER_KEY)
    recorded = recorded if isinstance(recorded, dict) else {}

    def listed(field: str) -> list[str]:
        values = recorded.get(field)
        return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []

    first = [n for n in dict.fromkeys(listed("tensors")) if n in reader]
    rest = sorted((n for n in reader if n not in set(first)),
                  key=lambda n: (-_RANK[_safetensors_dtype(reader, n)], n))
    return first + rest, listed("metadata")


def _safetensors_dtype(reader: Reader, key: str) -> str:
    name = _TO_SAFETENSORS.get(reader[key].dtype.name)
    if name is None:
        raise InvalidError(f"safetensors has no dtype for OCF {reader[key].dtype.name}; "
                           f"it stores {', '.join(_TO_SAFETENSORS)}", path=reader.path,
                           key=key)
    return name


def _user_metadata(reader: Reader, key_order: list[str]) -> dict[str, str] | None:
    """The ``__metadata__`` to write: ``safetensors.metadata``, then the checkpoint's
    other string-valued entries (safetensors holds strings only), in recorded order."""
    value: MetadataValue = reader.metadata.get(METADATA_KEY)
    if value is not None and (not isinstance(value, dict) or
                              not all(isinstance(v, str) for v in value.values())):
        raise InvalidError(f"metadata {METADATA_KEY!r} must be a map of strings to strings "
                           "to be written as safetensors __metadata__", path=reader.path)
    found: dict[str, str] = {k: v for k, v in (value or {}).items() if isinstance(v, str)}
    for key, text in reader.metadata.items():
        if isinstance(text, str) and key not in _OWN_KEYS and key not in found:
            found[key] = text
    if value is None and not found:
        return None
    ordered = [k for k in dict.fromkeys(key_order) if k in found]
    ordered += sorted(k for k in found if k not in set(ordered))
    return {k: found[k] for k in ordered}


def header_bytes(entries: Mapping[str, tuple[str, tuple[int, ...], int, int]],
                 metadata: dict[str, str] | None) -> bytes:
    """The length prefix and JSON header, as the safetensors package lays them out."""
    fields: dict[str, object] = {}
    if metadata is not None:
        fields[_HEADER_FIELD] = metadata
    for name, (dtype, shape, begin, end) in entries.items():
        fields[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return _LENGTH.pack(len(text)) + text


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write the tensors of the OCF checkpoint ``src`` as the safetensors file ``dst``.

    The header is computed from the index first; the data then streams
    through in pieces (ocf.format.pieces), so memory stays bounded.
    """
    with Reader(src) as reader:
        if _HEADER_FIELD in reader:
            raise InvalidError(f"a tensor named {_HEADER_FIELD} would be read back as the "
                               "safetensors metadata field; rename it", path=reader.path,
                               key=_HEADER_FIELD)
        names, key_order = _order(reader)
        entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
        position = 0
        for name in names:
            info = reader[name]
            size = int(np.prod(info.shape, dtype=object)) * info.dtype.itemsize
            entries[name] = (_safetensors_dtype(reader, name), info.shape, position,
                             position + size)
            position += size
        header = header_bytes(entries, _user_metadata(reader, key_order))
        warn_dropped("metadata other than strings",
                     (k for k, v in reader.metadata.items()
                      if k not in _OWN_KEYS and not isinstance(v, str)), "safetensors")
        if reader.object_graph is not None:
            warn_dropped("an object graph", ["(object graph)"], "safetensors")
        with atomic_output(dst) as out:
            out.write(header)
            for name in names:
                # In pieces read (not mapped) from the checkpoint: memory holds one piece,
                # whatever the size of the tensors.
                for piece in pieces(reader[name].shape, reader[name].dtype.itemsize):
                    values = reader.get_slice(name, piece.index, mapped=False)
                    raw = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
                    out.write(raw.data)
                    written(raw.size)
