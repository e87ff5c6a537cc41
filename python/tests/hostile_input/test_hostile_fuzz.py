"""Hostile input: damaged or crafted checkpoints fail with an OCFError, and nothing else.

The property tests take small valid checkpoints, damage them at random and
read everything back. Whatever the damage, the reader either returns exactly
the original values or raises a subclass of :class:`ocf.OCFError`. Any other
exception (ValueError, IndexError, KeyError, OSError, MemoryError,
struct.error, zstandard.ZstdError, DecodeError, OverflowError, ...) escapes
the ``except ocf.OCFError`` clauses below and fails the test. Every read also
runs under tracemalloc, and its peak must stay below what the file's size
justifies (see :func:`allowed_peak`).

Why "exactly the original values" is the right demand for raw damage: every
byte of an index file or shard is either checked or ignorable by design.
The preamble magic, the footer and the index bytes (CRC-32C in the footer)
are checked; each chunk of tensor bytes has a CRC-32C in the index. Only the
reserved preamble bytes [R-FILE-003], the padding between blocks
[R-DATA-004] and format_minor [R-VER-002] may change unnoticed, and none of
them changes a value. Random damage that keeps a CRC-32C valid has
probability about 2^-32 per example.

Targeted, deterministic cases are in test_hostile_files.py; memory, file
descriptors and file kinds in test_hostile_resources.py; what they share in
hostile.py.
"""
from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import zstandard
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from helpers import (
    FOOTER_FIELDS,
    FOOTER_SIZE,
    INDEX_FILE_NAME,
    PREAMBLE_SIZE,
    BlockSpec,
    TensorSpec,
    build_file,
    crc,
    flip_bit,
    index_bytes_of,
    make_index,
    patch,
    read_layout,
    replace_index,
)
from hostile import (
    DIR_NAME,
    FILE_NAME,
    MAX_INDEX_BYTES,
    METADATA,
    Original,
    Outcome,
    check_memory,
    check_original_or_error,
    materialized,
    read_everything,
    snapshot,
    sub_index,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_support import traced_memory

import ocf
from ocf.v1 import index_pb2, metadata_pb2, tensor_pb2

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])



# -- the valid checkpoints that get damaged ------------------------------------


def _write(root: Path, name: str, form: str, arrays: dict[str, np.ndarray],
           sliced: dict[str, list[tuple[tuple[int, ...], np.ndarray]]] | None = None,
           **options: Any) -> Original:
    folder = root / name
    folder.mkdir()
    target = folder / (FILE_NAME if form == "file" else DIR_NAME)
    expected = dict(arrays)
    with ocf.Writer(target, layout=form, metadata=METADATA, **options) as writer:
        for key, array in arrays.items():
            writer.write(key, array)
        for key, pieces in (sliced or {}).items():
            full = np.empty(_global_shape(pieces), dtype=pieces[0][1].dtype)
            for start, piece in pieces:
                writer.write_slice(key, piece, start, full.shape)
                full[tuple(slice(s, s + e) for s, e in zip(start, piece.shape))] = piece
            expected[key] = full
    paths = [target] if form == "file" else sorted(target.iterdir())
    return Original(name, form, {p.name: p.read_bytes() for p in paths}, expected)


def _global_shape(pieces: list[tuple[tuple[int, ...], np.ndarray]]) -> tuple[int, ...]:
    rank = len(pieces[0][0])
    return tuple(max(start[d] + piece.shape[d] for start, piece in pieces) for d in range(rank))


def _sliced_int32() -> list[tuple[tuple[int, ...], np.ndarray]]:
    full = np.arange(24, dtype=np.int32).reshape(6, 4) * -3
    return [((0, 0), full[0:2, :]), ((2, 0), full[2:6, 0:2]), ((2, 2), full[2:6, 2:4])]


