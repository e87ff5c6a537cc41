"""OCF against every peer, side by side, as ratios to a raw floor measured in the same run.

    .venv/bin/python python/benchmarks/bench_io.py [--quick | --smoke] [--repeat N]
        [--dir DIR] [--json PATH] [--systems raw,ocf,...] [--workloads W1,W2,...]

Workloads (sizes of the full run; --quick shrinks them, --smoke more):

- W1: 1 GiB in 64 float32 tensors of 16 MiB: save (with fsync), full load into
  private memory (new arrays).
- W2: 20,000 float32 tensors of 4 KiB: save; open + full load.
- W3: open the W1 checkpoint and read one 16 MiB tensor.
- W4: open a checkpoint of 100,000 tensors and list their keys.
- W5: open the W2 checkpoint and read every tensor by its key, one call each.
- W6: OCF only: zstd + byte shuffle save and load of 512 MiB of float32 weights
  rounded to bfloat16 precision, 1 and 2 writer threads.
- W7: OCF only: the stall of an asynchronous save of the W1 state, against a
  blocking save.
- W8: `import ocf` and `ocf --version` in a fresh process, against `import
  numpy` and `import safetensors.numpy`, net of an empty interpreter's start.

Systems: the raw floor (one file, ``os.writev`` + fsync; ``readinto`` new
arrays), OCF, safetensors, ``torch.save``/``torch.load``,
``torch.distributed.checkpoint`` (one process, no process group),
TensorFlow's ``tf.train.Checkpoint`` and Orbax's ``PyTreeCheckpointer``.
Each system runs in its own subprocess (their imports and allocators must not
interfere), generates the same data from the same seed, and reports every
sample as JSON; this process prints the Markdown report. See README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
Tensors = dict[str, np.ndarray]


# -- sizes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """The sizes of one kind of run."""

    big: tuple[int, tuple[int, ...]]  # W1, W3, W7: (count, shape) of float32 tensors
    small: tuple[int, int]  # W2, W5: (count, elements)
    listed: int  # W4: tensors of 4 elements
    compressed_mib: int  # W6
    repeat: int


SCALES = {
    "full": Scale((64, (2048, 2048)), (20_000, 1024), 100_000, 512, 5),
    "quick": Scale((16, (512, 512)), (2_000, 1024), 10_000, 64, 3),
    "smoke": Scale((2, (64, 64)), (20, 256), 30, 1, 1),
}


def big_tensors(scale: Scale) -> Tensors:
    count, shape = scale.big
    rng = np.random.default_rng(1)
    return {f"layers.{i:03d}.weight": rng.random(shape, dtype=np.float32) for i in range(count)}


def small_tensors(scale: Scale) -> Tensors:
    count, elements = scale.small
    rng = np.random.default_rng(2)
    block = rng.random((count, elements), dtype=np.float32)
    return {f"layers.{i:05d}.weight": block[i].copy() for i in range(count)}


def listed_tensors(scale: Scale) -> Tensors:
    values = np.arange(scale.listed * 4, dtype=np.float32).reshape(scale.listed, 4)
    return {f"t.{i:06d}": values[i].copy() for i in range(scale.listed)}


def bf16_weights(mib: int) -> Tensors:
    """float32 weights rounded to bfloat16 precision (their low 16 bits zero), as a
    model trained in bf16 and saved in float32 holds: what shuffle + zstd is for."""
    rng = np.random.default_rng(3)
    count = max(1, mib // 16)
    elements = mib * MiB // 4 // count
    out = {}
    for i in range(count):
        values = rng.normal(0, 0.02, elements).astype(np.float32)
        out[f"layers.{i:03d}.weight"] = (values.view(np.uint32) & 0xFFFF0000).view(np.float32)
    return out


# -- durability and timing -----------------------------------------------------


def fsync_tree(path: Path) -> None:
    """fsync every file under ``path`` (or ``path`` itself) and its directories: what
    a system that does not fsync pays to be durable like OCF and the raw floor."""
    paths = [path] if path.is_file() else [path, *path.rglob("*")]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        for leftover in path.parent.glob(path.name + "*"):  # TF writes prefix.index, ...
            leftover.unlink()


def timed_runs(action: Callable[[], object], repeat: int, *,
               before: Callable[[], None] | None = None,
               check: Callable[[Any], None] | None = None, warm: bool = True) -> list[float]:
    """One untimed warm-up (whose result ``check`` validates; none if not ``warm``), then
    ``repeat`` timed runs; ``before`` prepares each run untimed. The result lives until
    the clock stops."""
    samples = []
    for run in range(0 if warm else 1, repeat + 1):
        if before is not None:
            before()
        gc.collect()
        start = time.perf_counter()
        result = action()
        elapsed = time.perf_counter() - start
        if run == 0 and check is not None:
            check(result)
        elif run:
            samples.append(elapsed)
        del result
    return samples


def same(expected: Tensors, got: dict[str, Any], what: str) -> None:
    if sorted(got) != sorted(expected):
        raise AssertionError(f"{what}: keys differ")
    for key, array in expected.items():
        value = np.asarray(got[key])
        if value.shape != array.shape or not np.array_equal(value, array):
            raise AssertionError(f"{what}: tensor {key} differs")


# -- the systems ---------------------------------------------------------------
#
# Each system has the operations it can do; a missing one is "n/a" in the
# report. save(tensors, path); load(path, layout) -> arrays; one(path, key,
# shape) -> array; keys(path) -> list; per_key(path, keys, shape) -> arrays.


Layout = list[tuple[str, tuple[int, ...]]]


class Raw:
    """The floor: one file, no index; the reader is told the layout."""

    suffix = ".raw"

    def save(self, tensors: Tensors, path: Path) -> None:
        views = [memoryview(a).cast("B") for a in tensors.values()]
        with open(path, "wb") as f:
            for at in range(0, len(views), 1024):  # IOV_MAX
                batch = views[at : at + 1024]
                while batch:
                    written = os.writev(f.fileno(), batch)
                    while batch and written >= len(batch[0]):
                        written -= len(batch[0])
                        batch = batch[1:]
                    if batch and written:
                        batch[0] = batch[0][written:]
            os.fsync(f.fileno())

    def load(self, path: Path, layout: Layout) -> Tensors:
        out = {}
        with open(path, "rb", buffering=0) as f:
            for key, shape in layout:
                array = np.empty(shape, dtype=np.float32)
                f.readinto(memoryview(array).cast("B"))
                out[key] = array
        return out

    def one(self, path: Path, key: str, layout: Layout) -> np.ndarray:
        index = [k for k, _ in layout].index(key)  # a raw file has no index to consult
        shape = layout[index][1]
        array = np.empty(shape, dtype=np.float32)
        with open(path, "rb", buffering=0) as f:
            f.seek(index * array.nbytes)
            f.readinto(memoryview(array).cast("B"))
        return array

    def per_key(self, path: Path, layout: Layout) -> Tensors:
        out = {}
        fd = os.open(path, os.O_RDONLY)
        try:
            at = 0
            for key, shape in layout:
                array = np.empty(shape, dtype=np.float32)
                os.preadv(fd, [memoryview(array).cast("B")], at)
                at += array.nbytes
                out[key] = array
        finally:
            os.close(fd)
        return out


class OCF:
    suffix = ".ocf"

    def __init__(self) -> None:
        import ocf

        self.ocf = ocf

    def save(self, tensors: Tensors, path: Path) -> None:
        self.ocf.save_file(tensors, path)  # temp file, fsync, rename, fsync of the directory

    def load(self, path: Path, layout: Layout) -> Tensors:
        return self.ocf.load_file(path)  # type: ignore[no-any-return]

    def one(self, path: Path, key: str, layout: Layout) -> np.ndarray:
        with self.ocf.open(path) as reader:
            return reader.read_tensor(key)  # type: ignore[no-any-return]

    def keys(self, path: Path) -> list[str]:
        with self.ocf.open(path) as reader:
            return list(reader)

    def per_key(self, path: Path, layout: Layout) -> Tensors:
        # get_tensor: verified read-only views of the map; kept until the clock stops.
        reader = self.ocf.open(path)
        return {key: reader.get_tensor(key) for key in reader}


class Safetensors:
    suffix = ".safetensors"

    def __init__(self) -> None:
        import safetensors.numpy
        from safetensors import safe_open

        self.st = safetensors.numpy
        self.safe_open = safe_open

    def save(self, tensors: Tensors, path: Path) -> None:
        self.st.save_file(tensors, path)
        fsync_tree(path)

    def load(self, path: Path, layout: Layout) -> Tensors:
        return self.st.load_file(path)  # type: ignore[no-any-return]

    def one(self, path: Path, key: str, layout: Layout) -> np.ndarray:
        with self.safe_open(path, framework="np") as f:
            return f.get_tensor(key)  # type: ignore[no-any-return]

    def keys(self, path: Path) -> list[str]:
        with self.safe_open(path, framework="np") as f:
            return list(f.keys())

    def per_key(self, path: Path, layout: Layout) -> Tensors:
        with self.safe_open(path, framework="np") as f:
            return {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 - not iterable


class Torch:
    suffix = ".pt"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def prepare(self, tensors: Tensors) -> dict[str, Any]:
        return {k: self.torch.from_numpy(v) for k, v in tensors.items()}

    def save(self, tensors: dict[str, Any], path: Path) -> None:
        self.torch.save(tensors, path)
        fsync_tree(path)

    def load(self, path: Path, layout: Layout) -> dict[str, Any]:
        return self.torch.load(path, weights_only=True)  # type: ignore[no-any-return]

    def one(self, path: Path, key: str, layout: Layout) -> Any:
        return self.torch.load(path, mmap=True, weights_only=True)[key].clone()

    def keys(self, path: Path) -> list[str]:
        return list(self.torch.load(path, mmap=True, weights_only=True))

    def per_key(self, path: Path, layout: Layout) -> dict[str, Any]:
        tensors = self.torch.load(path, mmap=True, weights_only=True)
        return {key: tensors[key].clone() for key in tensors}


class DCP:
    """torch.distributed.checkpoint in one process without a process group."""

    suffix = ".dcp"

    def __init__(self) -> None:
        import warnings

        import torch
        import torch.distributed.checkpoint as dcp

        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled")
        self.torch, self.dcp = torch, dcp

    def prepare(self, tensors: Tensors) -> dict[str, Any]:
        return {k: self.torch.from_numpy(v) for k, v in tensors.items()}

    def save(self, tensors: dict[str, Any], path: Path) -> None:
        self.dcp.save(tensors, checkpoint_id=path)  # its FileSystemWriter fsyncs
        fsync_tree(path)

    def load(self, path: Path, layout: Layout) -> dict[str, Any]:
        out = {key: self.torch.empty(shape) for key, shape in layout}
        self.dcp.load(out, checkpoint_id=path)
        return out

    def one(self, path: Path, key: str, layout: Layout) -> Any:
        out = {key: self.torch.empty(dict(layout)[key])}
        self.dcp.load(out, checkpoint_id=path)
        return out[key]

    def keys(self, path: Path) -> list[str]:
        return list(self.dcp.FileSystemReader(path).read_metadata().state_dict_metadata)


class TensorFlow:
    """tf.train.Checkpoint of one tf.Variable per tensor; read by tf.train.load_checkpoint."""

    suffix = ".tf"
    # Writing W4's 100,000 tensors takes it tens of minutes: W4 only below the full size.
    lists_only_small = True

    def __init__(self) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf

        self.tf = tf

    @staticmethod
    def _name(i: int) -> str:
        return f"t{i}"

    def prepare(self, tensors: Tensors) -> Any:
        variables = {self._name(i): self.tf.Variable(v) for i, v in enumerate(tensors.values())}
        self.names = {key: f"{self._name(i)}/.ATTRIBUTES/VARIABLE_VALUE"
                      for i, key in enumerate(tensors)}
        return self.tf.train.Checkpoint(**variables)

    def save(self, checkpoint: Any, path: Path) -> None:
        path.mkdir()
        checkpoint.write(str(path / "ckpt"))
        fsync_tree(path)

    def load(self, path: Path, layout: Layout) -> Tensors:
        reader = self.tf.train.load_checkpoint(str(path / "ckpt"))
        return {key: reader.get_tensor(self.names[key]) for key, _ in layout}

    def one(self, path: Path, key: str, layout: Layout) -> np.ndarray:
        reader = self.tf.train.load_checkpoint(str(path / "ckpt"))
        return reader.get_tensor(self.names[key])  # type: ignore[no-any-return]

    def keys(self, path: Path) -> list[str]:
        reader = self.tf.train.load_checkpoint(str(path / "ckpt"))
        keys = {name: key for key, name in self.names.items()}
        # Besides the variables, TF stores its object graph as one more entry.
        return [keys[name] for name in reader.get_variable_to_shape_map() if name in keys]

    per_key = load  # load_checkpoint's reader is a per-key reader


class Orbax:
    """orbax.checkpoint.PyTreeCheckpointer of a dict of NumPy arrays (OCDBT + Zarr)."""

    suffix = ".orbax"
    lists_only_small = True  # as TensorFlow

    def __init__(self) -> None:
        import orbax.checkpoint as ocp

        self.ocp = ocp
        self.checkpointer = ocp.PyTreeCheckpointer()

    def save(self, tensors: Tensors, path: Path) -> None:
        self.checkpointer.save(path, tensors)
        fsync_tree(path)

    def _restore(self, path: Path, keys: list[str], layout: Layout) -> Tensors:
        args = {k: self.ocp.RestoreArgs(restore_type=np.ndarray) for k in keys}
        partial = len(keys) < len(layout)
        # A partial restore names the wanted leaves by an item tree of their shapes.
        item = {k: np.empty(dict(layout)[k], np.float32) for k in keys} if partial else None
        return self.checkpointer.restore(  # type: ignore[no-any-return]
            path, args=self.ocp.args.PyTreeRestore(item=item, restore_args=args,
                                                   partial_restore=partial))

    def load(self, path: Path, layout: Layout) -> Tensors:
        return self._restore(path, [k for k, _ in layout], layout)

    def one(self, path: Path, key: str, layout: Layout) -> np.ndarray:
        return self._restore(path, [key], layout)[key]

    def keys(self, path: Path) -> list[str]:
        return list(self.checkpointer.metadata(path).item_metadata.tree)


SYSTEMS: dict[str, Callable[[], Any]] = {
    "raw": Raw, "ocf": OCF, "safetensors": Safetensors, "torch": Torch, "dcp": DCP,
    "tensorflow": TensorFlow, "orbax": Orbax,
}
LABELS = {"raw": "raw floor", "ocf": "OCF", "safetensors": "safetensors",
          "torch": "torch.save/load", "dcp": "torch DCP", "tensorflow": "TF Checkpoint",
          "orbax": "Orbax"}


# -- one system's worker -------------------------------------------------------


FLOOR = " | floor"  # suffix of the raw floor's samples paired with a measurement


def run_system(name: str, scale: Scale, workloads: set[str], workdir: Path, repeat: int
               ) -> dict[str, Any]:
    """Every measurement of system ``name``: {"W1 save": [samples], ...}.

    The raw floor of each measurement is measured again here, its runs
    alternating with the system's ("W1 save | floor"), so that a ratio to the
    floor compares runs made under the same load of the machine.
    """
    started = time.perf_counter()
    system = SYSTEMS[name]()
    out: dict[str, Any] = {"import_s": time.perf_counter() - started}
    prepare: Callable[[Tensors], Any] = getattr(system, "prepare", lambda t: t)
    floor = None if name == "raw" else Raw()
    base = workdir / name
    base.mkdir()

    def saved(tensors: Tensors, tag: str, *, timed: str | None) -> tuple[Path, Path]:
        """Save ``tensors`` with the system and the floor (timed as ``timed`` when given);
        the paths of the last saves."""
        state = prepare(tensors)
        path, floor_path = base / (tag + system.suffix), base / (tag + ".floor")

        def fresh(target: Path) -> Callable[[], None]:
            def before() -> None:
                remove(target)
                os.sync()  # settle write-back of earlier runs before the clock starts
            return before

        if timed is None:
            fresh(path)()
            system.save(state, path)
            if floor is not None:
                fresh(floor_path)()
                floor.save(tensors, floor_path)
        else:
            pair = None if floor is None else (lambda: floor.save(tensors, floor_path),
                                                fresh(floor_path))
            runs = timed_pair(lambda: system.save(state, path), repeat, before=fresh(path),
                              floor=pair)
            out[timed], out[timed + FLOOR] = runs
        return path, floor_path

    def measure(label: str, op: str, paths: tuple[Path, Path], *args: Any,
                expected: Tensors | None = None) -> None:
        action = getattr(system, op, None)
        if action is None:
            return

        def check(result: Any) -> None:
            if expected is not None:
                got = {k: np.asarray(v) for k, v in result.items()} if isinstance(
                    result, dict) else {next(iter(expected)): np.asarray(result)}
                same(expected, got, f"{name} {label}")

        floor_action = None if floor is None else getattr(floor, op)
        pair = None if floor_action is None else (lambda: floor_action(paths[1], *args), None)
        out[label], out[label + FLOOR] = timed_pair(lambda: action(paths[0], *args), repeat,
                                                    check=check, floor=pair)

    if workloads & {"W1", "W3"}:
        tensors = big_tensors(scale)
        layout = [(k, v.shape) for k, v in tensors.items()]
        paths = saved(tensors, "w1", timed="W1 save" if "W1" in workloads else None)
        if "W1" in workloads:
            measure("W1 load", "load", paths, layout, expected=tensors)
        if "W3" in workloads:
            key = layout[len(layout) // 2][0]
            measure("W3 open + one", "one", paths, key, layout, expected={key: tensors[key]})
        for path in paths:
            remove(path)
        del tensors
    if workloads & {"W2", "W5"}:
        tensors = small_tensors(scale)
        layout = [(k, v.shape) for k, v in tensors.items()]
        paths = saved(tensors, "w2", timed="W2 save" if "W2" in workloads else None)
        if "W2" in workloads:
            measure("W2 open + load", "load", paths, layout, expected=tensors)
        if "W5" in workloads:
            measure("W5 per-key reads", "per_key", paths, layout, expected=tensors)
        for path in paths:
            remove(path)
    if "W4" in workloads and hasattr(system, "keys") and not (
            getattr(system, "lists_only_small", False) and scale is SCALES["full"]):
        tensors = listed_tensors(scale)
        path = base / ("w4" + system.suffix)
        remove(path)
        system.save(prepare(tensors), path)
        out["W4 open + list"] = timed_runs(lambda: system.keys(path), repeat,
                                           check=lambda keys: _same_keys(keys, tensors))
        remove(path)
    if name == "raw" and "W1" in workloads:
        out.update(memcpy_rows(scale, repeat))
    if name == "ocf" and "W6" in workloads:
        out.update(compressed_rows(scale, base, repeat))
    if name == "ocf" and "W7" in workloads:
        out.update(async_rows(scale, base, repeat))
    shutil.rmtree(base, ignore_errors=True)
    return out


def timed_pair(action: Callable[[], object], repeat: int, *,
               before: Callable[[], None] | None = None,
               check: Callable[[Any], None] | None = None,
               floor: tuple[Callable[[], object], Callable[[], None] | None] | None
               ) -> tuple[list[float], list[float]]:
    """:func:`timed_runs` of ``action`` and of the floor's (action, before), one run of
    each in turn (which goes first alternates), so both see the same machine."""
    if floor is None:
        return timed_runs(action, repeat, before=before, check=check), []
    floor_action, floor_before = floor
    ours: list[float] = []
    theirs: list[float] = []
    for run in range(repeat + 1):
        pair = [(action, before, check, ours), (floor_action, floor_before, None, theirs)]
        for act, prep, checker, samples in pair[:: 1 if run % 2 else -1]:
            # Round 0 is the warm-up of both; every later round times one run of each.
            samples += timed_runs(act, int(run > 0), before=prep, check=checker,
                                  warm=run == 0)
    return ours, theirs


def _same_keys(keys: list[str], tensors: Tensors) -> None:
    if sorted(keys) != sorted(tensors):
        raise AssertionError("listed keys differ")


def memcpy_rows(scale: Scale, repeat: int) -> dict[str, list[float]]:
    """The memory-bandwidth reference: copying the W1 tensors into new arrays (what a
    load into private memory does at least), and into memory already mapped."""
    tensors = list(big_tensors(scale).values())
    targets = [np.ones_like(a) for a in tensors]

    def into_mapped() -> None:
        for target, source in zip(targets, tensors):
            np.copyto(target, source)

    return {"W1 memcpy into new arrays": timed_runs(lambda: [a.copy() for a in tensors], repeat),
            "W1 memcpy into mapped memory": timed_runs(into_mapped, repeat)}


def compressed_rows(scale: Scale, base: Path, repeat: int) -> dict[str, Any]:
    """W6 wall times, and the process CPU seconds of the same runs ("... CPU s"): on a
    shared machine the CPU time per byte is the figure another load does not move
    much, and it bounds what the given cores can do."""
    import ocf

    tensors = bf16_weights(scale.compressed_mib)
    path = base / "w6.ocf"
    out: dict[str, Any] = {}
    for threads in (1, 2):
        name = f"W6 zstd save, {threads} thread{'s' * (threads > 1)}"
        cpu: list[float] = []
        out[name] = timed_runs(
            with_cpu_time(lambda threads=threads: ocf.save_file(
                tensors, path, compression="zstd", byte_shuffle=True, threads=threads), cpu),
            repeat, before=lambda: remove(path))
        out[f"{name} CPU s"] = cpu[1:]  # without the warm-up
    out["W6 stored / raw bytes"] = path.stat().st_size / (scale.compressed_mib * MiB)
    cpu = []
    out["W6 zstd load"] = timed_runs(with_cpu_time(lambda: ocf.load_file(path), cpu), repeat,
                                     check=lambda got: same(tensors, got, "ocf zstd load"))
    out["W6 zstd load CPU s"] = cpu[1:]
    path.unlink()
    return out


def with_cpu_time(action: Callable[[], object], samples: list[float]) -> Callable[[], object]:
    """``action``, appending the CPU seconds of this process (all threads) per call."""
    def run() -> object:
        start = time.process_time()
        result = action()
        samples.append(time.process_time() - start)
        return result
    return run


def async_rows(scale: Scale, base: Path, repeat: int) -> dict[str, Any]:
    """Blocking save against the stall of an asynchronous one (until save_file returns),
    and the floor of that stall: one thread copying the same bytes into memory
    already mapped, as the snapshot's reused staging buffer is."""
    import ocf

    tensors = big_tensors(scale)
    targets = [np.ones_like(a) for a in tensors.values()]
    blocking, stall, memcpy = [], [], []
    for run in range(repeat + 1):
        for leftover in base.glob("w7*"):
            leftover.unlink()
        os.sync()
        start = time.perf_counter()
        ocf.save_file(tensors, base / "w7-blocking.ocf")
        middle = time.perf_counter()
        handle = ocf.save_file(tensors, base / "w7-async.ocf", blocking=False)
        returned = time.perf_counter()
        for array in tensors.values():  # the training step that goes on meanwhile
            array.reshape(-1)[:16] += 1.0
        handle.wait()
        copy_start = time.perf_counter()
        for target, array in zip(targets, tensors.values()):
            np.copyto(target, array)
        copied = time.perf_counter()
        if run:
            blocking.append(middle - start)
            stall.append(returned - middle)
            memcpy.append(copied - copy_start)
    return {"W7 blocking save": blocking, "W7 async save stall": stall,
            "W7 memcpy of the same bytes": memcpy}


