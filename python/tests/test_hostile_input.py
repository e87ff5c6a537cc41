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

The deterministic tests below pin down the category of each targeted
failure, built by hand from the byte layout (tests/helpers.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import struct
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import zstandard
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
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
    minimal_checkpoint,
    pad64,
    patch,
    plain_block,
    read_layout,
    replace_index,
    set_footer_field,
    shard_file,
    write_file,
)
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

import ocf
from ocf.v1 import index_pb2, metadata_pb2, tensor_pb2

# Limits of spec/format.md, "Limits".
MAX_INDEX_BYTES = 256 << 20
ZSTD_RATIO = 32768  # raw bytes per stored byte of a zstd chunk [R-CHUNK-004]

FILE_NAME = "ckpt.ocf"
DIR_NAME = "ckpt"

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

METADATA: dict[str, Any] = {
    "step": 7,
    "name": "hostile",
    "lr": 0.25,
    "flags": [True, False, None],
    "nested": {"a": [1, [2, {"b": b"\x00\xff"}]], "empty_map": {}, "empty_list": []},
}


# -- the valid checkpoints that get damaged ------------------------------------


@dataclass(frozen=True)
class Original:
    """A valid checkpoint: its files' bytes and the values written to it."""

    name: str
    form: str  # "file" or "directory"
    files: dict[str, bytes]
    arrays: dict[str, np.ndarray]

    @property
    def index_name(self) -> str:
        return FILE_NAME if self.form == "file" else INDEX_FILE_NAME


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