def _mixed() -> dict[str, np.ndarray]:
    return {
        "strings": np.array([[b"", b"a", b"\x00\xff" * 5], [b"xyz", b"", "é".encode()]],
                            dtype=object),
        "flags": np.arange(16).reshape(4, 4) % 3 == 0,
        "half": np.linspace(-2, 2, 7).astype(np.float16),
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Original]:
    root = tmp_path_factory.mktemp("originals")
    rng = np.random.default_rng(20240601)
    originals = [
        _write(root, "plain", "file", {
            "w": np.arange(15, dtype=np.float32).reshape(3, 5) / 7,
            "big": rng.standard_normal((40, 30)),  # 9600 bytes: three 4096-byte chunks
            "scalar": np.array(-7, dtype=np.int64),
            "empty": np.zeros((0, 3), dtype=np.uint8),
        }, chunk_size=4096),
        _write(root, "zstd", "file", {
            "spread": np.round(rng.standard_normal(5000), 2).astype(np.float32),  # 5 chunks
            "ints": np.arange(64 * 33, dtype=np.int16).reshape(64, 33),
            "ones": np.ones(10000, dtype=np.uint8),
        }, compression="zstd", byte_shuffle=True, chunk_size=4096),
        _write(root, "mixed", "file", _mixed(), {"sliced": _sliced_int32()}),
        _write(root, "mixed_zstd", "file", _mixed(), {"sliced": _sliced_int32()},
               compression="zstd", byte_shuffle=True, chunk_size=4096),
        _write(root, "directory", "directory", {
            "a": np.arange(256, dtype=np.float32).reshape(16, 16),  # a and c: first shard
            "c": np.arange(100, dtype=np.uint8),
            "b": np.arange(600, dtype=np.int64) * 3,  # 4800 bytes: a shard of its own
        }, max_shard_size=4096),
    ]
    shards = [n for n in originals[-1].files if n != INDEX_FILE_NAME]
    assert len(shards) == 2, f"the directory-form original should have 2 shards: {shards}"
    return {o.name: o for o in originals}


FILE_ORIGINALS = ("plain", "zstd", "mixed", "mixed_zstd")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mutated")


# -- raw damage ------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """One change to the bytes of one file of a checkpoint."""

    file: str
    kind: str  # truncate, flip, overwrite, insert, delete, footer
    offset: int
    data: bytes = b""
    amount: int = 0  # bit for flip, byte count for delete
    footer_field: str = ""

    def apply(self, blob: bytes) -> bytes:
        at = min(self.offset, len(blob))
        if self.kind == "truncate":
            return blob[:at]
        if self.kind == "insert":
            return blob[:at] + self.data + blob[at:]
        if self.kind == "delete":
            return blob[:at] + blob[at + self.amount:]
        if self.kind == "footer":
            if len(blob) < FOOTER_SIZE:
                return blob
            position, fmt = FOOTER_FIELDS[self.footer_field]
            return patch(blob, len(blob) - FOOTER_SIZE + position,
                         struct.pack(fmt, self.amount))
        if not blob:
            return blob
        at = self.offset % len(blob)
        if self.kind == "flip":
            return flip_bit(blob, 8 * at + self.amount)
        if self.kind == "overwrite":
            return patch(blob, at, self.data[:len(blob) - at])
        raise AssertionError(self.kind)


def regions(name: str, blob: bytes, index_name: str) -> dict[str, tuple[int, int]]:
    """Named byte ranges of a file, for aiming damage (empty ranges left out)."""
    size = len(blob)
    found = {"anywhere": (0, size), "preamble": (0, PREAMBLE_SIZE)}
    if name == index_name:
        layout = read_layout(blob)
        found |= {"data": (PREAMBLE_SIZE, layout.index_offset),
                  "index": (layout.index_offset, layout.index_end),
                  "footer": (layout.footer_offset, size)}
    else:
        found["data"] = (PREAMBLE_SIZE, size)
    return {k: v for k, v in found.items() if v[1] > v[0]}


U64_EDGES = (0, 1, 8, 63, 64, 65, 4095, 4096, 1 << 24, (1 << 24) + 1, MAX_INDEX_BYTES,
             MAX_INDEX_BYTES + 1, 1 << 30, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32,
             1 << 58, (1 << 58) + 1, 1 << 62, (1 << 62) + 1, (1 << 63) - 1, 1 << 63,
             (1 << 64) - 1)


