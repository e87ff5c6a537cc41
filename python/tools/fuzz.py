"""Fuzz every reader of OCF with mutated files, each read in a capped child process.

    python python/tools/fuzz.py --seconds 600 [--seed N] [--artifacts DIR] [--json]

Seeds are generated, not downloaded: valid checkpoints of every format the
project reads (OCF single file and directory, with zstd, slices, byte
strings, metadata and an object graph; a TensorFlow bundle with its object
graph; safetensors; npz, stored and deflated). Each input is a seed with one
of its files mutated: bit flips, bytes and integers set to edge values,
truncation, insertion, deletion, duplication, splicing, and for OCF a
protobuf-aware change of one index field with the index checksum and footer
kept consistent, so that inputs get past the checksum into the parser and
the table checks. Chunk and TensorFlow checksums are skipped for a quarter
of the inputs (verify=False), so damaged data reaches the decoders.

Each input is read by a forked child with every read its format offers. The
child's address space (RLIMIT_AS) is capped at what it maps plus what the
files justify (a few copies of their bytes and of what their compressed
blocks may decode to: raw length up to 32768 times the stored length for an
OCF zstd block, 1032 times the file for npz), and the parent kills it after
``--timeout`` seconds. An input fails the run when:

- an exception other than ocf.OCFError escapes (an *escape*);
- the child is killed by the time limit (a *hang*) or dies otherwise (a *crash*);
- it runs out of memory while the files justify less than its cap, or its
  peak resident memory grows by more than they justify (*over-allocation*).

Failing inputs are written to ``--artifacts`` with the traceback. The
summary counts inputs, outcomes by error category, and failures, and the
exit status is 1 when anything failed. python/tests/test_fuzz.py runs this
script for a few seconds in the test command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from google.protobuf.message import DecodeError, Message

import ocf
from ocf.format.checksum import crc32c
from ocf.format.container import FOOTER_SIZE, Footer
from ocf.format.limits import MAX_ZSTD_RATIO
from ocf.formats import npz, safetensors
from ocf.formats import tensorflow as tf_format
from ocf.tensorflow.source import TFSource
from ocf.v1 import index_pb2
from ocf.v1.tensor_pb2 import CODEC_NONE

# What a read may take whatever the file: thread stacks (8 MiB of address space
# each for the reader's pool), NumPy and protobuf working memory, the zip module.
BASE_ADDRESS_SPACE = 192 << 20
BASE_RESIDENT = 32 << 20
# A read holds a few copies of what it returns (raw buffer, array, slice copy, the
# strings' Python objects, a conversion's output file buffers).
COPIES = 16
# Above this the cap no longer follows the files: memory of the machine.
MAX_CAP = 2 << 30

Files = dict[str, bytes]


@dataclass(frozen=True)
class Seed:
    """A valid checkpoint: its format, files by relative name, the name to read."""

    kind: str  # ocf-file, ocf-dir, tensorflow, safetensors, npz
    files: Files
    target: str  # what the reader opens, relative to the input's directory


# -- seeds ------------------------------------------------------------------------


def _read_tree(root: Path) -> Files:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _seed_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "i64": np.arange(-6, 6, dtype=np.int64),
        "mask": np.array([[True, False], [False, True]]),
        "u8": np.arange(600, dtype=np.uint8).reshape(20, 30) % 7,
        "names": np.array([b"", b"ab", "\u00fcn".encode()], dtype=object),
        "empty": np.zeros((0, 4), np.float16),
    }


def _object_root(arrays: dict[str, np.ndarray]) -> ocf.Module:
    root: Any = ocf.Module()  # attributes are the object graph's edges
    root.model = ocf.Module()
    root.model.dense = ocf.Module()
    root.model.dense.kernel = ocf.Variable(arrays["f32"])
    root.model.dense.bias = ocf.Variable(arrays["i64"][:5].astype(np.float32))
    root.step = ocf.Variable(np.int64(7))
    return cast(ocf.Module, root)


def make_seeds(work: Path, seed: int) -> list[Seed]:
    """Small valid files of every format, written with the project's writers."""
    rng = np.random.default_rng(seed)
    arrays = _seed_arrays(rng)
    seeds: list[Seed] = []
    metadata = {"step": 3, "lr": 0.5, "tags": ["a", "b"], "nested": {"x": None}}
    for name, options in [("plain", {}), ("zstd", {"compression": "zstd",
                                                    "byte_shuffle": True,
                                                    "chunk_size": 4096})]:
        path = work / f"{name}.ocf"
        with ocf.Writer(path, metadata=metadata, **options) as writer:  # type: ignore[arg-type]
            for key, array in arrays.items():
                writer.write(key, array)
            big = np.tile(np.arange(4096, dtype=np.uint16), 3)
            writer.write("chunked", big)  # several chunks of 4096 bytes
            tiled = np.arange(48, dtype=np.float64).reshape(6, 8)
            for start in ((0, 0), (0, 4), (3, 0), (3, 4)):
                box = tiled[start[0]:start[0] + 3, start[1]:start[1] + 4]
                writer.write_slice("tiled", box, start, tiled.shape)
        seeds.append(Seed("ocf-file", {"x.ocf": path.read_bytes()}, "x.ocf"))
    graph_file = work / "graph.ocf"
    ocf.write(_object_root(arrays), graph_file, metadata={"epoch": 1})
    seeds.append(Seed("ocf-file", {"x.ocf": graph_file.read_bytes()}, "x.ocf"))
    directory = work / "dir"
    with ocf.Writer(directory, layout="directory", max_shard_size=4096,
                    compression="zstd") as writer:
        for key, array in arrays.items():
            writer.write(key, array)
        writer.write("wide", np.arange(2048, dtype=np.int32))
    seeds.append(Seed("ocf-dir", {f"ckpt/{k}": v for k, v in _read_tree(directory).items()},
                      "ckpt"))
    prefix = work / "tf" / "model.ckpt"
    tf_format.from_ocf(graph_file, prefix, max_shard_bytes=64)
    seeds.append(Seed("tensorflow", _read_tree(work / "tf"), "model.ckpt"))
    plain_tensors = {k: v for k, v in arrays.items() if v.dtype != object}
    flat = work / "flat.ocf"
    ocf.save_file(plain_tensors, flat)
    safetensors.from_ocf(flat, work / "x.safetensors")
    seeds.append(Seed("safetensors", {"x.safetensors": (work / "x.safetensors").read_bytes()},
                      "x.safetensors"))
    savers: list[tuple[str, Callable[..., None]]] = [("stored", np.savez),
                                                      ("deflated", np.savez_compressed)]
    for name, save in savers:
        save(work / f"{name}.npz", **plain_tensors)
        seeds.append(Seed("npz", {"x.npz": (work / f"{name}.npz").read_bytes()}, "x.npz"))
    return seeds