@contextlib.contextmanager
def materialized(scratch: Path, form: str, files: dict[str, bytes]) -> Iterator[Path]:
    """Write ``files`` to a fresh directory; yields the path to open."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    try:
        if form == "file":
            (target := folder / FILE_NAME).write_bytes(files[FILE_NAME])
        else:
            (target := folder / DIR_NAME).mkdir()
            for name, blob in files.items():
                (target / name).write_bytes(blob)
        yield target
    finally:
        shutil.rmtree(folder)


# -- reading everything, and what may be expected of it ----------------------

READ_OPS = ("get_tensor", "read_tensor", "get_slice")


def sub_index(shape: tuple[int, ...]) -> tuple[int | slice, ...]:
    """A basic index selecting an inner box (an integer on the first axis when rank > 1)."""
    if not shape:
        return ()
    inner = tuple(slice(d // 4, d - d // 4) for d in shape)
    if len(shape) > 1 and shape[0]:
        return (shape[0] // 2, *inner[1:])
    return inner


def snapshot(array: np.ndarray) -> tuple[Any, ...]:
    """Dtype, shape and exact bytes of an array (the payloads for byte strings)."""
    array = np.asarray(array)
    if array.dtype == object:
        return ("object", array.shape, [bytes(x) for x in array.reshape(-1).tolist()])
    return (array.dtype.str, array.shape, array.tobytes())


def expected_reads(original: Original) -> dict[tuple[str, str], tuple[Any, ...]]:
    out = {}
    for key, array in original.arrays.items():
        out[key, "get_tensor"] = out[key, "read_tensor"] = out[key, "read_tensors"] = \
            snapshot(array)
        out[key, "get_slice"] = snapshot(array[sub_index(array.shape)])
    return out


@dataclass
class Outcome:
    """What reading a checkpoint gave: values of the reads that succeeded, and errors."""

    opened: bool = False
    keys: list[str] = field(default_factory=list)
    metadata: Any = None
    values: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    verified: bool = False
    errors: list[ocf.OCFError] = field(default_factory=list)
    peak: int = 0


def _read_all(path: Path, verify: bool, outcome: Outcome) -> None:
    try:
        reader = ocf.Reader(path, verify=verify)
    except ocf.OCFError as exc:
        outcome.errors.append(exc)
        return
    with reader:
        outcome.opened = True
        outcome.keys = list(reader)
        outcome.metadata = reader.metadata
        for key in outcome.keys:
            shape = reader[key].shape
            calls: dict[str, Callable[[], np.ndarray]] = {
                "get_tensor": lambda k=key: reader.get_tensor(k),
                "read_tensor": lambda k=key: reader.read_tensor(k),
                "get_slice": lambda k=key, s=shape: reader.get_slice(k, sub_index(s)),
            }
            for op, call in calls.items():
                try:
                    outcome.values[key, op] = snapshot(call())
                except ocf.OCFError as exc:
                    outcome.errors.append(exc)
        try:  # every tensor in one call: small uncompressed neighbours are read together
            for key, array in reader.read_tensors(outcome.keys).items():
                outcome.values[key, "read_tensors"] = snapshot(array)
        except ocf.OCFError as exc:
            outcome.errors.append(exc)
        try:
            reader.verify_all()
            outcome.verified = True
        except ocf.OCFError as exc:
            outcome.errors.append(exc)


def read_everything(path: Path, *, verify: bool) -> Outcome:
    """Open ``path`` and call every read on every tensor; only OCFError is caught."""
    outcome = Outcome()
    tracemalloc.start()
    try:
        _read_all(path, verify, outcome)
        outcome.peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if currently_in_test_context():  # --hypothesis-show-statistics: how far inputs get
        stage = "opened" if outcome.opened else "refused at open"
        for category in sorted({e.category.value for e in outcome.errors}) or ["no error"]:
            event(f"verify={verify}: {stage}, {category}")
    return outcome


def _uses_compression(message: Message) -> bool:
    """True when any Codec field anywhere in ``message`` holds a value other than NONE."""
    for fd, value in message.ListFields():
        if fd.enum_type is not None and fd.enum_type.full_name == "ocf.v1.Codec":
            values = value if fd.is_repeated else [value]
            if any(v != tensor_pb2.CODEC_NONE for v in values):
                return True
        elif fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            children = value if fd.is_repeated else [value]
            if any(_uses_compression(child) for child in children):
                return True
    return False


# Allowance for what a read allocates whatever the file: the reader's thread
# pool, Python objects describing the index, NumPy and tracemalloc bookkeeping.
# (Measured below 0.5 MiB for the originals; 4 MiB leaves room without
# hiding an allocation sized by a hostile length field.)
BASE_ALLOWANCE = 4 << 20
# A read holds at most a few copies of the bytes it returns (a raw buffer, the
# array, the test's snapshot of it) for each of get_tensor, read_tensor,
# get_slice and verify_all; byte-string tensors cost a Python object and a
# list entry per element, each element taking at least 8 bytes of the file.
COPIES = 16


def allowed_peak(files: dict[str, bytes], index_name: str) -> int:
    """The most memory reading these files may justify (see the module docstring).

    Everything a reader returns comes from stored bytes: raw bytes equal
    stored bytes for CODEC_NONE blocks, and a zstd chunk may decode to at
    most 32768 raw bytes per stored byte [R-CHUNK-004]. Blocks do not overlap
    [R-DATA-003], so the raw bytes of all tensors are at most the total size
    of the files (times 32768 when the index the reader will accept declares
    compressed blocks). The index the reader accepts is the one the footer
    points at, if it parses; if it does not, the reader stops before
    allocating anything for tensors.
    """
    total = sum(len(blob) for blob in files.values())
    ratio = 1
    with contextlib.suppress(ValueError, DecodeError, struct.error):
        message = index_pb2.Index()
        message.ParseFromString(index_bytes_of(files[index_name]))
        if _uses_compression(message):
            ratio = ZSTD_RATIO
    return BASE_ALLOWANCE + COPIES * total * ratio


def check_memory(outcome: Outcome, files: dict[str, bytes], index_name: str) -> None:
    limit = allowed_peak(files, index_name)
    assert outcome.peak <= limit, (
        f"reading {sum(map(len, files.values()))} bytes of files allocated {outcome.peak} "
        f"bytes at peak, more than the {limit} they justify")


def check_original_or_error(outcome: Outcome, original: Original) -> None:
    """Every read that succeeded returned exactly what was written."""
    if not outcome.opened:
        assert outcome.errors
        return
    assert sorted(outcome.keys) == sorted(original.arrays)
    assert outcome.metadata == METADATA
    expected = expected_reads(original)
    for (key, op), value in outcome.values.items():
        assert value == expected[key, op], f"{op}({key!r}) succeeded with wrong values"


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
    with materialized(scratch, "file", files) as path:
        tracemalloc.start()
        try:
            with ocf.Reader(path) as reader:  # every generated file is valid
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
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    check_memory(Outcome(peak=peak), files, FILE_NAME)


# -- targeted, deterministic cases -------------------------------------------------


def _read_calls(reader: ocf.Reader, key: str) -> dict[str, Callable[[], object]]:
    return {
        "get_tensor": lambda: reader.get_tensor(key),
        "read_tensor": lambda: reader.read_tensor(key),
        "get_slice": lambda: reader.get_slice(key, ...),
        "verify_all": reader.verify_all,
    }


@dataclass(frozen=True)
class HandBuilt:
    """A checkpoint built by hand: files, where each tensor's stored bytes are, the values."""

    form: str
    files: dict[str, bytes]
    blocks: dict[str, tuple[str, int, int]]  # key -> (file, start, end) of its stored bytes
    values: dict[str, np.ndarray]