# -- W8: imports in fresh processes --------------------------------------------


def import_rows(repeat: int) -> dict[str, list[float]]:
    """Seconds of a fresh interpreter running each command, net of an empty one's."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT / "python" / "src"), os.environ.get("PYTHONPATH", "")]))
    ocf_script = Path(sys.executable).parent / "ocf"
    commands = {
        "empty": [sys.executable, "-c", "pass"],
        "W8 import numpy": [sys.executable, "-c", "import numpy"],
        "W8 import ocf": [sys.executable, "-c", "import ocf"],
        "W8 ocf --version": [str(ocf_script) if ocf_script.exists() else sys.executable,
                             *([] if ocf_script.exists() else ["-m", "ocf"]), "--version"],
        "W8 import safetensors.numpy": [sys.executable, "-c", "import safetensors.numpy"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for run in range(repeat + 1):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
            if run:
                samples[name].append(time.perf_counter() - start)
    empty = statistics.median(samples.pop("empty"))
    return {name: [s - empty for s in runs] for name, runs in samples.items()}


# -- the report ----------------------------------------------------------------


ROWS = ("W1 save", "W1 load", "W2 save", "W2 open + load", "W3 open + one",
        "W4 open + list", "W5 per-key reads")
TARGETS = {  # issue 16: OCF / raw floor, or OCF against the best peer
    "W1 save": ("<= 1.0x raw", lambda o, r, p: o <= r),
    "W1 load": ("<= torch.load", None),
    "W2 save": ("<= 1.5x raw", lambda o, r, p: o <= 1.5 * r),
    "W2 open + load": ("<= 3.0x raw", lambda o, r, p: o <= 3.0 * r),
    "W3 open + one": ("<= 2.0x raw", lambda o, r, p: o <= 2.0 * r),
    "W5 per-key reads": ("<= safetensors", None),
}


def median(values: Any) -> float | None:
    return statistics.median(values) if isinstance(values, list) and values else None


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.3f} s" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


def floor_ratio(results: dict[str, Any], row: str, system: str) -> float | None:
    """The system's median over the median of the raw floor runs paired with it."""
    if system == "raw":
        return 1.0 if median(results.get(row)) else None
    ours, floor = median(results.get(row)), median(results.get(row + FLOOR))
    return ours / floor if ours and floor else None


