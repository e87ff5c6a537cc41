"""Incremental saves (issue 25) against full saves and peers, ratios from one run.

    .venv/bin/python python/benchmarks/bench_incremental.py [--scale F] [--saves N]
        [--keep K] [--systems ocf-inc,ocf-full,torch,...] [--dir DIR] [--json PATH]
        [--skip-gib-check] [--rounds N]

Three scenarios, sizes of the full run times ``--scale`` (default 1.0):

- frozen: 1 GiB in 64 float32 tensors; between saves 3 of them change (4.7%),
  as a fine-tuned head over a frozen backbone;
- embedding: a 2 GiB float32 table of 1 KiB rows; between saves 2% of the
  rows change, in 8 clusters of adjacent rows at random places;
- everything: 1 GiB in 64 float32 tensors, all of which change (pretraining).

Each system saves ``--saves`` (10) checkpoints of the evolving state into one
directory, keeping the newest ``--keep`` (3), then restores the latest. OCF
runs through ``ocf.CheckpointManager``, incremental or not; the peers
(safetensors, torch.save, torch.distributed.checkpoint in one process, Orbax)
write full checkpoints with the same retention done by this script, and
fsync what they wrote (OCF fsyncs by itself). Reported per system: bytes
written per save (the files a save created, median over saves 2 to N), and
against the bytes the state changed by; save time and the CPU time of the
process during the save, all threads (medians over saves 2 to N); restore
time of the latest (median of 3; every tensor into new arrays, checksums
verified where the format has them), and the disk use of the directory after
the last save. Ratios are to OCF full in the same
run. Every restore is compared with the state saved.

With ``--rounds N`` each scenario is run N times, the order of the systems
rotated each round (on this machine whichever system runs first in a
scenario pays for fresh memory, up to 2x in save time): each figure is the
median over rounds, each ratio the median of the rounds' ratios.

Last, unless ``--skip-gib-check``: a 1 GiB float32 tensor (``--check-mib``)
is saved, then one byte at a time is changed at random places (and at its
first and last byte) and saved incrementally; each save must read back equal
to the changed tensor, and writes one band.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import stat
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import DCP, Orbax, Safetensors, Torch, fsync_tree

MiB = 1 << 20
RESTORES = 3  # restores of the latest checkpoint per system, the median reported
Tensors = dict[str, np.ndarray]


# -- the evolving states ------------------------------------------------------------


def layer_states(scale: float, saves: int, seed: int, changing: range) -> Iterator[Tensors]:
    """64 tensors of 16 MiB (times ``scale``); before each save after the first, those
    numbered in ``changing`` change."""
    rows = max(8, int(4096 * scale))
    rng = np.random.default_rng(seed)
    state = {f"layers.{i:03d}.weight": rng.random((rows, 1024), dtype=np.float32)
             for i in range(64)}
    for number in range(saves):
        if number:
            for i in changing:
                state[f"layers.{i:03d}.weight"] += np.float32(0.001)
        yield state


def frozen_states(scale: float, saves: int) -> Iterator[Tensors]:
    """A frozen backbone: the last 3 of 64 tensors change (4.7% of the state)."""
    return layer_states(scale, saves, 1, range(61, 64))


def embedding_states(scale: float, saves: int) -> Iterator[Tensors]:
    """One table of 1 KiB rows; before each save after the first, 2% of its rows change
    in 8 clusters."""
    rows = max(1024, int((2 << 30) * scale) // 1024)
    rng = np.random.default_rng(2)
    state = {"embedding.weight": rng.random((rows, 256), dtype=np.float32)}
    cluster = max(1, rows * 2 // 100 // 8)
    for number in range(saves):
        if number:
            for start in rng.integers(0, rows - cluster, 8):
                state["embedding.weight"][start:start + cluster] += np.float32(0.001)
        yield state


def everything_states(scale: float, saves: int) -> Iterator[Tensors]:
    """Pretraining: every one of the 64 tensors changes before every save."""
    return layer_states(scale, saves, 3, range(64))


def changed_bytes(scenario: str, scale: float) -> int:
    """The bytes of the state that change between two saves of ``scenario`` (the
    embedding's clusters taken as disjoint, which they nearly always are)."""
    layer = max(8, int(4096 * scale)) * 1024 * 4
    rows = max(1024, int((2 << 30) * scale) // 1024)
    return {"frozen": 3 * layer, "everything": 64 * layer,
            "embedding": 8 * max(1, rows * 2 // 100 // 8) * 1024}[scenario]


SCENARIOS: dict[str, Callable[[float, int], Iterator[Tensors]]] = {
    "frozen": frozen_states, "embedding": embedding_states, "everything": everything_states}


# -- the systems ----------------------------------------------------------------------


class OCFManaged:
    """ocf.CheckpointManager over a Saveable that writes the arrays with ocf.Writer."""

    def __init__(self, incremental: bool) -> None:
        import ocf

        self.ocf, self.incremental = ocf, incremental
        self.manager: Any = None
        self.arrays: Tensors = {}

    # The Saveable protocol (ocf.objects.manager.Saveable).
    save_counter = 0

    def write(self, path: str, **options: Any) -> str:
        with self.ocf.Writer(path, **options) as writer:
            writer.write_many(self.arrays)
        return path

    def save(self, prefix: str, **options: Any) -> str:
        self.save_counter += 1
        return self.write(f"{prefix}-{self.save_counter}", **options)

    def restore(self, path: str) -> object:
        return path

    def start(self, directory: Path, keep: int) -> None:
        self.save_counter = 0
        self.manager = self.ocf.CheckpointManager(self, directory, max_to_keep=keep,
                                                  incremental=self.incremental)

    def save_state(self, state: Tensors, directory: Path, number: int, keep: int) -> None:
        self.arrays = state
        self.manager.save()

    def restore_latest(self, directory: Path, state: Tensors) -> Tensors:
        with self.ocf.Reader(self.manager.latest_checkpoint) as reader:
            return {key: reader.read_tensor(key) for key in reader}

    def finish(self) -> None:
        self.manager.close()


class Peer:
    """A peer of bench_io writing full checkpoints, with max_to_keep done here."""

    def __init__(self, system: Any) -> None:
        self.system = system

    def start(self, directory: Path, keep: int) -> None:
        directory.mkdir(parents=True)
        self.saved: list[Path] = []

    def save_state(self, state: Tensors, directory: Path, number: int, keep: int) -> None:
        path = directory / f"ckpt-{number}{self.system.suffix}"
        prepare = getattr(self.system, "prepare", None)
        self.system.save(prepare(state) if prepare else state, path)
        self.saved.append(path)
        while len(self.saved) > keep:
            old = self.saved.pop(0)
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        fsync_tree(directory)

    def restore_latest(self, directory: Path, state: Tensors) -> Tensors:
        layout = [(key, value.shape) for key, value in state.items()]
        loaded = self.system.load(self.saved[-1], layout)
        return {key: np.asarray(value) for key, value in loaded.items()}

    def finish(self) -> None:
        pass


SYSTEMS: dict[str, Callable[[], Any]] = {
    "ocf-inc": lambda: OCFManaged(True), "ocf-full": lambda: OCFManaged(False),
    "safetensors": lambda: Peer(Safetensors()), "torch": lambda: Peer(Torch()),
    "dcp": lambda: Peer(DCP()), "orbax": lambda: Peer(Orbax())}
LABELS = {"ocf-inc": "OCF incremental", "ocf-full": "OCF full", "safetensors": "safetensors",
          "torch": "torch.save", "dcp": "torch DCP", "orbax": "Orbax"}


# -- measuring ------------------------------------------------------------------------


def files_of(directory: Path) -> dict[tuple[int, int], int]:
    """The size of every file under ``directory``, by inode: a file an incremental save
    linked into the pool is one file under two names, written once, stored once."""
    found = {}
    for path in directory.rglob("*"):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            found[(info.st_dev, info.st_ino)] = info.st_size
    return found


def run(system: Any, scenario: str, scale: float, saves: int, keep: int, base: Path
        ) -> dict[str, Any]:
    directory = base / "run"
    system.start(directory, keep)
    written, times, cpu = [], [], []
    state: Tensors = {}
    expected: Tensors = {}
    for number, state in enumerate(SCENARIOS[scenario](scale, saves), start=1):
        before = files_of(directory) if directory.exists() else {}
        gc.collect()
        start, start_cpu = time.perf_counter(), _cpu_seconds()
        system.save_state(state, directory, number, keep)
        times.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds() - start_cpu)
        after = files_of(directory)
        written.append(sum(size for path, size in after.items() if path not in before))
        expected = {key: value.copy() for key, value in state.items()} \
            if number == saves else expected
    disk = sum(files_of(directory).values())
    restores = []
    for _ in range(RESTORES):
        gc.collect()
        start = time.perf_counter()
        restored = system.restore_latest(directory, expected)
        restores.append(time.perf_counter() - start)
        for key, value in expected.items():
            if not np.array_equal(restored[key], value):
                raise AssertionError(f"{scenario}: {key} restored differs")
        del restored
    system.finish()
    return {"written": statistics.median(written[1:]), "save": statistics.median(times[1:]),
            "save_cpu": statistics.median(cpu[1:]),
            "restore": statistics.median(restores), "disk": disk,
            "state": sum(v.nbytes for v in expected.values()), "first_save": times[0]}


def _cpu_seconds() -> float:
    """CPU time of this process, all threads (the kernel's part included): on a shared
    machine the cost of a save that load does not stretch as it stretches wall time."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def gib_check(mib: int, base: Path) -> dict[str, Any]:
    """One byte changed at a time in a tensor of ``mib`` MiB: every change is saved."""
    import ocf
    from ocf.format.writing.banding import bands

    base.mkdir(parents=True)
    elements = mib * MiB // 4
    tensor = np.random.default_rng(4).random(elements, dtype=np.float32)
    flat = tensor.view(np.uint8)
    previous = None
    positions = [0, flat.size - 1, *np.random.default_rng(5).integers(0, flat.size, 3).tolist()]
    checked = []
    for number, position in enumerate([None, *positions]):
        if position is not None:
            flat[position] ^= 0x01
        path = base / f"ckpt-{number}"
        pool_before = files_of(base)
        with ocf.Writer(path, incremental=True, base=previous) as writer:
            writer.write("w", tensor)
        new = sum(s for p, s in files_of(base).items() if p not in pool_before)
        with ocf.Reader(path) as reader:
            reader.check_pool_identities()
            ok = bool(np.array_equal(reader.read_tensor("w"), tensor))
        if position is not None:
            checked.append({"byte": position, "saved": ok, "written": new})
        previous = path
    boxes = bands(tensor.shape, tensor.itemsize)
    band = boxes[0][1][0] * tensor.itemsize if boxes else tensor.nbytes
    return {"bytes": flat.size, "band": band, "changes": checked}


# -- the report -----------------------------------------------------------------------


def _ratio(result: dict[str, Any], full: dict[str, Any] | None, key: str) -> str:
    if not full:
        return "-"
    return f"{result.get('ratios', {}).get(key, result[key] / full[key]):.2f}x"


def rounds_of(scenario: str, systems: list[str], rounds: int, args: Any,
              tmp: Path) -> dict[str, dict[str, Any]]:
    """Each of ``systems`` run ``rounds`` times on ``scenario``, the order rotated each
    round; per system the median of each figure over the rounds and (``ratios``) the
    median of its ratios to OCF full in the same round."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    for number in range(rounds):
        for name in systems[number % len(systems):] + systems[:number % len(systems)]:
            where = tmp / scenario / name
            runs[name].append(run(SYSTEMS[name](), scenario, args.scale, args.saves,
                                  args.keep, where))
            shutil.rmtree(where)
            print(f"{scenario} {name} round {number + 1}: {runs[name][-1]}", file=sys.stderr,
                  flush=True)
    results = {}
    for name, results_of in runs.items():
        merged = {key: statistics.median(r[key] for r in results_of) for key in results_of[0]}
        if "ocf-full" in runs:
            merged["ratios"] = {key: statistics.median(
                r[key] / f[key] for r, f in zip(results_of, runs["ocf-full"]))
                for key in ("save", "save_cpu", "restore")}
        results[name] = merged
    return results


def table(results: dict[str, dict[str, dict[str, Any]]], systems: list[str], scale: float
          ) -> str:
    lines = []
    for scenario, by_system in results.items():
        full = by_system.get("ocf-full")
        changed = changed_bytes(scenario, scale)
        lines += [f"\n{scenario}: state {by_system[systems[0]]['state'] / MiB:.0f} MiB, "
                  f"{changed / MiB:.1f} MiB changed per save\n",
                  "| system | written/save | written / changed | save | save CPU | restore "
                  "| disk after | save / OCF full | save CPU / OCF full | restore / OCF full |",
                  "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for name in systems:
            r = by_system[name]
            lines.append(f"| {LABELS[name]} | {r['written'] / MiB:.1f} MiB "
                         f"| {r['written'] / changed:.2f}x | {r['save']:.3f} s "
                         f"| {r['save_cpu']:.3f} s | {r['restore']:.3f} s "
                         f"| {r['disk'] / MiB:.0f} MiB | {_ratio(r, full, 'save')} "
                         f"| {_ratio(r, full, 'save_cpu')} | {_ratio(r, full, 'restore')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--skip-gib-check", action="store_true")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of each scenario, the order of the systems rotated")
    parser.add_argument("--check-mib", type=int, default=1024,
                        help="size of the tensor of the one-byte-change check (1 GiB)")
    args = parser.parse_args(argv)
    systems = args.systems.split(",")
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ocf-bench-inc-", dir=args.dir) as tmp:
        for scenario in args.scenarios.split(","):
            results[scenario] = rounds_of(scenario, systems, args.rounds, args, Path(tmp))
        check = None if args.skip_gib_check else gib_check(args.check_mib, Path(tmp) / "gib")
    print(table(results, systems, args.scale))
    if check is not None:
        print(f"\none-byte changes in a {check['bytes'] / MiB:.0f} MiB tensor (band "
              f"{check['band'] / 1024:.0f} KiB): " + ", ".join(
                  f"byte {c['byte']}: {'saved' if c['saved'] else 'LOST'}, "
                  f"{c['written'] / MiB:.2f} MiB written" for c in check["changes"]))
    if args.json is not None:
        args.json.write_text(json.dumps({"results": results, "gib_check": check}, indent=1))
    return 0 if check is None or all(c["saved"] for c in check["changes"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