def _plain_single_file() -> HandBuilt:
    alpha = np.arange(16, dtype="<f4").reshape(4, 4) - 5.5
    beta = np.arange(10, dtype=np.uint8) * 25
    data = pad64(alpha.tobytes()) + pad64(beta.tobytes())
    index = make_index([
        TensorSpec("alpha", tensor_pb2.DTYPE_FLOAT32, (4, 4), plain_block(alpha.tobytes(), 64)),
        TensorSpec("beta", tensor_pb2.DTYPE_UINT8, (10,), plain_block(beta.tobytes(), 128)),
    ])
    return HandBuilt("file", {FILE_NAME: build_file(index, data)},
                     {"alpha": (FILE_NAME, 64, 128), "beta": (FILE_NAME, 128, 138)},
                     {"alpha": alpha, "beta": beta})


def _zstd_single_file() -> HandBuilt:
    gamma = (np.arange(8192) % 7).astype(np.uint8)  # two 4096-byte chunks
    frames = [zstandard.ZstdCompressor(level=3, write_content_size=True).compress(
        gamma[i:i + 4096].tobytes()) for i in (0, 4096)]
    stored = b"".join(frames)
    block = BlockSpec(64, len(stored), gamma.size, tuple(crc(f) for f in frames),
                      codec=tensor_pb2.CODEC_ZSTD, chunk_size=4096,
                      chunk_stored_lengths=tuple(len(f) for f in frames))
    index = make_index([TensorSpec("gamma", tensor_pb2.DTYPE_UINT8, (8192,), block)])
    return HandBuilt("file", {FILE_NAME: build_file(index, pad64(stored))},
                     {"gamma": (FILE_NAME, 64, 64 + len(stored))}, {"gamma": gamma})


def _directory() -> HandBuilt:
    delta = np.arange(32, dtype="<i2") * -77
    shard = shard_file(delta.tobytes())
    index = make_index([TensorSpec("delta", tensor_pb2.DTYPE_INT16, (32,),
                                   plain_block(delta.tobytes(), 64))],
                       shards=[("data-0.ocfd", len(shard))])
    return HandBuilt("directory", {INDEX_FILE_NAME: build_file(index), "data-0.ocfd": shard},
                     {"delta": ("data-0.ocfd", 64, 128)}, {"delta": delta})


HAND_BUILT: dict[str, Callable[[], HandBuilt]] = {
    "uncompressed_file": _plain_single_file,
    "zstd_file": _zstd_single_file,
    "directory": _directory,
}


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_flipping_any_bit_of_stored_tensor_bytes_gives_integrity_error_naming_the_key(
    tmp_path: Path, name: str,
) -> None:
    built = HAND_BUILT[name]()
    with materialized(tmp_path, built.form, built.files) as path, ocf.Reader(path) as reader:
        for key, value in built.values.items():
            assert snapshot(reader.read_tensor(key)) == snapshot(value)
    for key, (file_name, start, end) in built.blocks.items():
        for bit in range(8 * start, 8 * end):
            files = dict(built.files)
            files[file_name] = flip_bit(files[file_name], bit)
            with materialized(tmp_path, built.form, files) as path, ocf.Reader(path) as reader:
                for op, call in _read_calls(reader, key).items():
                    with pytest.raises(ocf.IntegrityError) as caught:
                        call()
                    assert caught.value.key == key, (op, bit)
                    assert repr(key) in str(caught.value), (op, bit)


