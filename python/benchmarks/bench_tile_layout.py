"""The tile layout of multi-writer saves: slices per tensor, against resharded-load read
amplification, against save time.

    .venv/bin/python python/benchmarks/bench_tile_layout.py [--mib 128] [--repeat 3]

The state of bench_scaling.py (``--mib`` MiB of float32 in 8 tensors of 1024
rows) is saved as 4 parts, split by rows, in one process (parts written one
after the other, then merged), under each layout below; then every rank of 2
and of 3 loaders reads its band of every tensor, by rows and by columns (the
regions ``ocf.distributed.torch.region_of`` and DTensor's ``Shard`` give: near
equal runs), with ``ocf.Reader.get_slice``, which reads whole stored chunks
(each is checksummed).

- ``strips (default)``: ``ocf.distributed.torch.save``'s layout (``tile_bytes="strips"``,
  ``ocf.distributed.parts.strips``): each box cut into strips its full height, each
  tensor in chunks of its own size (about 4,096 chunks a tensor, 4 to 64 KiB);
- ``grid <n> KiB``: the layout before strips, tiles of about n KiB
  (``tile_bytes``) in a grid of the tensor's shape, 64 KiB chunks;
- ``untiled``: each writer's box one slice (``tile_bytes=None``), 64 KiB chunks;
- ``strips <w> / <c> KiB``: each box cut into column strips ``w`` columns wide, the
  full height of the box, in chunks of ``c`` KiB: a column band reads the strips it
  meets, a row band the chunks of each strip it meets (a strip is stored in C
  order, so its rows are runs of chunks);
- ``grid 16 KiB / <c> KiB chunks``: the default grid in smaller chunks;
- ``tiles <h> x <w> / <c> KiB``: tiles ``h`` rows by ``w`` columns, in chunks of
  ``c`` KiB (runs of a tile's rows).

Reported per layout: slices per tensor, index bytes, the median save time and CPU
seconds (parts and merge; one process, so the per-slice costs of every writer
add up; the CPU time is what a busy machine distorts least), the CPU seconds
of the loads (all ranks of the four ways below, one after the other), and the
worst rank's stored bytes read / bytes needed for each way of loading. Times on a
shared machine are noisy: compare layouts within one run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import ocf
from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.distributed.torch import region_of

TENSORS = 8
ROWS = 1024
WRITERS = 4

Writes = Callable[[PartWriter, str, np.ndarray, tuple[int, int], tuple[int, int]], None]


def _grid(writer: PartWriter, key: str, box: np.ndarray, start: tuple[int, int],
          shape: tuple[int, int]) -> None:
    writer.write_slice(key, box, start, shape)


def _strips(width: int, height: int | None = None) -> Writes:
    """Tiles ``height`` rows (the box's height when None) by ``width`` columns."""
    def write(writer: PartWriter, key: str, box: np.ndarray, start: tuple[int, int],
              shape: tuple[int, int]) -> None:
        writer.write_tiles(key, box, start, shape, (height or box.shape[0], width))
    return write


LAYOUTS: dict[str, tuple[Writes, dict[str, object]]] = {
    "strips (default)": (_grid, {"tile_bytes": "strips", "chunk_size": 64 << 10}),
    "untiled": (_grid, {"tile_bytes": None, "chunk_size": 64 << 10}),
    "grid 16 KiB (before strips)": (_grid, {"tile_bytes": 16 << 10, "chunk_size": 64 << 10}),
    "grid 64 KiB": (_grid, {"tile_bytes": 64 << 10, "chunk_size": 64 << 10}),
    "grid 256 KiB": (_grid, {"tile_bytes": 256 << 10, "chunk_size": 64 << 10}),
    "strips 64 / 4 KiB": (_strips(64), {"tile_bytes": None, "chunk_size": 4 << 10}),
    "strips 128 / 4 KiB": (_strips(128), {"tile_bytes": None, "chunk_size": 4 << 10}),
    "strips 64 / 16 KiB": (_strips(64), {"tile_bytes": None, "chunk_size": 16 << 10}),
    # The default grid's tiles (32 rows x 128 columns at 128 MiB), chunked finer: a
    # chunk is a run of a tile's rows, so rows split on chunk lines, columns on tiles.
    "grid 16 KiB / 4 KiB chunks": (_grid, {"tile_bytes": 16 << 10, "chunk_size": 4 << 10}),
    # Tiles as many along the columns as chunks along the rows: 64 x 64 (16 KiB), in
    # chunks of 16 rows (4 KiB) or whole (16 KiB).
    "tiles 64 x 64 / 4 KiB": (_strips(64, 64), {"tile_bytes": None, "chunk_size": 4 << 10}),
    "tiles 64 x 64 / 16 KiB": (_strips(64, 64), {"tile_bytes": None, "chunk_size": 16 << 10}),
}


def _state(mib: int) -> dict[str, np.ndarray]:
    cols = mib * (1 << 20) // (4 * TENSORS * ROWS)
    rng = np.random.default_rng(0)
    return {f"layer{i}/w": rng.standard_normal((ROWS, cols), np.float32)
            for i in range(TENSORS)}


def _save(directory: Path, state: dict[str, np.ndarray], write: Writes,
          options: dict[str, object]) -> tuple[float, float]:
    """The save's time and CPU seconds (every thread, user and system)."""
    shutil.rmtree(directory, ignore_errors=True)
    save_id = new_save_id()
    start, start_cpu = time.perf_counter(), time.process_time()
    for part in range(WRITERS):
        rows = region_of((ROWS, 1), part, WRITERS)[0]
        with PartWriter(directory, part=part, parts=WRITERS, save_id=save_id,
                        **options) as writer:  # type: ignore[arg-type]
            for key, full in state.items():
                write(writer, key, full[rows], (rows.start, 0), full.shape)
    merge_parts(directory, save_id=save_id, parts=WRITERS)
    return time.perf_counter() - start, time.process_time() - start_cpu


def _amplification(directory: Path, state: dict[str, np.ndarray], loaders: int,
                   axis: int) -> float:
    worst = 0.0
    for rank in range(loaders):
        with ocf.Reader(directory) as reader:
            needed = 0
            for key, full in state.items():
                region = region_of(full.shape, rank, loaders, axis)
                got = reader.get_slice(key, region)
                assert np.array_equal(got, full[region])
                needed += got.nbytes
            worst = max(worst, reader.bytes_read / needed)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default="",
                        help="only the layouts whose names start with one of these, "
                             "comma-separated (default: all)")
    args = parser.parse_args()
    wanted = [w.strip() for w in args.layouts.split(",") if w.strip()]
    state = _state(args.mib)
    base = Path(tempfile.mkdtemp(prefix="ocf-tiles-"))
    rows = []
    try:
        for name, (write, options) in LAYOUTS.items():
            if wanted and not any(name.startswith(w) for w in wanted):
                continue
            directory = base / "ckpt"
            times = [_save(directory, state, write, options) for _ in range(args.repeat + 1)]
            with ocf.Reader(directory) as reader:
                info = reader["layer0/w"]
                slices = len(info.slices)
            index_bytes = (directory / "index.ocf").stat().st_size
            start_cpu = time.process_time()
            reads = [_amplification(directory, state, n, axis)
                     for n in (2, 3) for axis in (0, 1)]
            load_cpu = time.process_time() - start_cpu
            rows.append((name, slices, index_bytes, statistics.median(t for t, _ in times[1:]),
                         statistics.median(c for _, c in times[1:]), load_cpu, reads))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.mib} MiB of float32 in {TENSORS} tensors of {ROWS} rows, saved as "
          f"{WRITERS} parts split by rows (one process); median of {args.repeat} saves "
          "after a warm-up.\n")
    print("| layout | slices per tensor | index bytes | save (s) | save CPU (s) | load CPU (s) "
          "| read / needed: 2 by rows | 2 by columns | 3 by rows | 3 by columns |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, slices, index_bytes, seconds, cpu, load_cpu, reads in rows:
        print(f"| {name} | {slices} | {index_bytes} | {seconds:.3f} | {cpu:.3f} | {load_cpu:.3f} | "
              + " | ".join(f"{r:.3f}" for r in reads) + " |")


if __name__ == "__main__":
    main()