def peer_table(results: dict[str, dict[str, Any]]) -> str:
    systems = [s for s in SYSTEMS if s in results and "error" not in results[s]]
    head = "| workload | " + " | ".join(LABELS[s] for s in systems) + \
        " | OCF / raw | best peer / raw | target | met? |"
    lines = [head, "|---|" + "--:|" * len(systems) + "--:|--:|---|---|"]
    for row in ROWS:
        medians = {s: median(results[s].get(row)) for s in systems}
        ratios = {s: floor_ratio(results[s], row, s) for s in systems}
        cells = [fmt(medians[s]) + (f" ({ratios[s]:.2f}x)" if ratios[s] else "")
                 for s in systems]
        ours = ratios.get("ocf")
        # Peers are ranked by their ratio to the floor when there is one, else by time.
        score = {s: ratios[s] or medians[s] for s in systems
                 if s not in ("raw", "ocf") and medians[s]}
        best = min(score, key=lambda s: score[s]) if score else None  # type: ignore[arg-type]
        target, rule = TARGETS.get(row, ("-", None))
        met = "-"
        if row == "W1 load" and ours and ratios.get("torch"):
            met = "yes" if ours <= ratios["torch"] else "NO"  # type: ignore[operator]
        elif row == "W5 per-key reads" and ours and ratios.get("safetensors"):
            met = "yes" if ours <= ratios["safetensors"] else "NO"  # type: ignore[operator]
        elif rule is not None and ours:
            met = "yes" if rule(ours, 1.0, None) else "NO"
        best_text = "-" if best is None else (
            f"{LABELS[best]} {ratios[best]:.2f}x" if ratios[best] else
            f"{LABELS[best]} {fmt(medians[best])}")
        lines.append(f"| {row} | " + " | ".join(cells) +
                     f" | {f'{ours:.2f}x' if ours else '-'} | {best_text} | {target} | {met} |")
    return "\n".join(lines)


