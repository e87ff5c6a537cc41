"""CPU time of one rank's resharded load, in one process: the read path alone.

    .venv/bin/python python/benchmarks/bench_region_reads.py [--mib 128] [--repeat 20]

Saves ``--mib`` MiB of float32 in 8 tensors of 1024 rows by 4 writers (the
default layout of ``ocf.distributed`` saves: strips), then times, for a loader
of 2 and of 3 splitting rows or columns, rank 0's ``Reader.read_slice_into`` of
its region of every tensor into arrays it holds (a new Reader each repeat, the
files in the page cache), with the chunks checked and, for comparison, without
(``verify=False``). The median CPU seconds of ``--repeat`` repeats after a
warm-up: the figure ``bench_scaling.py``'s loads spend besides the process
group, less disturbed by other jobs on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.distributed.torch import region_of
from ocf.format.reader import Reader

TENSORS, ROWS, WRITERS = 8, 1024, 4


def _save(path: Path, mib: int) -> tuple[int, int]:
    columns = mib * (1 << 20) // (4 * TENSORS * ROWS)
    save_id = new_save_id()
    for part in range(WRITERS):
        rows = slice(part * ROWS // WRITERS, (part + 1) * ROWS // WRITERS)
        rng = np.random.default_rng(part)
        with PartWriter(path, part=part, parts=WRITERS, save_id=save_id,
                        chunk_size=64 << 10, tile_bytes="strips") as writer:
            for i in range(TENSORS):
                box = rng.standard_normal((rows.stop - rows.start, columns), np.float32)
                writer.write_slice(f"layer{i}/w", box, (rows.start, 0), (ROWS, columns))
    merge_parts(path, save_id=save_id, parts=WRITERS)
    return ROWS, columns


def _cpu(path: Path, shape: tuple[int, int], loaders: int, axis: int, verify: bool,
         repeat: int) -> float:
    region = region_of(shape, 0, loaders, axis)
    extent = tuple(len(range(*r.indices(n))) for r, n in zip(region, shape))
    targets = {f"layer{i}/w": np.ones(extent, np.float32) for i in range(TENSORS)}
    seconds = []
    for n in range(repeat + 1):
        start = time.process_time()
        with Reader(path, verify=verify) as reader:
            for key, out in targets.items():
                reader.read_slice_into(key, region, out)
        if n:  # the first is a warm-up
            seconds.append(time.process_time() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ocf-region-reads-") as directory:
        path = Path(directory) / "ckpt"
        shape = _save(path, args.mib)
        print(f"{args.mib} MiB in {TENSORS} float32 tensors of {list(shape)}, saved by "
              f"{WRITERS} writers (strips); rank 0's CPU seconds, median of {args.repeat}.\n")
        print("| loaders | split | checked (s) | unchecked (s) | checked / unchecked |")
        print("|--:|---|--:|--:|--:|")
        for loaders, axis in ((2, 0), (3, 0), (2, 1), (3, 1)):
            checked = _cpu(path, shape, loaders, axis, True, args.repeat)
            unchecked = _cpu(path, shape, loaders, axis, False, args.repeat)
            print(f"| {loaders} | {'rows' if axis == 0 else 'columns'} | {checked:.4f} | "
                  f"{unchecked:.4f} | {checked / unchecked:.2f}x |")


if __name__ == "__main__":
    main()