# -- mutations --------------------------------------------------------------------

_EDGE_INTEGERS = [0, 1, 2, 7, 63, 64, 65, 127, 128, 255, 256, 4095, 4096, 32767, 32768,
                  65535, 65536, 2**24, 2**24 + 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                  2**58, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


def _edge_value(rng: random.Random) -> int:
    value = rng.choice(_EDGE_INTEGERS)
    return value if rng.random() < 0.8 else max(0, value + rng.randint(-3, 3))


def _mutate_bytes(data: bytes, rng: random.Random, donors: list[bytes]) -> bytes:
    """One byte-level mutation of ``data``."""
    blob = bytearray(data)
    if not blob:
        return bytes(rng.randbytes(rng.randint(1, 64)))
    at = rng.randrange(len(blob))
    choice = rng.randrange(9)
    if choice == 0:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(blob))
            blob[i] ^= 1 << rng.randrange(8)
    elif choice == 1:  # a random byte
        blob[at] = rng.randrange(256)
    elif choice == 2:  # an edge integer, little-endian, of 1 to 8 bytes
        width = rng.choice([1, 2, 4, 8])
        value = _edge_value(rng) % (1 << (8 * width))
        blob[at:at + width] = value.to_bytes(width, "little")
    elif choice == 3:  # truncate
        del blob[rng.randrange(len(blob)):]
    elif choice == 4:  # insert random bytes
        blob[at:at] = rng.randbytes(rng.randint(1, 32))
    elif choice == 5:  # delete a range
        del blob[at:at + rng.randint(1, 64)]
    elif choice == 6:  # duplicate a range
        end = min(len(blob), at + rng.randint(1, 256))
        blob[at:at] = blob[at:end]
    elif choice == 7 and donors:  # splice a piece of another file of the same format
        donor = rng.choice(donors)
        if donor:
            start = rng.randrange(len(donor))
            blob[at:at + rng.randint(1, 128)] = donor[start:start + rng.randint(1, 128)]
    else:  # a run of one byte (zeros, 0xff)
        blob[at:at + rng.randint(1, 64)] = bytes([rng.choice([0, 0xFF, 0x80])]) * \
            rng.randint(1, 64)
    return bytes(blob)