def extra_table(results: dict[str, dict[str, Any]], scale: Scale) -> str:
    ocf_results, raw = results.get("ocf", {}), results.get("raw", {})
    lines = ["| measurement | median | figure |", "|---|--:|---|"]
    w1_bytes = scale.big[0] * int(np.prod(scale.big[1])) * 4
    for name in ("W1 memcpy into new arrays", "W1 memcpy into mapped memory"):
        m = median(raw.get(name))
        if m:
            lines.append(f"| {name} (raw worker) | {fmt(m)} | "
                         f"{w1_bytes / m / (1 << 30):.2f} GiB/s |")
    mib = scale.compressed_mib
    one = median(ocf_results.get("W6 zstd save, 1 thread"))
    two = median(ocf_results.get("W6 zstd save, 2 threads"))
    if one and two:
        lines.append(f"| W6 zstd + shuffle save, 1 thread | {fmt(one)} | {mib / one:.0f} MiB/s |")
        lines.append(f"| W6 zstd + shuffle save, 2 threads | {fmt(two)} | {mib / two:.0f} MiB/s, "
                     f"{one / two:.2f}x the 1-thread speed (target >= 1.9x, >= 400 MiB/s) |")
        ratio = ocf_results.get("W6 stored / raw bytes")
        lines.append(f"| W6 stored / raw bytes | - | {ratio:.3f} |")
    load = median(ocf_results.get("W6 zstd load"))
    if load:
        lines.append(f"| W6 zstd load | {fmt(load)} | {mib / 1024 / load:.2f} GiB/s "
                     "(target >= 1 GiB/s) |")
    for name in ("W6 zstd save, 1 thread", "W6 zstd save, 2 threads", "W6 zstd load"):
        cpu = median(ocf_results.get(f"{name} CPU s"))
        if cpu:
            lines.append(f"| {name}: process CPU time | {fmt(cpu)} | {cpu * 1024 / mib:.2f} "
                         f"CPU s/GiB: {mib / cpu:.0f} MiB/s per busy core, at most "
                         f"{2 * mib / cpu:.0f} MiB/s on 2 |")
    blocking = median(ocf_results.get("W7 blocking save"))
    stall = median(ocf_results.get("W7 async save stall"))
    if blocking and stall:
        lines.append(f"| W7 blocking save | {fmt(blocking)} | |")
        lines.append(f"| W7 async save stall | {fmt(stall)} | {100 * stall / blocking:.1f}% "
                     "of the blocking save (target <= 10%) |")
        memcpy = median(ocf_results.get("W7 memcpy of the same bytes"))
        if memcpy:
            lines.append(f"| W7 memcpy of the same bytes, 1 thread, into mapped memory | "
                         f"{fmt(memcpy)} | {100 * memcpy / blocking:.1f}% of the blocking "
                         f"save; the stall is {stall / memcpy:.2f}x this copy |")
    imports = results.get("imports", {})
    for name, runs in imports.items():
        target = " (target <= 0.3 s)" if name in ("W8 import ocf", "W8 ocf --version") else ""
        lines.append(f"| {name} (net of an empty interpreter) | {fmt(median(runs))} | "
                     f"{target} |")
    return "\n".join(lines)


