"""Resharded loads of a multi-writer checkpoint: bytes read against bytes needed.

    .venv/bin/python python/benchmarks/bench_distributed.py [--quick] [--dir DIR]
                                                           [--json PATH]

A checkpoint is saved by 4 writers (ocf.distributed.parts: each writes its quarter of
the rows of every tensor, then one merge); it is then loaded by 2 and by 3
readers that split the same tensors differently: by rows (the usual
change of world size), by columns, and by rows of a checkpoint saved by
columns. Each reader asks only for its region (ocf.Reader.get_slice, as
ocf.distributed.torch.load does) and the reader counts the stored bytes it
read, whole chunks, since every chunk read is checksummed. The table gives,
per layout, the sum over readers of bytes read and bytes needed and their
ratio (target: at most 1.1). A Markdown report goes to stdout.

Layouts: uncompressed with 64 KiB chunks (what ocf.distributed.torch.save
writes unless told otherwise), uncompressed with the writer's default 1 MiB
chunks, zstd with 1 MiB chunks (bytes read are then compressed bytes, needed
bytes raw, so the ratio can fall below 1).

Tiled layouts (``tile_bytes``, ocf.distributed.parts.tiling): each writer stores its box
as a grid of tiles, each a slice; the default of ocf.distributed.torch.save
(16 KiB tiles, 64 KiB chunks), then the same in zstd. They are also saved by
an uneven partition ("rows, uneven", "columns, uneven": runs of unequal
lengths ending on odd offsets, aligned with no tile line).

Reading the ratios: a region read from a box stored in C order touches every
chunk that holds one of its elements. Loading rows of row-saved boxes (a
change of world size) or rows of column-saved boxes costs at most a chunk at
each end of each box; loading columns of row-saved boxes touches every row,
so every chunk, whatever the chunk size: the ratio is then the number of
readers, which only saving by columns avoids. In tiles, a region reads the
tiles it overlaps: at most one layer of tiles more per cut, whichever way the
tensor was saved and is loaded (the grid splits each dimension into about 32
tiles for these 16 MiB tensors: 3 readers read about 2/32 more).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import ocf
from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILE_BYTES

MiB = 1 << 20
WRITERS = 4
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Row:
    layout: str
    saved_by: str
    loaded_by: str
    readers: int
    bytes_needed: int
    bytes_read: int

    @property
    def ratio(self) -> float:
        return self.bytes_read / self.bytes_needed


def tensors(quick: bool) -> dict[str, np.ndarray]:
    """Three float32 matrices (48 MiB; 3 MiB with --quick), values that zstd cannot
    shrink much, like trained weights."""
    rows = 512 if quick else 4096
    rng = np.random.default_rng(0)
    return {f"layer{i}/w": rng.standard_normal((rows, 1024)).astype(np.float32)
            for i in range(3)}


def run_bounds(size: int, parts: int) -> list[tuple[int, int]]:
    """np.array_split's runs of ``size`` into ``parts``."""
    edges = np.cumsum([0] + [len(p) for p in np.array_split(np.arange(size), parts)])
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def uneven_bounds(size: int, parts: int) -> list[tuple[int, int]]:
    """Runs of ``size`` into ``parts`` of unequal lengths, ending off any power of two
    (a partition no tile grid is aligned with)."""
    weights = np.arange(1, parts + 1, dtype=np.float64) + 0.37
    edges = [0, *(int(size * w) | 1 for w in np.cumsum(weights)[:-1] / weights.sum()), size]
    return list(itertools.pairwise(edges))