def test_flipping_bits_of_padding_and_reserved_bytes_changes_nothing(tmp_path: Path) -> None:
    built = _plain_single_file()
    blob = built.files[FILE_NAME]
    ignorable = [*range(8, PREAMBLE_SIZE), *range(138, read_layout(blob).index_offset)]
    for byte in ignorable:
        files = {FILE_NAME: flip_bit(blob, 8 * byte + byte % 8)}
        with materialized(tmp_path, "file", files) as path, ocf.Reader(path) as reader:
            for key, value in built.values.items():
                assert snapshot(reader.get_tensor(key)) == snapshot(value)
            reader.verify_all()


def test_flipped_bit_in_one_chunk_fails_only_reads_that_need_that_chunk(tmp_path: Path) -> None:
    rows = np.arange(4 * 1024, dtype="<u4").reshape(4, 1024)  # one 4096-byte chunk per row
    index = make_index([TensorSpec("rows", tensor_pb2.DTYPE_UINT32, (4, 1024),
                                   plain_block(rows.tobytes(), 64, chunk_size=4096))])
    blob = flip_bit(build_file(index, rows.tobytes()), 8 * (64 + 2 * 4096 + 100))
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with ocf.Reader(path) as reader:
        assert np.array_equal(reader.get_slice("rows", np.s_[0:2, 5:9]), rows[0:2, 5:9])
        assert np.array_equal(reader.get_slice("rows", 3), rows[3])
        with pytest.raises(ocf.IntegrityError, match="rows"):
            reader.get_slice("rows", np.s_[1:3, 0])


def test_get_slice_of_a_compressed_bool_tensor_checks_only_the_bytes_it_decodes(
    tmp_path: Path,
) -> None:
    # Three zstd chunks of valid bools. A partial read decodes only the first
    # chunk; the bool check must not look at the others, which it did not
    # decode (their buffer holds whatever memory was there before).
    values = np.arange(3 * 4096) % 3 == 0
    path = tmp_path / FILE_NAME
    ocf.save_file({"b": values}, path, compression="zstd", chunk_size=4096)
    with ocf.Reader(path) as reader:
        for _ in range(20):
            stale = np.full(values.size, 0xAB, dtype=np.uint8)  # leave non-0/1 bytes behind
            del stale
            assert np.array_equal(reader.get_slice("b", np.s_[:10]), values[:10])


def _boundaries(blob: bytes) -> dict[str, int]:
    layout = read_layout(blob)
    return {
        "empty": 0,
        "inside_preamble_magic": 4,
        "inside_preamble_reserved": 40,
        "right_after_preamble": PREAMBLE_SIZE,
        "inside_data": PREAMBLE_SIZE + 10,
        "right_before_index": layout.index_offset,
        "inside_index": layout.index_offset + layout.index_length // 2,
        "right_before_footer": layout.footer_offset,
        "inside_footer": layout.footer_offset + 20,
        "one_byte_short": layout.size - 1,
    }


@pytest.mark.parametrize("boundary", sorted(_boundaries(build_file(*minimal_checkpoint()))))
def test_truncation_at_a_structural_boundary_is_malformed(tmp_path: Path, boundary: str) -> None:
    blob = _plain_single_file().files[FILE_NAME]
    length = _boundaries(blob)[boundary]
    path = tmp_path / FILE_NAME
    path.write_bytes(blob[:length])
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(path)


def test_truncation_at_every_length_is_malformed(tmp_path: Path) -> None:
    blob = build_file(*minimal_checkpoint())
    path = tmp_path / FILE_NAME
    for length in range(len(blob)):
        path.write_bytes(blob[:length])
        with pytest.raises(ocf.MalformedError):
            ocf.Reader(path)


@pytest.mark.parametrize("major", [0, 2, 3, 0xFFFF])
def test_footer_major_version_other_than_1_is_unsupported_version(
    tmp_path: Path, major: int,
) -> None:
    blob = set_footer_field(build_file(*minimal_checkpoint()), "format_major", major)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.Reader(path)


def test_major_version_is_checked_before_the_index_is_read(tmp_path: Path) -> None:
    # Unparsable index bytes, a wrong CRC and a wrong index length: still a
    # version error, since the version comes first [R-VER-001].
    blob = build_file(b"\xff" * 40, pad64(b"\x01" * 8), major=2)
    blob = set_footer_field(set_footer_field(blob, "index_crc32c", 0), "index_length", 1 << 40)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.Reader(path)


