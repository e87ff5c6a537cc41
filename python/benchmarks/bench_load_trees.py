"""Resharded loads of OCF from two or more source trees beside DCP's load, in one run.

    .venv/bin/python python/benchmarks/bench_load_trees.py --keep DIR \
        --trees main=/work/main/python/src,branch=python/src [--rounds 3] [--repeat 5]

A before/after comparison on a shared machine: ``bench_scaling.py``'s resharded
loads (the 4-writer checkpoints it saves, kept in ``--keep`` and reused, loaded
by 2 and 3 processes split by rows or columns), with ``ocf-load`` run once per
source tree (its processes import ``ocf`` from that tree, through PYTHONPATH)
and ``dcp-load`` beside them. Every job runs ``--rounds`` times, the order of
the systems rotated by one each round, so that none always runs first after a
quiet spell. Reported per loader count and split: the best and the median over
every repeat of every round, of the slowest loader's time and of the busiest
loader's CPU seconds, each with its ratio to DCP's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import bench_scaling


def _measure(name: str, source: str, paths: dict[str, str], world: int, axis: int,
             args: argparse.Namespace, base: Path) -> tuple[list[float], list[float]]:
    """The slowest loader's times and the busiest loader's CPU seconds of one job."""
    system, _, tree = name.partition("@")
    if tree:
        os.environ["PYTHONPATH"] = paths[tree]
    job = {"engine": "torch", "system": system, "mib": args.mib, "repeat": args.repeat,
           "source": source, "axis": axis}
    ranks = bench_scaling.measure(job, world, base)
    n = args.repeat
    return ([max(r[i] for r in ranks) for i in range(n)],
            [max(r[n + i] for r in ranks) for i in range(n)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", required=True, help="where the 4-writer checkpoints stay")
    parser.add_argument("--trees", required=True,
                        help="NAME=PATH of each source tree (its python/src), comma-separated")
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    paths = dict(pair.split("=", 1) for pair in args.trees.split(","))
    paths = {name: os.path.abspath(path) for name, path in paths.items()}
    base = Path(tempfile.mkdtemp(prefix="ocf-load-trees-"))
    os.environ["PYTHONPATH"] = next(iter(paths.values()))  # for the saves and DCP
    sources: dict[str, str] = {}
    bench_scaling._save_sources(args.mib, Path(args.keep), base, sources)
    systems = ["dcp-load", *(f"ocf-load@{name}" for name in paths)]
    rows = []
    try:
        for world, axis in ((2, 0), (2, 1), (3, 0), (3, 1)):
            walls: dict[str, list[float]] = {name: [] for name in systems}
            cpus: dict[str, list[float]] = {name: [] for name in systems}
            for r in range(args.rounds):
                turn = r % len(systems)
                for name in systems[turn:] + systems[:turn]:
                    print(f"x{world} axis {axis} {name} (round {r + 1})", file=sys.stderr,
                          flush=True)
                    source = sources["dcp" if name == "dcp-load" else "ocf"]
                    wall, cpu = _measure(name, source, paths, world, axis, args, base)
                    walls[name] += wall
                    cpus[name] += cpu
            rows += [(world, "rows" if axis == 0 else "columns", name, walls[name],
                      cpus[name], walls["dcp-load"], cpus["dcp-load"]) for name in systems]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.mib} MiB, {args.rounds} rounds of {args.repeat} loads after a warm-up, the "
          f"order rotated; {os.cpu_count()} cores.\n")
    print("| loaders | split | system | best (s) | best / dcp | median (s) | median / dcp "
          "| best CPU (s) | / dcp | median CPU (s) | / dcp |")
    print("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for world, split, name, wall, cpu, dcp_wall, dcp_cpu in rows:
        figures = [(min(wall), min(dcp_wall)), (statistics.median(wall),
                                                statistics.median(dcp_wall)),
                   (min(cpu), min(dcp_cpu)), (statistics.median(cpu), statistics.median(dcp_cpu))]
        cells = " | ".join(f"{mine:.4f} | {mine / theirs:.2f}x" for mine, theirs in figures)
        print(f"| {world} | {split} | {name} | {cells} |")


if __name__ == "__main__":
    main()