def _scalar_fields(message: Message) -> Iterator[tuple[Message, Any, int | None]]:
    """Every scalar field of ``message`` and its submessages: (message, field, index)."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is not None:
            if descriptor.message_type.GetOptions().map_entry:
                continue
            children = value if descriptor.is_repeated else [value]
            for child in children:
                yield from _scalar_fields(child)
        elif descriptor.is_repeated:
            for i in range(len(value)):
                yield message, descriptor, i
        else:
            yield message, descriptor, None


def _mutate_index_field(index: index_pb2.Index, rng: random.Random) -> bool:
    """Set one scalar field of the index to an edge value; False if there is none."""
    fields = list(_scalar_fields(index))
    if not fields:
        return False
    message, descriptor, i = rng.choice(fields)
    kind = descriptor.cpp_type
    container = getattr(message, descriptor.name)
    if kind == descriptor.CPPTYPE_STRING:
        old = container[i] if i is not None else container
        choices = [old[:-1], old + old[:1], "", ".", "..", "a/b", "index.ocf", "\x00",
                   "x" * 5000]
        value: Any = rng.choice(choices)
        if descriptor.type == descriptor.TYPE_BYTES:
            value = value.encode() if isinstance(value, str) else value
    elif kind == descriptor.CPPTYPE_BOOL:
        value = rng.random() < 0.5
    elif kind in (descriptor.CPPTYPE_FLOAT, descriptor.CPPTYPE_DOUBLE):
        value = rng.choice([0.0, -0.0, float("nan"), float("inf"), 1e308])
    else:
        bits = {descriptor.CPPTYPE_INT32: 31, descriptor.CPPTYPE_UINT32: 32,
                descriptor.CPPTYPE_INT64: 63, descriptor.CPPTYPE_UINT64: 64,
                descriptor.CPPTYPE_ENUM: 31}[kind]
        value = _edge_value(rng) % (1 << bits)
    try:
        if i is None:
            setattr(message, descriptor.name, value)
        else:
            container[i] = value
    except (TypeError, ValueError):
        return False
    return True


def _mutate_ocf_index(data: bytes, rng: random.Random) -> bytes | None:
    """``data`` (an OCF index file) with one index field changed and its index
    checksum and footer rewritten to match; None when the index does not parse."""
    if len(data) < 96:
        return None
    offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
    if offset + length != len(data) - FOOTER_SIZE:
        return None
    index = index_pb2.Index()
    try:
        index.ParseFromString(data[offset:offset + length])
    except DecodeError:
        return None
    if rng.random() < 0.15 and len(index.shards) > 0:  # structural: drop or repeat entries
        index.shards.add().CopyFrom(index.shards[rng.randrange(len(index.shards))])
    elif not _mutate_index_field(index, rng):
        return None
    body = index.SerializeToString()
    footer = Footer(offset, len(body), crc32c(body), *struct.unpack_from(
        "<HH", data, len(data) - FOOTER_SIZE + 20)).pack()
    return data[:offset] + body + footer


def _fix_index_checksum(data: bytes) -> bytes:
    """An OCF index file whose footer's CRC matches the index bytes again."""
    if len(data) < 96:
        return data
    offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
    if offset + length != len(data) - FOOTER_SIZE:
        return data
    at = len(data) - FOOTER_SIZE + 16
    return data[:at] + struct.pack("<I", crc32c(data[offset:offset + length])) + data[at + 4:]


