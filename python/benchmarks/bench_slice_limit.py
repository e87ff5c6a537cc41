"""What the tiling check costs a reader at the slice limits of format 1.2 [R-SLICE-004].

    .venv/bin/python python/benchmarks/bench_slice_limit.py [--impl impl/cpp/build/ocf-cpp-adapter]

Format 1.2 allows 65,536 slices to a tensor of rank 4 or less (4,096 before) on the
ground that its tiling check is O(r k log k) there. For k = 4,096, 16,384 and
65,536 slices of three tilings (one-element boxes of a vector; a grid of one-element
boxes of a matrix; rows over columns, whose boxes overlap pairwise along each
dimension, the costly input for a sweep) this times the Python check itself
(ocf.format.slicing.arrays_tile, in process), the open of a single-file checkpoint
of the vector and the grid (every check of the index, T13 included, in a fresh
process) and, with ``--impl``, a conformance adapter's full read of it (checks,
reading, SHA-256 of the tensor). Rows over columns are not written: their tensor
grows as k squared (2 GiB at 65,536). The cost per slice should stay flat as k grows
16-fold.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ocf
from ocf.format.slicing import arrays_tile

Box = tuple[tuple[int, ...], tuple[int, ...]]


def boxes(kind: str, k: int) -> tuple[tuple[int, ...], list[Box]]:
    """The shape and the k boxes of one tiling."""
    if kind == "vector":
        return (k,), [((i,), (1,)) for i in range(k)]
    if kind == "rows-over-columns":
        h = k // 2
        return (2 * h, h), ([((i, 0), (1, h)) for i in range(h)]
                            + [((h, j), (h, 1)) for j in range(h)])
    side = round(k ** 0.5)
    return (side, side), [((i, j), (1, 1)) for i in range(side) for j in range(side)]


def write(path: Path, kind: str, k: int) -> Path:
    """A single-file checkpoint of one uint8 tensor stored in the k boxes of ``kind``."""
    shape, tiling = boxes(kind, k)
    full = (np.arange(int(np.prod(shape))) % 251).astype(np.uint8).reshape(shape)
    with ocf.Writer(path) as writer:
        writer.write_slices("t", full, (0,) * len(shape), shape, tiling)
    return path


def python_open(path: Path) -> float:
    """CPU seconds of ocf.Reader(path) in a fresh interpreter."""
    code = ("import time, ocf, sys; c = time.process_time(); r = ocf.Reader(sys.argv[1]); "
            "print(time.process_time() - c)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


def adapter_read(command: str, path: Path) -> float:
    """Wall seconds of a conformance adapter's full read of ``path`` (hello excluded)."""
    process = subprocess.Popen(command.split(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(json.dumps({"id": 0, "op": "hello", "protocol": 1}) + "\n")
    process.stdin.flush()
    process.stdout.readline()
    began = time.perf_counter()
    process.stdin.write(json.dumps({"id": 1, "op": "read", "case": "bench", "path": str(path)})
                        + "\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    seconds = time.perf_counter() - began
    process.stdin.write(json.dumps({"id": -1, "op": "bye"}) + "\n")
    process.stdin.close()
    process.wait()
    assert answer.get("result") == "ok", answer
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impl", default=None, help="a conformance adapter to time as well")
    parser.add_argument("--slices", default="4096,16384,65536")
    args = parser.parse_args()
    print(f"ocf {ocf.__version__}")
    print("| tiling | slices | arrays_tile CPU s | us per slice | Python open CPU s | "
          "us per slice | adapter read s | us per slice |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind in ("vector", "grid", "rows-over-columns"):
        for k in (int(x) for x in args.slices.split(",")):
            shape, tiling = boxes(kind, k)
            lo = np.array([b for b, _ in tiling], np.int64)
            extent = np.array([e for _, e in tiling], np.int64)
            cpu = time.process_time()
            assert arrays_tile(lo, extent, shape)
            check = time.process_time() - cpu
            row = f"| {kind} | {k:,} | {check:.4f} | {1e6 * check / k:.2f} | "
            if kind == "rows-over-columns":
                print(row + "- | - | - | - |", flush=True)
                continue
            with tempfile.TemporaryDirectory() as tmp:
                path = write(Path(tmp) / "t.ocf", kind, k)
                opened = python_open(path)
                read = adapter_read(args.impl, path) if args.impl else None
            cpp = "- | -" if read is None else f"{read:.3f} | {1e6 * read / k:.1f}"
            print(row + f"{opened:.3f} | {1e6 * opened / k:.1f} | {cpp} |", flush=True)


if __name__ == "__main__":
    main()