def test_other_minor_version_of_major_1_is_read(tmp_path: Path) -> None:
    path = write_file(tmp_path / FILE_NAME, *minimal_checkpoint(), minor=7)
    with ocf.Reader(path) as reader:
        assert reader.get_tensor("w").tolist() == [1.0, -2.0]


@pytest.mark.parametrize("feature", ["x-private-extension", "sparse_tensors", "", "ÜNKNOWN"])
def test_unknown_required_feature_is_refused(tmp_path: Path, feature: str) -> None:
    index, data = minimal_checkpoint()
    index.header.required_features.append(feature)
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.UnknownRequiredFeatureError):
        ocf.Reader(path)


def test_unknown_required_feature_is_reported_before_other_index_errors(tmp_path: Path) -> None:
    values = struct.pack("<2f", 1.0, -2.0)
    broken = BlockSpec(65, 8, 8, (crc(values),))  # misaligned offset: INVALID otherwise
    index = make_index([TensorSpec("w", tensor_pb2.DTYPE_FLOAT32, (2,), broken)],
                       required_features=["x-new-layout"])
    path = write_file(tmp_path / FILE_NAME, index, pad64(values))
    with pytest.raises(ocf.UnknownRequiredFeatureError):
        ocf.Reader(path)


def test_index_length_above_the_limit_is_refused_before_anything_is_allocated(
    tmp_path: Path,
) -> None:
    # A sparse file whose footer consistently places a 256 MiB + 1 byte index.
    path = tmp_path / FILE_NAME
    index_length = MAX_INDEX_BYTES + 1
    size = PREAMBLE_SIZE + index_length + FOOTER_SIZE
    with path.open("wb") as out:
        out.write(build_file(*minimal_checkpoint())[:PREAMBLE_SIZE])
        out.seek(size - FOOTER_SIZE)
        out.write(struct.pack("<QQIHH8s", PREAMBLE_SIZE, index_length, 0, 1, 0,
                              b"\x89OCFEND\n"))
    assert path.stat().st_size == size
    tracemalloc.start()
    try:
        with pytest.raises(ocf.LimitExceededError):
            ocf.Reader(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("index_length", [MAX_INDEX_BYTES + 1, 1 << 63, (1 << 64) - 1])
def test_index_length_above_the_limit_is_limit_exceeded_even_if_inconsistent(
    tmp_path: Path, index_length: int,
) -> None:
    # The limit is checked before the index position [R-LIMIT-001].
    blob = set_footer_field(build_file(*minimal_checkpoint()), "index_length", index_length)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.LimitExceededError):
        ocf.Reader(path)


class _FileAccesses:
    """Records files opened and directories listed, through the audit hooks of PEP 578."""

    hooked = False
    events: list[tuple[str, str]] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.events is not None and event in ("open", "os.listdir", "os.scandir"):
            cls.events.append((event, os.fsdecode(args[0]) if args and args[0] is not None
                               and not isinstance(args[0], int) else repr(args)))

    @classmethod
    @contextlib.contextmanager
    def recording(cls) -> Iterator[list[tuple[str, str]]]:
        if not cls.hooked:
            sys.addaudithook(cls.hook)
            cls.hooked = True
        cls.events = []
        try:
            yield cls.events
        finally:
            cls.events = None


BAD_SHARD_PATHS = ["../x", "a/b", "/tmp/x", "..", ".", ".x", "index.ocf", "x" * 256, "a\\b",
                   "-x", "_x", "é", " x", "x\n", "x/", "./x"]


@pytest.mark.parametrize("shard_path", BAD_SHARD_PATHS)
def test_shard_path_that_is_not_a_plain_name_is_invalid_without_touching_the_filesystem(
    tmp_path: Path, shard_path: str,
) -> None:
    values = struct.pack("<2f", 1.0, -2.0)
    shard = shard_file(values)
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    # Put a valid shard where a reader that followed the path would find it.
    for candidate in (tmp_path / "x", checkpoint / "a" / "b"):
        candidate.parent.mkdir(exist_ok=True)
        candidate.write_bytes(shard)
    index = make_index([TensorSpec("w", tensor_pb2.DTYPE_FLOAT32, (2,),
                                   plain_block(values, 64))], shards=[(shard_path, len(shard))])
    index_file = write_file(checkpoint / INDEX_FILE_NAME, index)
    with _FileAccesses.recording() as accesses, pytest.raises(ocf.InvalidError):
        ocf.Reader(checkpoint)
    touched = {name for _, name in accesses}
    assert str(index_file) in touched  # the recording works: the index file was opened
    assert touched == {str(index_file)}, f"the reader touched {touched}"