def machine_facts(workdir: Path) -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    try:
        fs = subprocess.run(["df", "-T", str(workdir)], capture_output=True, text=True,
                            check=True).stdout.splitlines()[-1].split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        fs = "unknown"
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--",
                            "python/src"], capture_output=True, text=True).stdout.strip()
    return {"cpu": f"{os.cpu_count()} x {cpu}", "load average at start":
            " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "os": platform.platform(), "python": platform.python_version(),
            "git": f"{head} ({'python/src modified' if dirty else 'python/src clean'})",
            "file system": f"{fs} ({workdir})"}


# -- driving the workers -------------------------------------------------------


def worker_command(system: str, args: argparse.Namespace, workdir: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", system,
            "--scale", args.scale, "--repeat", str(args.repeat), "--dir", str(workdir),
            "--workloads", ",".join(sorted(args.workloads))]


def run_workers(args: argparse.Namespace, workdir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for system in args.systems:
        log(f"{system}: running")
        started = time.perf_counter()
        done = subprocess.run(worker_command(system, args, workdir), capture_output=True,
                              text=True)
        if done.returncode != 0:
            log(f"{system}: FAILED\n{done.stderr[-3000:]}")
            yield system, {"error": done.stderr.strip().splitlines()[-1:]}
            continue
        log(f"{system}: done in {time.perf_counter() - started:.0f} s")
        yield system, json.loads(done.stdout.strip().splitlines()[-1])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="scale", action="store_const", const="quick",
                      help="small sizes, 3 repeats: under 2 minutes, a check, not figures")
    size.add_argument("--smoke", dest="scale", action="store_const", const="smoke",
                      help="tiny sizes, 1 repeat: keeps the script from rotting (tests)")
    size.add_argument("--scale", choices=sorted(SCALES), help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per measurement after 1 warm-up (default 5 for "
                             "the full run)")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "bench-out",
                        help="where files are written (a fresh subdirectory, removed after)")
    parser.add_argument("--json", type=Path, default=None, help="also write every sample here")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from: {','.join(SYSTEMS)}")
    parser.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6,W7,W8")
    parser.add_argument("--worker", choices=sorted(SYSTEMS), help=argparse.SUPPRESS)
    parser.set_defaults(scale="full")
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    args.repeat = args.repeat or scale.repeat
    args.workloads = set(args.workloads.split(","))
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown or args.repeat < 1:
        parser.error(f"unknown systems {unknown}" if unknown else "--repeat must be >= 1")

    if args.worker:  # one system, in its own process: print its samples as JSON
        print(json.dumps(run_system(args.worker, scale, args.workloads, args.dir, args.repeat)))
        return 0

    args.dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-io-", dir=args.dir))
    started = time.perf_counter()
    try:
        facts = machine_facts(workdir)
        results = dict(run_workers(args, workdir))
        if "W8" in args.workloads:
            log("imports: running")
            results["imports"] = import_rows(args.repeat)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runtime = time.perf_counter() - started

    count, shape = scale.big
    print(f"# OCF against its peers ({args.scale} run)\n")
    for name, value in facts.items():
        print(f"- {name}: {value}")
    print(f"\nW1: {count} x {'x'.join(map(str, shape))} float32; W2/W5: {scale.small[0]:,} x "
          f"{scale.small[1] * 4} B; W4: {scale.listed:,} tensors; W6: {scale.compressed_mib} "
          f"MiB. Median of {args.repeat} timed runs after 1 warm-up, each system in its own "
          "process; (x) = ratio to the raw floor measured in that system's process, its runs "
          "alternating with the system's (so both see the same load). Saves include fsync for "
          "every system (an `os.fsync` of each written file inside the timed region for those "
          "that do not sync themselves). Loads read from the page cache.\n")
    print(peer_table(results))
    print()
    print(extra_table(results, scale))
    failed = {s: r["error"] for s, r in results.items() if "error" in r}
    for system, error in failed.items():
        print(f"\n{LABELS.get(system, system)} failed: {error}")
    print(f"\nTotal runtime: {runtime:.0f} s.")
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": facts, "scale": args.scale,
                                         "repeat": args.repeat, "results": results},
                                        indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