def mutate(seed: Seed, rng: random.Random, donors: dict[str, list[bytes]]) -> Files:
    """The files of ``seed`` with one of them changed by one to four mutations."""
    files = dict(seed.files)
    names = sorted(files)
    indexes = [n for n in names if n.endswith((".ocf", ".index"))]
    name = rng.choice(indexes) if indexes and rng.random() < 0.6 else rng.choice(names)
    data = files[name]
    is_ocf_index = seed.kind.startswith("ocf") and name.endswith(".ocf")
    if is_ocf_index and rng.random() < 0.35:
        changed = _mutate_ocf_index(data, rng)
        if changed is not None:
            files[name] = changed
            return files
    for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
        data = _mutate_bytes(data, rng, donors.get(seed.kind, []))
    if is_ocf_index and rng.random() < 0.7:  # past the index checksum, into the parser
        data = _fix_index_checksum(data)
    files[name] = data
    return files


# -- what a child does with one input ----------------------------------------------


def _read_ocf(path: Path, verify: bool) -> None:
    with ocf.Reader(path, verify=verify) as reader:
        dict(reader.metadata)
        for key in list(reader):
            info = reader[key]
            reader.get_tensor(key)
            reader.read_tensor(key)
            reader.get_slice(key, tuple(slice(0, max(1, d // 2)) for d in info.shape))
            if info.dtype.numpy is not None:
                reader.read_into(key, np.empty(info.shape, info.dtype.numpy))
        reader.read_tensors(list(reader))
        reader.verify_all()
        graph = reader.object_graph
        if graph is not None:
            for node in range(len(graph.nodes)):
                graph.path_end(node, 200)


def _read_tensorflow(path: Path, verify: bool) -> None:
    with TFSource(path, verify=verify) as source:
        for key in source:
            source.summary(key)
            source.read_tensor(key)
            entry = source.bundle.entry(key)
            for i in range(len(entry.slices or ())):
                source.bundle.read_slice(key, i)
        graph = source.object_graph
        if graph is not None:
            for node in range(len(graph.nodes)):
                graph.path_end(node, 200)


def _convert(module: Any) -> Callable[[Path, bool], None]:
    def read(path: Path, verify: bool) -> None:
        out = path.parent / "converted.ocf"
        module.to_ocf(path, out)
        _read_ocf(out, verify)
    return read


READERS: dict[str, Callable[[Path, bool], None]] = {
    "ocf-file": _read_ocf,
    "ocf-dir": _read_ocf,
    "tensorflow": _read_tensorflow,
    "safetensors": _convert(safetensors),
    "npz": _convert(npz),
}


def justified_bytes(seed_kind: str, files: Files) -> int:
    """The memory a read of ``files`` may take: the copies a read holds of their bytes,
    and of what their compressed data may expand to."""
    total = sum(len(v) for v in files.values())
    if seed_kind.startswith("ocf"):
        total += _zstd_expansion(files)
    elif seed_kind == "npz":  # a member's declared size is at most 1032 times its bytes
        total *= max(npz.MAX_RATIO.values())
    return COPIES * total


def _zstd_expansion(files: Files) -> int:
    """What the compressed blocks of the OCF index files among ``files`` may decode to:
    each block's raw length, up to 32768 times its stored length [R-CHUNK-004]."""
    expansion = 0
    for name, data in files.items():
        if not name.endswith(".ocf") or len(data) < 96:
            continue
        offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
        if offset + length != len(data) - FOOTER_SIZE:
            continue  # the reader stops at the footer
        index = index_pb2.Index()
        try:
            index.ParseFromString(data[offset:offset + length])
        except DecodeError:
            continue  # the reader stops at the parse
        blocks = index.blocks
        for codec, stored, raw in zip(blocks.codecs, blocks.stored_lengths, blocks.raw_lengths):
            if codec != CODEC_NONE:
                expansion += min(raw, MAX_ZSTD_RATIO * stored)
    return expansion


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _peak_resident() -> int:
    """The process's peak resident memory since the last _reset_peak (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)


def _read_one(job: dict[str, Any]) -> dict[str, Any]:
    """Read one input under the job's cap on the address space; how it ended."""
    target = Path(job["directory"]) / job["target"]
    _reset_peak()
    before = _peak_resident()
    cap = _address_space() + BASE_ADDRESS_SPACE + min(job["justified"], MAX_CAP)
    outcome: dict[str, Any] = {"result": "ok"}
    # The soft limit: the hard one stays unlimited, so the next input can raise it again.
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
    try:
        READERS[job["kind"]](target, job["verify"])
    except ocf.OCFError as exc:
        outcome = {"result": exc.label, "requirement": exc.requirement}
    except BaseException as exc:
        outcome = {"result": "escape", "error": f"{type(exc).__name__}: {exc}"[:2000],
                   "traceback": traceback.format_exc()[-6000:]}
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,
                                                resource.RLIM_INFINITY))
    outcome["growth"] = max(0, _peak_resident() - before)
    outcome["cap"] = cap
    return outcome


def _serve(jobs: int, results: int) -> None:
    """The worker: one JSON job per line in, one JSON outcome per line out; never returns."""
    with contextlib.suppress(BaseException), os.fdopen(jobs, "r") as lines:
        for line in lines:
            outcome = _read_one(json.loads(line))
            os.write(results, (json.dumps(outcome) + "\n").encode())
    os._exit(0)


@dataclass
class Result:
    outcome: str  # ok, an error label, escape, hang, crash, over-allocation
    detail: str = ""
    growth: int = 0


class Worker:
    """A forked child that reads inputs one at a time, replaced when it hangs or dies.

    Each input gets its own cap on the address space (a soft RLIMIT_AS, set
    from what the child maps before the read) and its own peak resident
    memory (VmHWM, reset before the read); a time limit kills the child.
    """

    def __init__(self) -> None:
        self.pid = 0
        self._spawn()

    def _spawn(self) -> None:
        jobs_read, jobs_write = os.pipe()
        results_read, results_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(jobs_write)
            os.close(results_read)
            try:
                _serve(jobs_read, results_write)
            finally:
                os._exit(70)
        os.close(jobs_read)
        os.close(results_write)
        self.pid, self._jobs, self._results = pid, jobs_write, results_read
        self._pending = b""

    def _replace(self, kill: bool) -> int:
        """End the child (killing it when ``kill``) and start another; its wait status."""
        if kill:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        os.close(self._jobs)
        os.close(self._results)
        self._spawn()
        return status

    def read(self, job: dict[str, Any], timeout: float) -> dict[str, Any] | Result:
        try:
            os.write(self._jobs, (json.dumps(job) + "\n").encode())
        except BrokenPipeError:
            status = self._replace(kill=False)
            return Result("crash", f"the worker had died: wait status {status:#x}")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            ready = select.select([self._results], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._replace(kill=True)
                return Result("hang", f"still running after {timeout} s")
            piece = os.read(self._results, 65536)
            if not piece:
                status = self._replace(kill=False)
                signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
                return Result("crash", f"worker died: wait status {status:#x}, signal "
                                       f"{signal_number}")
            self._pending += piece
        line, self._pending = self._pending.split(b"\n", 1)
        outcome: dict[str, Any] = json.loads(line)
        return outcome

    def close(self) -> None:
        os.close(self._jobs)
        os.waitpid(self.pid, 0)
        os.close(self._results)


def run_one(worker: Worker, seed_kind: str, directory: Path, target: str, verify: bool,
            timeout: float) -> Result:
    justified = justified_bytes(seed_kind, _read_tree(directory))
    outcome = worker.read({"kind": seed_kind, "directory": str(directory), "target": target,
                           "verify": verify, "justified": justified}, timeout)
    if isinstance(outcome, Result):
        return outcome
    growth = outcome["growth"]
    if outcome["result"] == "escape":
        return Result("escape", outcome["error"] + "\n" + outcome["traceback"], growth)
    if outcome["result"] == "OUT_OF_MEMORY" and justified < MAX_CAP:
        return Result("over-allocation", f"out of memory under a cap of {outcome['cap']} "
                                         f"bytes; the files justify {justified}", growth)
    if growth > BASE_RESIDENT + justified:
        return Result("over-allocation", f"resident memory grew by {growth} bytes; the files "
                                         f"justify {justified}", growth)
    return Result(outcome["result"], outcome.get("requirement") or "", growth)


# -- the campaign ------------------------------------------------------------------

FAILURES = ("escape", "hang", "crash", "over-allocation")
_PLURAL = {"escape": "escapes", "hang": "hangs", "crash": "crashes",
           "over-allocation": "over-allocations"}


@dataclass
class Summary:
    seconds: float = 0.0
    inputs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    by_format: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "inputs": self.inputs,
                "inputs_per_second": round(self.inputs / max(self.seconds, 1e-9), 1),
                "outcomes": dict(self.outcomes.most_common()),
                "by_format": dict(self.by_format.most_common()),
                "failures": {k: self.outcomes[k] for k in FAILURES},
                "failed_inputs": self.failures}

    def table(self) -> str:
        rows = [("inputs", str(self.inputs)), ("seconds", f"{self.seconds:.0f}"),
                ("inputs per second", f"{self.inputs / max(self.seconds, 1e-9):.1f}")]
        rows += [(f"inputs: {k}", str(v)) for k, v in self.by_format.most_common()]
        rows += [(f"outcome: {k}", str(v)) for k, v in self.outcomes.most_common()
                 if k not in FAILURES]
        rows += [(_PLURAL[k], str(self.outcomes[k])) for k in FAILURES]
        width = max(len(k) for k, _ in rows)
        return "\n".join([f"| {'what':<{width}} | count |", f"|{'-' * (width + 2)}|-------|"]
                         + [f"| {k:<{width}} | {v} |" for k, v in rows])


def _save_failure(artifacts: Path, number: int, directory: Path, result: Result) -> str:
    where = artifacts / f"{number:07d}-{result.outcome}"
    shutil.copytree(directory, where / "input", symlinks=True)
    (where / "detail.txt").write_text(result.detail)
    return str(where)


def _materialize(directory: Path, files: Files) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def campaign(seconds: float, seed: int, timeout: float, artifacts: Path | None,
             max_inputs: int | None = None) -> Summary:
    rng = random.Random(seed)
    scratch_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    summary = Summary()
    with tempfile.TemporaryDirectory(prefix="ocf-fuzz-", dir=scratch_root) as tmp:
        work = Path(tmp)
        seeds = make_seeds(work / "seeds", seed)
        donors: dict[str, list[bytes]] = {}
        for s in seeds:
            donors.setdefault(s.kind, []).extend(s.files.values())
        case = work / "input"
        worker = Worker()
        start = time.monotonic()
        while time.monotonic() - start < seconds and (max_inputs is None
                                                      or summary.inputs < max_inputs):
            chosen = rng.choice(seeds)
            files = mutate(chosen, rng, donors)
            _materialize(case, files)
            verify = rng.random() >= 0.25
            result = run_one(worker, chosen.kind, case, chosen.target, verify, timeout)
            summary.inputs += 1
            summary.by_format[chosen.kind] += 1
            summary.outcomes[result.outcome] += 1
            if result.outcome in FAILURES:
                saved = _save_failure(artifacts, summary.inputs, case, result) \
                    if artifacts is not None else ""
                summary.failures.append({"outcome": result.outcome, "format": chosen.kind,
                                         "detail": result.detail[:3000], "saved": saved})
        summary.seconds = time.monotonic() - start
        worker.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds one input may take before it counts as a hang")
    parser.add_argument("--max-inputs", type=int, default=None)
    parser.add_argument("--artifacts", type=Path, default=None,
                        help="directory for failing inputs")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    if args.artifacts is not None:
        args.artifacts.mkdir(parents=True, exist_ok=True)
    summary = campaign(args.seconds, seed, args.timeout, args.artifacts, args.max_inputs)
    if args.json:
        print(json.dumps({"seed": seed, **summary.as_json()}))
    else:
        print(f"seed {seed}")
        print(summary.table())
        for failure in summary.failures[:20]:
            print(f"\n{failure['outcome']} ({failure['format']}) {failure['saved']}\n"
                  f"{failure['detail']}")
    return 1 if any(summary.outcomes[k] for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