def u64s(near: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    """Unsigned 64-bit values, biased to edges and to values ``near`` given ones."""
    close = sorted({v + d for v in near for d in (-64, -1, 0, 1, 64) if 0 <= v + d < 1 << 64})
    return st.one_of(st.sampled_from(U64_EDGES + tuple(close)), st.integers(0, (1 << 64) - 1))


@st.composite
def footer_mutations(draw: st.DrawFn, name: str, blob: bytes) -> Mutation:
    layout = read_layout(blob)
    field_name = draw(st.sampled_from(sorted(FOOTER_FIELDS)))
    width = struct.calcsize(FOOTER_FIELDS[field_name][1])
    near = (layout.index_offset, layout.index_length, layout.size, layout.footer_offset)
    values = {
        "index_offset": u64s(near),
        "index_length": u64s(near),
        "index_crc32c": st.integers(0, (1 << 32) - 1),
        "format_major": st.one_of(st.sampled_from([0, 2, 3, 0x100, 0xFFFF]),
                                  st.integers(0, 0xFFFF)),
        "format_minor": st.integers(0, 0xFFFF),
    }[field_name]
    value = draw(values)
    assert value < 1 << (8 * width)
    return Mutation(name, "footer", 0, amount=value, footer_field=field_name)


@st.composite
def mutations(draw: st.DrawFn, original: Original) -> Mutation:
    name = draw(st.sampled_from(sorted(original.files)))
    blob = original.files[name]
    # Damage that keeps the size gets past the footer checks and reaches the
    # tensor bytes, so it is drawn more often than damage that changes the size.
    kinds = ["flip", "flip", "flip", "overwrite", "overwrite", "truncate", "insert", "delete"]
    if name == original.index_name:
        kinds.append("footer")
    kind = draw(st.sampled_from(kinds))
    if kind == "footer":
        return draw(footer_mutations(name, blob))
    where = regions(name, blob, original.index_name)
    start, end = where[draw(st.sampled_from(sorted(where) + ["data"] * ("data" in where)))]
    offset = draw(st.integers(start, end - 1))
    if kind == "flip":
        return Mutation(name, kind, offset, amount=draw(st.integers(0, 7)))
    if kind in ("overwrite", "insert"):
        return Mutation(name, kind, offset, data=draw(st.binary(min_size=1, max_size=64)))
    if kind == "delete":
        return Mutation(name, kind, offset, amount=draw(st.integers(1, 64)))
    return Mutation(name, kind, offset)


def apply_all(files: dict[str, bytes], plan: list[Mutation]) -> dict[str, bytes]:
    out = dict(files)
    for mutation in plan:
        out[mutation.file] = mutation.apply(out[mutation.file])
    return out


def check_damaged(scratch: Path, original: Original, files: dict[str, bytes]) -> None:
    with materialized(scratch, original.form, files) as path:
        checked = read_everything(path, verify=True)
        check_original_or_error(checked, original)
        check_memory(checked, files, original.index_name)
        # Without checksums, damaged bytes reach the decoders (zstd, byte
        # strings, bools): values may be wrong, but errors are still OCFErrors.
        unchecked = read_everything(path, verify=False)
        check_memory(unchecked, files, original.index_name)


@FUZZ
@given(data=st.data())
def test_damaged_single_file_gives_original_values_or_an_ocf_error(
    corpus: dict[str, Original], scratch: Path, data: st.DataObject,
) -> None:
    original = corpus[data.draw(st.sampled_from(FILE_ORIGINALS), label="checkpoint")]
    plan = data.draw(st.lists(mutations(original), min_size=1, max_size=4), label="plan")
    check_damaged(scratch, original, apply_all(original.files, plan))


@FUZZ
@given(data=st.data())
def test_damaged_directory_checkpoint_gives_original_values_or_an_ocf_error(
    corpus: dict[str, Original], scratch: Path, data: st.DataObject,
) -> None:
    original = corpus["directory"]
    plan = data.draw(st.lists(mutations(original), min_size=1, max_size=4), label="plan")
    check_damaged(scratch, original, apply_all(original.files, plan))


# -- crafted indexes, with a matching checksum ------------------------------------
#
# Raw damage to the index stops at its checksum. These tests rewrite the index
# and fix the footer, so the damage reaches parsing and validation. The edits
# walk the Index message by reflection, so they follow the schema as it is.
# The values read may differ from the originals (the index says so): only
# "no exception but OCFError" and the memory bound are required.

FD = FieldDescriptor
STRINGS = ("", ".", "..", "../x", "a/b", "/etc/passwd", "a\\b", ".hidden", INDEX_FILE_NAME,
           "INDEX.OCF", FILE_NAME, "x" * 255, "x" * 256, "\0", "a\0b", "k" * 4096, "k" * 4097,
           "é", "NUL", "con.txt", "a.", "x-feature", "w", "a", "b", "big", "strings", "sliced")


def _field_paths(descriptor: Descriptor, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field reachable from ``descriptor`` (maps and messages included, not their values)."""
    paths = []
    for fd in descriptor.fields:
        path = (*prefix, fd.name)
        paths.append(path)
        if fd.message_type is not None and not fd.message_type.GetOptions().map_entry \
                and fd.message_type.full_name != "ocf.v1.Value":
            paths.extend(_field_paths(fd.message_type, path))
    return paths


INDEX_PATHS = _field_paths(index_pb2.Index.DESCRIPTOR)


def _descriptor_at(path: tuple[str, ...]) -> FieldDescriptor:
    descriptor, fd = index_pb2.Index.DESCRIPTOR, None
    for name in path:
        fd = descriptor.fields_by_name[name]
        descriptor = fd.message_type
    assert fd is not None
    return fd


def _values(fd: FieldDescriptor, names: tuple[str, ...]) -> st.SearchStrategy[Any]:
    kind = fd.type
    if kind in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return u64s()
    if kind in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return st.one_of(st.sampled_from([0, 1, 2, 3, 4096, (1 << 32) - 1]),
                         st.integers(0, (1 << 32) - 1))
    if kind in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_ENUM):
        return st.one_of(st.sampled_from([-1, 0, 1, 2, 3, 12, 18, 19, (1 << 31) - 1]),
                         st.integers(-(1 << 31), (1 << 31) - 1))
    if kind in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return st.integers(-(1 << 63), (1 << 63) - 1)
    if kind == FD.TYPE_BOOL:
        return st.booleans()
    if kind == FD.TYPE_STRING:
        return st.one_of(st.sampled_from(STRINGS + names), st.text(max_size=8))
    if kind == FD.TYPE_BYTES:
        return st.binary(max_size=16)
    return st.floats()


def _nested_value(depth: int) -> metadata_pb2.Value:
    root = metadata_pb2.Value()
    node = root
    for level in range(depth):
        node = node.list_value.values.add() if level % 2 else node.map_value.entries["k"]
    node.int_value = depth
    return root


@dataclass(frozen=True)
class Edit:
    """One change to the parsed index: ``op`` on the field at ``path``."""

    path: tuple[str, ...]
    op: str
    position: int = 0
    value: Any = None

    def apply(self, index: index_pb2.Index) -> None:
        holder: Message = index
        for depth, name in enumerate(self.path[:-1]):
            child = getattr(holder, name)
            if _descriptor_at(self.path[: depth + 1]).is_repeated:
                if not len(child):
                    return
                child = child[self.position % len(child)]
            holder = child
        name = self.path[-1]
        fd = holder.DESCRIPTOR.fields_by_name[name]
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            self._edit_map(getattr(holder, name))
        elif fd.message_type is not None:
            self._edit_message(holder, name, fd)
        elif fd.is_repeated:
            self._edit_list(getattr(holder, name))
        else:
            setattr(holder, name, self.value)

    def _edit_map(self, entries: Any) -> None:
        if self.op == "clear":
            entries.clear()
        else:
            entries["deep"].CopyFrom(_nested_value(self.value))

    def _edit_message(self, holder: Message, name: str, fd: FieldDescriptor) -> None:
        child = getattr(holder, name)
        if not fd.is_repeated:
            if self.op == "clear":
                holder.ClearField(name)
            else:
                child.SetInParent()
        elif self.op == "clear":
            del child[:]
        elif self.op == "append" and len(child):
            child.add().CopyFrom(child[self.position % len(child)])
        elif self.op == "delete" and len(child):
            del child[self.position % len(child)]
        elif self.op == "append":
            child.add()

    def _edit_list(self, values: Any) -> None:
        items = list(values)
        if self.op == "set" and items:
            items[self.position % len(items)] = self.value
        elif self.op == "insert" or self.op == "set":
            items.insert(self.position % (len(items) + 1), self.value)
        elif self.op == "delete" and items:
            del items[self.position % len(items)]
        elif self.op == "duplicate" and items:
            items.insert(self.position % len(items), items[self.position % len(items)])
        elif self.op == "clear":
            items = []
        del values[:]
        values.extend(items)


@st.composite
def edits(draw: st.DrawFn, names: tuple[str, ...]) -> Edit:
    path = draw(st.sampled_from(INDEX_PATHS))
    fd = _descriptor_at(path)
    position = draw(st.integers(0, 64))
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        op = draw(st.sampled_from(["clear", "nest"]))
        depth = draw(st.sampled_from([1, 31, 32, 33, 34, 98, 99, 100, 101, 150]))
        return Edit(path, op, position, depth)
    if fd.message_type is not None:
        ops = ["clear", "append", "delete"] if fd.is_repeated else ["clear", "set_empty"]
        return Edit(path, draw(st.sampled_from(ops)), position)
    ops = ["set", "insert", "delete", "duplicate", "clear"] if fd.is_repeated else ["set"]
    op = draw(st.sampled_from(ops))
    value = draw(_values(fd, names)) if op in ("set", "insert") else None
    return Edit(path, op, position, value)


def check_crafted(scratch: Path, original: Original, files: dict[str, bytes]) -> None:
    with materialized(scratch, original.form, files) as path:
        for verify in (True, False):
            outcome = read_everything(path, verify=verify)
            check_memory(outcome, files, original.index_name)


@FUZZ
@given(data=st.data())
def test_crafted_index_with_valid_checksum_raises_only_ocf_errors(
    corpus: dict[str, Original], scratch: Path, data: st.DataObject,
) -> None:
    original = corpus[data.draw(st.sampled_from(sorted(corpus)), label="checkpoint")]
    blob = original.files[original.index_name]
    index = index_pb2.Index()
    index.ParseFromString(index_bytes_of(blob))
    names = tuple(original.files) + tuple(original.arrays)
    for edit in data.draw(st.lists(edits(names), min_size=1, max_size=4), label="edits"):
        # The protobuf library may refuse a value (out of range for the field): no edit.
        with contextlib.suppress(ValueError, TypeError):
            edit.apply(index)
    files = dict(original.files)
    files[original.index_name] = replace_index(blob, index)
    check_crafted(scratch, original, files)


@FUZZ
@given(data=st.data())
def test_damaged_index_bytes_with_valid_checksum_raise_only_ocf_errors(
    corpus: dict[str, Original], scratch: Path, data: st.DataObject,
) -> None:
    original = corpus[data.draw(st.sampled_from(sorted(corpus)), label="checkpoint")]
    blob = original.files[original.index_name]
    index_bytes = index_bytes_of(blob)
    damage = st.builds(
        Mutation, st.just("index"), st.sampled_from(["truncate", "flip", "overwrite", "insert",
                                                      "delete"]),
        st.integers(0, len(index_bytes) - 1), st.binary(min_size=1, max_size=16),
        st.integers(0, 7))
    for mutation in data.draw(st.lists(damage, min_size=1, max_size=4), label="damage"):
        index_bytes = mutation.apply(index_bytes)
    files = dict(original.files)
    files[original.index_name] = replace_index(blob, index_bytes)
    check_crafted(scratch, original, files)


# -- valid indexes generated by hand ---------------------------------------------
#
# Checkpoints built from the spec's layout rules alone (tests/helpers.py), with
# dtypes, shapes, codecs, chunking, byte shuffle and slices drawn at random,
# including shapes with a zero dimension next to a huge one and bool tensors
# holding bytes other than 00 and 01. Every such file is valid, so the reader
# must open it, and every read must return exactly the generated values or,
# where the spec says so (a bad bool byte) or NumPy cannot hold the shape, an
# OCFError.

SPEC_DTYPES: dict[int, np.dtype[Any] | None] = {
    tensor_pb2.DTYPE_BOOL: np.dtype(np.bool_),
    tensor_pb2.DTYPE_INT8: np.dtype("<i1"),
    tensor_pb2.DTYPE_INT16: np.dtype("<i2"),
    tensor_pb2.DTYPE_INT32: np.dtype("<i4"),
    tensor_pb2.DTYPE_INT64: np.dtype("<i8"),
    tensor_pb2.DTYPE_UINT8: np.dtype("<u1"),
    tensor_pb2.DTYPE_UINT16: np.dtype("<u2"),
    tensor_pb2.DTYPE_UINT32: np.dtype("<u4"),
    tensor_pb2.DTYPE_UINT64: np.dtype("<u8"),
    tensor_pb2.DTYPE_FLOAT16: np.dtype("<f2"),
    tensor_pb2.DTYPE_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    tensor_pb2.DTYPE_FLOAT32: np.dtype("<f4"),
    tensor_pb2.DTYPE_FLOAT64: np.dtype("<f8"),
    tensor_pb2.DTYPE_COMPLEX64: np.dtype("<c8"),
    tensor_pb2.DTYPE_COMPLEX128: np.dtype("<c16"),
    tensor_pb2.DTYPE_FLOAT8_E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    tensor_pb2.DTYPE_FLOAT8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
    tensor_pb2.DTYPE_BYTES: None,
}


def _strings_raw(items: list[bytes]) -> bytes:
    """The DTYPE_BYTES layout: n u64 lengths, then the payloads [R-DTYPE-003]."""
    return struct.pack(f"<{len(items)}Q", *map(len, items)) + b"".join(items)


def _encode_block(raw: bytes, offset: int, codec: str, chunk_size: int, shuffle: int
                  ) -> tuple[BlockSpec, bytes]:
    """A block of ``raw`` at ``offset``: its BlockSpec and stored bytes."""
    chunks = [raw[i:i + (chunk_size or len(raw))] for i in range(0, len(raw),
                                                                  chunk_size or len(raw) or 1)]
    if codec == "none":
        return BlockSpec(offset, len(raw), len(raw), tuple(map(crc, chunks)),
                         chunk_size=chunk_size), raw
    frames = []
    for chunk in chunks:
        if shuffle > 1:  # byte j of every element together [R-CODEC-002]
            chunk = np.frombuffer(chunk, np.uint8).reshape(-1, shuffle).T.tobytes()
        frames.append(zstandard.ZstdCompressor(level=1, write_content_size=True).compress(
            chunk))
    stored = b"".join(frames)
    return BlockSpec(offset, len(stored), len(raw), tuple(map(crc, frames)),
                     codec=tensor_pb2.CODEC_ZSTD, byte_shuffle=shuffle > 1,
                     chunk_size=chunk_size, chunk_stored_lengths=tuple(map(len, frames))
                     ), stored


@dataclass
class Generated:
    """A generated single-file checkpoint (its repr, shown on failure, is the specs)."""

    blob: bytes = field(default=b"", repr=False)
    specs: list[TensorSpec] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray, repr=False)
    # key -> (dtype, shape, flat element bytes or byte strings)
    values: dict[str, tuple[np.dtype[Any] | None, tuple[int, ...], Any]] = field(
        default_factory=dict, repr=False)

    def store(self, draw: st.DrawFn, raw: bytes, itemsize: int) -> BlockSpec:
        self.data += bytes(-len(self.data) % 64)
        codec = draw(st.sampled_from(["none", "zstd"]))
        chunk_size = draw(st.sampled_from([0, 4096]))
        shuffle = itemsize if codec == "zstd" and itemsize > 1 and draw(st.booleans()) else 1
        block, stored = _encode_block(raw, PREAMBLE_SIZE + len(self.data), codec, chunk_size,
                                      shuffle)
        self.data += stored
        return block


@st.composite
def generated_checkpoints(draw: st.DrawFn) -> Generated:
    out = Generated()
    for number in range(draw(st.integers(1, 4))):
        key = f"t{number}"
        code = draw(st.sampled_from(sorted(SPEC_DTYPES)))
        dtype = SPEC_DTYPES[code]
        itemsize = 1 if dtype is None else dtype.itemsize
        shape = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 64, 1100]), max_size=3))
        budget = 300 if dtype is None else 12288 // itemsize  # elements
        while prod(shape) > budget:
            shape[shape.index(max(shape))] //= 8
        if 0 in shape and len(shape) > 1 and draw(st.booleans()):
            # The product of the non-zero dimensions stays at most 2^58 [R-TENSOR-003].
            j = draw(st.sampled_from([i for i in range(len(shape)) if shape[i]] or [1]))
            rest = prod(d for i, d in enumerate(shape) if i != j and d)
            shape[j] = draw(st.sampled_from([1 << 31, 1 << 40, 1 << 58])) // rest
        count = prod(shape)
        rng = np.random.default_rng(draw(st.integers(0, (1 << 32) - 1)))  # the content
        if dtype is None:
            sizes = rng.integers(0, 7, size=count).tolist()
            flat: Any = [rng.bytes(n) for n in sizes]
        elif dtype == np.bool_:
            bools = bytearray(rng.integers(0, 2, size=count, dtype=np.uint8).tobytes())
            if bools and draw(st.integers(0, 9)) == 0:  # a byte other than 00 and 01
                bools[draw(st.integers(0, count - 1))] = draw(st.integers(2, 255))
            flat = bytes(bools)
        else:
            flat = rng.bytes(count * itemsize)
        out.values[key] = (dtype, tuple(shape), flat)
        if count and shape and shape[0] >= 2 and draw(st.booleans()):
            cut = draw(st.integers(1, shape[0] - 1))
            per_row = count // shape[0]
            parts = [(0, cut), (cut, shape[0])]
            slices = []
            for first, last in parts:
                if dtype is None:
                    raw = _strings_raw(flat[first * per_row:last * per_row])
                else:
                    raw = flat[first * per_row * itemsize:last * per_row * itemsize]
                start = (first,) + (0,) * (len(shape) - 1)
                extent = (last - first, *shape[1:])
                slices.append((start, extent, out.store(draw, raw, itemsize)))
            out.specs.append(TensorSpec(key, code, tuple(shape), slices=tuple(slices)))
        else:
            raw = _strings_raw(flat) if dtype is None else flat
            out.specs.append(TensorSpec(key, code, tuple(shape), out.store(draw, raw, itemsize)))
    out.blob = build_file(make_index(out.specs), bytes(out.data))
    return out


def _expected(value: tuple[np.dtype[Any] | None, tuple[int, ...], Any]) -> np.ndarray | None:
    """The array a read must return; None when NumPy cannot hold the shape."""
    dtype, shape, flat = value
    try:
        if dtype is None:
            strings = np.empty(len(flat), dtype=object)
            strings[:] = flat
            return strings.reshape(shape)
        return np.frombuffer(flat, np.uint8).view(dtype).reshape(shape)
    except ValueError:
        return None


def _check_generated_read(key: str, op: str, value: tuple[Any, ...],
                          call: Callable[[], np.ndarray]) -> None:
    expected = _expected(value)
    dtype, shape, flat = value
    bad_bool = dtype == np.bool_ and any(b > 1 for b in flat)
    error: ocf.OCFError | None = None
    try:
        result = call()
    except ocf.OCFError as exc:
        error = exc
    if error is not None:
        # An error is right only when NumPy cannot hold the shape, or for a bad
        # bool byte (INVALID [R-DTYPE-002]).
        assert expected is None or (bad_bool and isinstance(error, ocf.InvalidError)), \
            f"{op}({key!r}) of a valid tensor raised {error!r}"
        return
    if expected is None:
        assert np.asarray(result).size == 0
        return
    if op == "get_slice":
        # NumPy semantics: a basic index of a 0-d array is still an array
        # (the trailing Ellipsis keeps it one instead of a scalar).
        index = (*sub_index(shape), Ellipsis)
        expected = expected[index] if not bad_bool else \
            np.frombuffer(flat, np.uint8).reshape(shape)[index]
        assert not bad_bool or np.asarray(expected).max(initial=0) <= 1, \
            f"{op}({key!r}) returned a bool byte other than 00 and 01"
        result = np.asarray(result).view(np.uint8) if bad_bool else result
    else:
        assert not bad_bool, f"{op}({key!r}) materialised a bool byte other than 00 and 01"
    assert snapshot(result) == snapshot(expected), f"{op}({key!r}) returned other values"


@FUZZ
@given(generated=generated_checkpoints())
def test_valid_hand_built_checkpoints_read_back_exactly(
    scratch: Path, generated: Generated,
) -> None:
    files = {FILE_NAME: generated.blob}
    with (materialized(scratch, "file", files) as path, traced_memory() as memory,
          ocf.Reader(path) as reader):  # every generated file is valid
        assert sorted(reader) == sorted(generated.values)
        for key, value in generated.values.items():
            calls: dict[str, Callable[[], np.ndarray]] = {
                "get_tensor": lambda k=key: reader.get_tensor(k),
                "read_tensor": lambda k=key: reader.read_tensor(k),
                "get_slice": lambda k=key, s=value[1]: reader.get_slice(k, sub_index(s)),
                "read_tensors": lambda k=key: reader.read_tensors([k])[k],
            }
            for op, call in calls.items():
                _check_generated_read(key, op, value, call)
    check_memory(Outcome(peak=memory.peak), files, FILE_NAME)
