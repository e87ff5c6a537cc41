"""Saves of OCF incremental against OCF full, paired (issue 25, everything-changes saves).

    .venv/bin/python python/benchmarks/bench_incremental_save_pairs.py [--scale F]
        [--pairs N] [--keep K] [--scenario everything|frozen|embedding] [--dir DIR]

The state of a scenario of bench_incremental.py evolves ``--pairs`` (12) times;
after each step OCF incremental and OCF full (ocf.CheckpointManager,
``max_to_keep=--keep``, two directories) each save it, back to back, which one
goes first alternating. On this machine the same save moves by 2-10x with the
load, in system time (page reclaim): two saves taken back to back see the same
conditions, so the median of the pairs' ratios says more than two medians taken
minutes apart. Reported per system: the median wall time, user CPU time and
system CPU time of a save (all threads, getrusage), and the median of the pairs'
ratios of each; the first pair (no base yet) is left out. Every checkpoint of
the last pair is read back and compared with the state.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_incremental import SCENARIOS, SYSTEMS, Tensors

NAMES = ("ocf-inc", "ocf-full")
FIGURES = ("wall", "user", "system")


def timed_save(system: Any, state: Tensors, where: Path, number: int, keep: int
               ) -> dict[str, float]:
    """Wall, user and system seconds of one save of ``state``."""
    gc.collect()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    system.save_state(state, where, number, keep)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": wall, "user": after.ru_utime - before.ru_utime,
            "system": after.ru_stime - before.ru_stime}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--scenario", default="everything", choices=sorted(SCENARIOS))
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    times: dict[str, list[dict[str, float]]] = {name: [] for name in NAMES}
    with tempfile.TemporaryDirectory(prefix="ocf-bench-pairs-", dir=args.dir) as tmp:
        systems = {name: SYSTEMS[name]() for name in NAMES}
        for name, system in systems.items():
            system.start(Path(tmp) / name, args.keep)
        state: Tensors = {}
        for number, state in enumerate(SCENARIOS[args.scenario](args.scale, args.pairs + 1),
                                       start=1):
            order = NAMES if number % 2 else NAMES[::-1]
            for name in order:
                times[name].append(timed_save(systems[name], state, Path(tmp) / name, number,
                                              args.keep))
            print(f"pair {number}: " + ", ".join(
                f"{name} {times[name][-1]['wall']:.3f} s" for name in NAMES), file=sys.stderr,
                flush=True)
        for name, system in systems.items():
            restored = system.restore_latest(Path(tmp) / name, state)
            for key, value in state.items():
                if not np.array_equal(restored[key], value):
                    raise AssertionError(f"{name}: {key} restored differs")
            system.finish()
    pairs = list(zip(times["ocf-inc"][1:], times["ocf-full"][1:]))
    rows = [f"{args.scenario}, {len(pairs)} pairs (after the first):", "",
            "| figure | OCF incremental (median) | OCF full (median) | median of the pairs' "
            "ratios | pairs' ratios, min - max |", "|---|--:|--:|--:|--:|"]
    for figure in FIGURES:
        ratios = [inc[figure] / full[figure] for inc, full in pairs if full[figure] > 0]
        rows.append(f"| {figure} | {statistics.median(i[figure] for i, _ in pairs):.3f} s | "
                    f"{statistics.median(f[figure] for _, f in pairs):.3f} s | "
                    f"{statistics.median(ratios):.2f}x | {min(ratios):.2f}x - "
                    f"{max(ratios):.2f}x |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