def _two_tensors(offset_b: int, length_b: int, shard_b: int = 0) -> tuple[index_pb2.Index, bytes]:
    raw_a = np.arange(32, dtype="<f4").tobytes()  # 128 bytes at [64, 192)
    data = pad64(raw_a) + bytes(256)
    raw_b = data[offset_b - 64:offset_b - 64 + length_b]
    return make_index([
        TensorSpec("a", tensor_pb2.DTYPE_FLOAT32, (32,), plain_block(raw_a, 64)),
        TensorSpec("b", tensor_pb2.DTYPE_UINT8, (length_b,),
                   plain_block(raw_b, offset_b, shard=shard_b)),
    ], shards=[("", 0), ("other.ocfd", 64 + len(data))]), data


@pytest.mark.parametrize(("offset_b", "length_b"), [
    (64, 128),  # identical ranges
    (128, 128),  # overlaps the second half of a
    (64, 64),  # inside a, at its start
    (128, 1),  # one byte inside a
])
def test_overlapping_byte_ranges_are_invalid(
    tmp_path: Path, offset_b: int, length_b: int,
) -> None:
    index, data = _two_tensors(offset_b, length_b)
    (tmp_path / "other.ocfd").write_bytes(shard_file(data))
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.InvalidError):
        ocf.Reader(path)


@pytest.mark.parametrize(("offset_b", "length_b", "shard_b"), [
    (192, 64, 0),  # right after a: adjacent, not overlapping
    (64, 128, 1),  # same range, but in another shard
    (128, 0, 0),  # empty block inside a's range
])
def test_adjacent_empty_or_other_shard_byte_ranges_are_not_overlaps(
    tmp_path: Path, offset_b: int, length_b: int, shard_b: int,
) -> None:
    index, data = _two_tensors(offset_b, length_b, shard_b)
    (tmp_path / "other.ocfd").write_bytes(shard_file(data))
    path = write_file(tmp_path / FILE_NAME, index, data)
    with ocf.Reader(path) as reader:
        reader.verify_all()


def test_overlap_between_a_slice_and_a_whole_tensor_is_invalid(tmp_path: Path) -> None:
    raw = np.arange(16, dtype="<i4").tobytes()  # 64 bytes
    data = pad64(raw) + pad64(raw)
    index = make_index([
        TensorSpec("whole", tensor_pb2.DTYPE_INT32, (16,), plain_block(raw, 64)),
        TensorSpec("sliced", tensor_pb2.DTYPE_INT32, (32,), slices=(
            ((0,), (16,), plain_block(raw, 128)),
            ((16,), (16,), plain_block(raw, 64)),  # the bytes of "whole"
        )),
    ])
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.InvalidError):
        ocf.Reader(path)


def _written_directory(tmp_path: Path) -> tuple[Path, list[Path]]:
    target = tmp_path / DIR_NAME
    ocf.save_file({"a": np.arange(600, dtype=np.int64), "b": np.arange(300, dtype=np.int32)},
                  target, layout="directory", max_shard_size=4096)
    shards = sorted(p for p in target.iterdir() if p.name != INDEX_FILE_NAME)
    assert len(shards) == 2
    return target, shards


@pytest.mark.parametrize("which", [0, 1])
def test_missing_shard_is_not_found(tmp_path: Path, which: int) -> None:
    target, shards = _written_directory(tmp_path)
    shards[which].unlink()
    with pytest.raises(ocf.NotFoundError) as caught:
        ocf.Reader(target)
    assert isinstance(caught.value, FileNotFoundError)
    assert shards[which].name in str(caught.value)


@pytest.mark.parametrize("change", ["one_byte_more", "one_byte_less", "empty", "doubled"])
def test_shard_file_of_the_wrong_size_is_malformed(tmp_path: Path, change: str) -> None:
    target, shards = _written_directory(tmp_path)
    blob = shards[1].read_bytes()
    shards[1].write_bytes({"one_byte_more": blob + b"\0", "one_byte_less": blob[:-1],
                           "empty": b"", "doubled": blob + blob}[change])
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(target)