def save(directory: Path, arrays: dict[str, np.ndarray], axis: int, uneven: bool = False,
         **options: object) -> None:
    """4 writers, each its run of ``axis`` of every tensor; then the merge."""
    save_id = new_save_id()
    split = uneven_bounds if uneven else run_bounds
    for part in range(WRITERS):
        with PartWriter(directory, part=part, parts=WRITERS, save_id=save_id,
                        **options) as writer:
            for key, array in arrays.items():
                a, b = split(array.shape[axis], WRITERS)[part]
                window = (slice(None),) * axis + (slice(a, b),)
                start = (0,) * axis + (a,) + (0,) * (array.ndim - axis - 1)
                writer.write_slice(key, np.ascontiguousarray(array[window]), start, array.shape)
    merge_parts(directory, save_id=save_id, parts=WRITERS)


def load(directory: Path, arrays: dict[str, np.ndarray], readers: int, axis: int
         ) -> tuple[int, int]:
    """Each reader its run of ``axis``, with a reader of its own; bytes needed and read."""
    needed = read = 0
    for rank in range(readers):
        with ocf.open(directory) as reader:
            for key, array in arrays.items():
                a, b = run_bounds(array.shape[axis], readers)[rank]
                region = (slice(None),) * axis + (slice(a, b),)
                got = reader.get_slice(key, region)
                if got.tobytes() != np.ascontiguousarray(array[region]).tobytes():
                    raise SystemExit(f"wrong values for {key} at {region}")
                needed += got.nbytes
            read += reader.bytes_read
    return needed, read


def measure(root: Path, quick: bool) -> list[Row]:
    arrays = tensors(quick)
    tiled = {"chunk_size": RESHARD_CHUNK_SIZE, "tile_bytes": RESHARD_TILE_BYTES}
    layouts: dict[str, dict[str, object]] = {
        "none, 64 KiB chunks": {"chunk_size": 64 << 10}, "none, 1 MiB chunks": {},
        "zstd, 1 MiB chunks": {"compression": "zstd"},
        f"tiled default: none, {RESHARD_TILE_BYTES >> 10} KiB tiles, 64 KiB chunks": tiled,
        f"tiled: zstd, {RESHARD_TILE_BYTES >> 10} KiB tiles, 64 KiB chunks":
            tiled | {"compression": "zstd"},
    }
    rows = []
    for number, (layout, options) in enumerate(layouts.items()):
        saves = [(0, "rows", False), (1, "columns", False)]
        if "tile_bytes" in options:
            saves += [(0, "rows, uneven", True), (1, "columns, uneven", True)]
        for saved_axis, saved_by, uneven in saves:
            directory = root / f"layout{number}-{saved_axis}{'-uneven' if uneven else ''}"
            save(directory, arrays, saved_axis, uneven, **options)
            for load_axis, loaded_by in ((0, "rows"), (1, "columns")):
                for readers in (2, 3):
                    needed, read = load(directory, arrays, readers, load_axis)
                    rows.append(Row(layout, saved_by, loaded_by, readers, needed, read))
                    print(f"{layout}, saved by {saved_by}, {readers} readers by {loaded_by}: "
                          f"{read / needed:.3f}", file=sys.stderr)
            shutil.rmtree(directory)
    return rows


def report(rows: list[Row], quick: bool) -> str:
    total = sum(a.nbytes for a in tensors(quick).values())
    lines = [
        "# Resharded load: bytes read against bytes needed",
        "",
        f"{total / MiB:.0f} MiB in 3 float32 tensors, saved by {WRITERS} writers "
        f"(ocf.distributed.parts) and loaded by 2 and 3 readers; "
        f"Python {platform.python_version()}, "
        f"NumPy {np.__version__}, {platform.machine()}.",
        "",
        "| layout | saved by | loaded by | readers | needed MiB | read MiB | read / needed |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r.layout} | {r.saved_by} | {r.loaded_by} | {r.readers} | "
                     f"{r.bytes_needed / MiB:.2f} | {r.bytes_read / MiB:.2f} | "
                     f"{r.ratio:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 MiB instead of 48 MiB")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "bench-out",
                        help="where to write (a fresh subdirectory, removed at the end)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="distributed-", dir=args.dir))
    try:
        rows = measure(root, args.quick)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(report(rows, args.quick))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ratio": r.ratio} for r in rows],
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
