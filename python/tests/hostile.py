"""What the hostile-input tests share: the valid checkpoints' shape (Original), writing
files to a fresh directory, reading everything back, and the memory a read may take.

See test_hostile_fuzz.py for the property tests and their argument, test_hostile_files.py
for targeted cases, test_hostile_resources.py for memory, descriptors and file kinds.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError, Message
from helpers import (
    INDEX_FILE_NAME,
    index_bytes_of,
)
from hypothesis import currently_in_test_context, event
from memory_support import traced_memory

import ocf
from ocf.v1 import index_pb2, tensor_pb2

# Limits of spec/format.md, "Limits".
MAX_INDEX_BYTES = 1 << 30  # format 1.2
ZSTD_RATIO = 32768  # raw bytes per stored byte of a zstd chunk [R-CHUNK-004]

FILE_NAME = "ckpt.ocf"
DIR_NAME = "ckpt"

METADATA: dict[str, Any] = {
    "step": 7,
    "name": "hostile",
    "lr": 0.25,
    "flags": [True, False, None],
    "nested": {"a": [1, [2, {"b": b"\x00\xff"}]], "empty_map": {}, "empty_list": []},
}


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
    with traced_memory() as memory:
        _read_all(path, verify, outcome)
    outcome.peak = memory.peak
    if currently_in_test_context():  # --hypothesis-show-statistics: how far inputs get
        stage = "opened" if outcome.opened else "refused at open"
        for category in sorted({e.label for e in outcome.errors}) or ["no error"]:
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


def read_calls(reader: ocf.Reader, key: str) -> dict[str, Callable[[], object]]:
    """The reads a targeted test expects to fail, by name."""
    return {
        "get_tensor": lambda: reader.get_tensor(key),
        "read_tensor": lambda: reader.read_tensor(key),
        "get_slice": lambda: reader.get_slice(key, ...),
        "verify_all": reader.verify_all,
    }


def written_directory(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A directory checkpoint of two tensors in two external shards."""
    target = tmp_path / DIR_NAME
    ocf.save_file({"a": np.arange(600, dtype=np.int64), "b": np.arange(300, dtype=np.int32)},
                  target, layout="directory", max_shard_size=4096)
    shards = sorted(p for p in target.iterdir() if p.name != INDEX_FILE_NAME)
    assert len(shards) == 2
    return target, shards
