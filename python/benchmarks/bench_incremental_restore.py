"""Restores of incremental checkpoints against full ones, paired (issue 25, restores).

    .venv/bin/python python/benchmarks/bench_incremental_restore.py [--scale F]
        [--repeats N] [--saves N] [--keep K] [--scenarios frozen,embedding,everything]
        [--dir DIR]

For each scenario of bench_incremental.py, OCF incremental and OCF full each save
``--saves`` (10) checkpoints of the evolving state through ocf.CheckpointManager
with ``max_to_keep=--keep`` (3), into two directories that both stay; then the
latest checkpoint of each is restored ``--repeats`` times, the two alternating
(which goes first alternates too), every tensor into new arrays with every chunk
CRC checked. On a shared machine a single restore moves by 2x with the load and
the page cache; pairs taken back to back see the same conditions, so the ratio
of each pair, and the median of those ratios, say more than two medians taken
minutes apart. The first restore is compared with the saved state.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_incremental import SCENARIOS, SYSTEMS, Tensors


def build(name: str, scenario: str, scale: float, saves: int, keep: int, where: Path
          ) -> tuple[Any, Tensors]:
    """The system ``name`` after its saves of ``scenario`` in ``where``, and the state
    its latest checkpoint holds."""
    system = SYSTEMS[name]()
    system.start(where, keep)
    state: Tensors = {}
    for number, state in enumerate(SCENARIOS[scenario](scale, saves), start=1):
        system.save_state(state, where, number, keep)
    return system, {key: value.copy() for key, value in state.items()}


def timed_restore(system: Any, where: Path, expected: Tensors, check: bool) -> float:
    gc.collect()
    start = time.perf_counter()
    restored = system.restore_latest(where, expected)
    elapsed = time.perf_counter() - start
    if check:
        for key, value in expected.items():
            if not np.array_equal(restored[key], value):
                raise AssertionError(f"{where}: {key} restored differs")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = ["| scenario | incremental restore (median) | full restore (median) | "
            "median of the pairs' ratios | pairs' ratios, min - max |", "|---|--:|--:|--:|--:|"]
    with tempfile.TemporaryDirectory(prefix="ocf-bench-restore-", dir=args.dir) as tmp:
        for scenario in args.scenarios.split(","):
            built = {name: build(name, scenario, args.scale, args.saves, args.keep,
                                 Path(tmp) / scenario / name) for name in ("ocf-inc", "ocf-full")}
            times: dict[str, list[float]] = {"ocf-inc": [], "ocf-full": []}
            for repeat in range(args.repeats):
                order = ["ocf-inc", "ocf-full"] if repeat % 2 == 0 else ["ocf-full", "ocf-inc"]
                for name in order:
                    system, expected = built[name]
                    times[name].append(timed_restore(system, Path(tmp) / scenario / name,
                                                     expected, check=repeat == 0))
            for system, _ in built.values():
                system.finish()
            ratios = [a / b for a, b in zip(times["ocf-inc"], times["ocf-full"])]
            print(f"{scenario}: {times}", file=sys.stderr, flush=True)
            rows.append(f"| {scenario} | {statistics.median(times['ocf-inc']):.3f} s | "
                        f"{statistics.median(times['ocf-full']):.3f} s | "
                        f"{statistics.median(ratios):.2f}x | "
                        f"{min(ratios):.2f}x - {max(ratios):.2f}x |")
            del built
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