def test_shard_file_without_the_preamble_magic_is_malformed(tmp_path: Path) -> None:
    target, shards = _written_directory(tmp_path)
    shards[0].write_bytes(patch(shards[0].read_bytes(), 0, b"\x89OCX"))
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(target)


def test_directory_without_index_is_not_found(tmp_path: Path) -> None:
    target, _ = _written_directory(tmp_path)
    (target / INDEX_FILE_NAME).unlink()
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(target)


# -- resources: memory and file descriptors ----------------------------------------


@pytest.mark.parametrize("op", READ_OPS)
@pytest.mark.parametrize("dtype", [tensor_pb2.DTYPE_FLOAT32, tensor_pb2.DTYPE_COMPLEX128,
                                   tensor_pb2.DTYPE_BYTES])
def test_tensor_without_elements_but_huge_dimensions_reads_empty(
    tmp_path: Path, op: str, dtype: int,
) -> None:
    # The product of the non-zero dimensions is at most 2^58, so these indexes
    # are valid [R-TENSOR-003]; with items of at most 16 bytes (complex128) the
    # shape stays within 2^62 bytes, so NumPy holds it and every read works.
    for shape in [(0, 1 << 58), (1 << 58, 0), (0, 1 << 40, 1 << 18), (1 << 29, 0, 1 << 29)]:
        index = make_index([TensorSpec("z", dtype, shape, plain_block(b"", 64))])
        path = write_file(tmp_path / FILE_NAME, index)
        with ocf.Reader(path) as reader:
            result = _read_calls(reader, "z")[op]()
        assert isinstance(result, np.ndarray)
        assert result.shape == shape
        assert result.size == 0


@pytest.mark.parametrize("shape", [(0, (1 << 58) + 1), ((1 << 29) + 1, 0, 1 << 29),
                                   (1 << 31, 0, 1 << 31), (0, 1 << 62)])
def test_tensor_without_elements_over_the_dimension_limit_is_refused(
    tmp_path: Path, shape: tuple[int, ...],
) -> None:
    # Just over 2^58, and the old limit of 2^62: LIMIT_EXCEEDED at open [R-TENSOR-003].
    index = make_index([TensorSpec("z", tensor_pb2.DTYPE_UINT8, shape, plain_block(b"", 64))])
    path = write_file(tmp_path / FILE_NAME, index)
    with pytest.raises(ocf.LimitExceededError) as caught:
        ocf.Reader(path)
    assert caught.value.requirement == "R-TENSOR-003"


def test_many_slices_allocate_memory_in_proportion_to_the_file(tmp_path: Path) -> None:
    # 4096 one-element slices, the most a tensor may have [R-SLICE-004].
    count = 4096
    values = np.arange(count, dtype=np.uint8)
    data = b"".join(pad64(bytes([v])) for v in values.tolist())
    index = make_index([TensorSpec("t", tensor_pb2.DTYPE_UINT8, (count,), slices=tuple(
        ((k,), (1,), plain_block(bytes([values[k]]), 64 + 64 * k)) for k in range(count)))])
    blob = build_file(index, data)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    tracemalloc.start()
    try:
        with ocf.Reader(path) as reader:
            assert np.array_equal(reader.read_tensor("t"), values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_memory(Outcome(peak=peak), {FILE_NAME: blob}, FILE_NAME)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


@needs_proc
@pytest.mark.parametrize("form", ["file", "directory"])
def test_closing_a_reader_releases_every_file_descriptor(tmp_path: Path, form: str) -> None:
    target = tmp_path / (FILE_NAME if form == "file" else DIR_NAME)
    ocf.save_file({"a": np.arange(600, dtype=np.int64), "b": np.arange(300, dtype=np.int32)},
                  target, layout=form, max_shard_size=4096)
    before = _open_descriptors()
    for _ in range(5):
        with ocf.Reader(target) as reader:
            reader.read_tensor("a")
    assert _open_descriptors() == before


@needs_proc
def test_failing_to_open_a_checkpoint_releases_every_file_descriptor(tmp_path: Path) -> None:
    target, shards = _written_directory(tmp_path)
    shards[1].unlink()  # the first shard opens, the second is missing
    before = _open_descriptors()
    for _ in range(5):
        with pytest.raises(ocf.NotFoundError):
            ocf.Reader(target)
    assert _open_descriptors() == before


@pytest.mark.parametrize("kind", ["directory", "symlink_loop", "dangling_symlink"])
def test_shard_name_of_something_other_than_a_regular_file_is_not_found(
    tmp_path: Path, kind: str,
) -> None:
    # A name that passes [R-SHARD-001] but is not a regular file: "a reader
    # MUST report NOT_FOUND when no regular file has that name" [R-SHARD-002].
    # The recorded length is the directory's own st_size, so that a size check
    # alone cannot catch it.
    checkpoint = tmp_path / DIR_NAME
    checkpoint.mkdir()
    shard = checkpoint / "data.ocfd"
    if kind == "directory":
        shard.mkdir()
    elif kind == "symlink_loop":
        shard.symlink_to(shard.name)
    else:
        shard.symlink_to("missing.ocfd")
    length = max(shard.stat().st_size if kind == "directory" else 64, 64)
    index = make_index([TensorSpec("e", tensor_pb2.DTYPE_UINT8, (0,), plain_block(b"", 64))],
                       shards=[(shard.name, length)])
    write_file(checkpoint / INDEX_FILE_NAME, index)
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(checkpoint)


def _two_shard_checkpoint(directory: Path) -> Path:
    """A directory checkpoint whose tensors live in external shard files."""
    ocf.save_file({"a": np.arange(64, dtype=np.float32), "b": np.ones(64, np.float32)},
                  directory, layout="directory", max_shard_size=320)
    shards = sorted(p for p in directory.iterdir() if p.name != INDEX_FILE_NAME)
    assert shards, "the save made no external shard"
    return shards[0]


def test_a_shard_symlinked_to_a_valid_shard_elsewhere_is_not_followed(tmp_path: Path) -> None:
    # [R-SHARD-002]: a name is resolved in the directory, never through a link elsewhere.
    shard = _two_shard_checkpoint(tmp_path / DIR_NAME)
    elsewhere = tmp_path / "elsewhere.ocfd"
    shard.rename(elsewhere)  # the same, valid bytes, outside the checkpoint
    shard.symlink_to(elsewhere)
    with pytest.raises(ocf.NotFoundError, match=r"symbolic link, which is never followed "
                       r".*\[R-SHARD-002\]"):
        ocf.load_file(tmp_path / DIR_NAME)


def test_no_message_quotes_bytes_of_a_file_planted_as_a_shard(tmp_path: Path) -> None:
    secret = b"root:x:0:0:root:/root:/bin/bash\n" * 4
    shard = _two_shard_checkpoint(tmp_path / DIR_NAME)
    length = shard.stat().st_size
    outside = tmp_path / "passwd"
    outside.write_bytes(secret.ljust(length, b"#")[:length])
    shard.unlink()
    shard.symlink_to(outside)
    with pytest.raises(ocf.NotFoundError) as linked:
        ocf.load_file(tmp_path / DIR_NAME)
    shard.unlink()
    shard.write_bytes(outside.read_bytes())  # a regular file of the right size, not a shard
    with pytest.raises(ocf.MalformedError, match="does not start with the preamble") as planted:
        ocf.load_file(tmp_path / DIR_NAME)
    for error in (linked.value, planted.value):
        text = str(error)
        assert "root:x" not in text
        assert secret[:8].hex(" ") not in text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_shard_name_of_a_named_pipe_is_not_found_without_blocking(tmp_path: Path) -> None:
    checkpoint = tmp_path / DIR_NAME
    checkpoint.mkdir()
    fifo = checkpoint / "data.ocfd"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    index = make_index([TensorSpec("e", tensor_pb2.DTYPE_UINT8, (0,), plain_block(b"", 64))],
                       shards=[("data.ocfd", 64)])
    write_file(checkpoint / INDEX_FILE_NAME, index)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            ocf.Reader(checkpoint).close()
            outcome.append(None)
        except BaseException as exc:  # reported by the main thread
            outcome.append(exc)

    thread = threading.Thread(target=open_it, daemon=True)
    thread.start()
    thread.join(timeout=1.5)
    blocked = thread.is_alive()
    if blocked:  # unblock the reader's open() by opening the pipe's other end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=3)
    assert not blocked, "opening the checkpoint blocked on a named pipe named as a shard"
    assert outcome
    # "a reader MUST report NOT_FOUND when no regular file has that name" [R-SHARD-002]
    assert isinstance(outcome[0], ocf.NotFoundError), outcome
