"""Hostile inputs against the memory goal: every operation peaks within input size + 64 MiB.

    .venv/bin/python python/benchmarks/bench_hostile.py [--only chain,npz,slices] [--quick]

Each measurement runs in a fresh child process, so that one cannot inherit
another's heap. Peak RSS is measured above a baseline taken just before the
operation, after imports and setup (the kernel's high-water mark is reset
through /proc/self/clear_refs, Linux only); time is wall-clock.

- ``chain``: a valid single file (a NumPy model and its optimizer state,
  written by ``ocf.Checkpoint``) whose object graph gets a chain of n nodes
  appended under the root (edges named ``a``): 10,000 nodes on a file of
  about 100 KB, 100,000 on one of about 1 MB. Measured, each above the RSS
  before it: ``ocf.Checkpoint(model=..., optimizer=...).restore(path)``; then
  ``status.unmatched_checkpoint_paths()`` with its length and first 20 paths;
  then (10,000 only) a walk over every path it lists. The chain's canonical
  paths hold about n² characters in all (100,010,000 for n = 10,000): a walk
  over all of them takes time quadratic in n however they are listed, and a
  list holding them all, 10^10 characters for n = 100,000, does not fit.
- ``npz``: 50,000 small members in an ``.npz`` (``np.savez``), then
  ``ocf convert`` to OCF and ``ocf verify``, each a command.
- ``slices``: a (4096, 2048) uint8 tensor stored as 2,048 whole rows over
  2,048 whole columns (the worst input for a sweep over pairs of boxes),
  valid and with one pair overlapping: ``ocf.open`` and ``verify_all``.

Not a test: it prints figures (Markdown) and asserts nothing. ``--quick``
divides the sizes by ten.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD_FLAG = "--child"


# -- in the child ---------------------------------------------------------------------


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measured(operation: Any) -> dict[str, float]:
    """Run ``operation`` once: its wall time and peak RSS above the RSS just before."""
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _rss_kib("VmRSS")
    start = time.perf_counter()
    result = operation()
    seconds = time.perf_counter() - start
    peak = _rss_kib("VmHWM")
    return {"seconds": seconds, "peak_mib": (peak - before) / 1024, "result": result}


def _model_and_optimizer(weights: int) -> tuple[dict[str, Any], dict[str, Any]]:
    import numpy as np

    rng = np.random.default_rng(0)
    model = {"dense": {"kernel": rng.standard_normal(weights).astype(np.float32),
                       "bias": np.zeros(16, np.float32)}}
    optimizer = {"step": np.array(3), "m": {"kernel": np.zeros(weights, np.float32)}}
    return model, optimizer


def _rewrite_index(path: Path, edit: Any) -> None:
    """Rewrite the single file ``path`` with its index changed by ``edit(index)``."""
    from ocf.format.checksum import crc32c
    from ocf.format.container import FOOTER_SIZE, padding
    from ocf.v1 import index_pb2

    blob = path.read_bytes()
    offset, length, _, major, minor, magic = struct.unpack("<QQIHH8s", blob[-FOOTER_SIZE:])
    index = index_pb2.Index.FromString(blob[offset:offset + length])
    edit(index)
    data = index.SerializeToString(deterministic=True)
    region = blob[:offset]
    region += bytes(padding(len(region)))
    footer = struct.pack("<QQIHH8s", len(region), len(data), crc32c(data), major, minor, magic)
    path.write_bytes(region + data + footer)


def _append_chain(path: Path, n: int) -> None:
    """Rewrite the single file ``path`` with a chain of ``n`` nodes under its root."""

    def append(index: Any) -> None:
        first = len(index.object_graph.nodes)
        index.object_graph.nodes[0].children.add(name="chain", node_id=first)
        for i in range(n):
            node = index.object_graph.nodes.add()
            if i + 1 < n:
                node.children.add(name="a", node_id=first + i + 1)

    _rewrite_index(path, append)


def child_chain(directory: str, n: int, weights: int, walk_all: int) -> dict[str, Any]:
    import ocf

    path = Path(directory) / f"chain-{n}.ocf"
    model, optimizer = _model_and_optimizer(weights)
    ocf.Checkpoint(model=model, optimizer=optimizer).write(path)
    _append_chain(path, n)
    size = path.stat().st_size

    def restore() -> object:
        return ocf.Checkpoint(model=model, optimizer=optimizer).restore(path)

    def listing() -> list[int]:
        paths = status.unmatched_checkpoint_paths()
        return [len(paths), sum(len(p) for p in paths[:20])]

    def walk() -> int:
        return max(len(p) for p in status.unmatched_checkpoint_paths())

    status_figures = _measured(restore)
    status: Any = status_figures.pop("result")
    out = {"file_bytes": size, "restore": status_figures}
    if walk_all == 2:  # the restore only
        return out
    out["listing"] = _measured(listing)
    if walk_all:
        out["walk"] = _measured(walk)
    return out


def child_npz(directory: str, members: int) -> dict[str, Any]:
    import numpy as np

    npz = Path(directory) / "many.npz"
    target = Path(directory) / "many.ocf"
    np.savez(npz, **{f"t{i}": np.full(4, i, np.float32) for i in range(members)})
    command = [sys.executable, "-m", "ocf"]
    out: dict[str, Any] = {"npz_bytes": npz.stat().st_size}
    for name, args in (("convert", ["convert", str(npz), str(target)]),
                       ("verify", ["verify", str(target)])):
        start = time.perf_counter()
        done = subprocess.run([*command, *args], capture_output=True, text=True, check=False)
        out[name] = {"seconds": time.perf_counter() - start, "status": done.returncode,
                     "stderr": done.stderr[-300:]}
    out["ocf_bytes"] = target.stat().st_size if target.exists() else None
    return out


def child_slices(directory: str, h: int) -> dict[str, Any]:
    import numpy as np

    import ocf
    from ocf.format.writer import Writer

    out: dict[str, Any] = {}
    data = (np.arange(2 * h * h, dtype=np.uint64) % 251).astype(np.uint8).reshape(2 * h, h)
    boxes = [((i, 0), (1, h)) for i in range(h)] + [((h, j), (h, 1)) for j in range(h)]
    valid = Path(directory) / "valid.ocf"
    with Writer(valid) as writer:
        for start, extent in boxes:
            box = tuple(slice(s, s + e) for s, e in zip(start, extent))
            writer.write_slice("m", data[box], start, (2 * h, h))
    overlap = Path(directory) / "overlap.ocf"
    overlap.write_bytes(valid.read_bytes())

    def move_row_0_onto_row_1(index: Any) -> None:
        index.blocks.slice_starts[0] = 1  # the counts still add up; row 0 is left out

    _rewrite_index(overlap, move_row_0_onto_row_1)
    ocf.open(valid).close()  # imports, page cache
    for variant, path in (("valid", valid), ("overlap", overlap)):

        def open_it(path: Path = path) -> str:
            try:
                ocf.open(path).close()
            except ocf.OCFError as error:
                return error.label
            return "ok"

        entry = {"open": _measured(open_it)}
        if variant == "valid":
            reader = ocf.open(path)
            entry["verify_all"] = _measured(reader.verify_all)
            reader.close()
        out[variant] = entry
    return out


# -- in the parent --------------------------------------------------------------------


def in_child(kind: str, *args: object) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run([sys.executable, __file__, CHILD_FLAG, kind, directory,
                               *map(str, args)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr[-800:]}
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="chain,npz,slices")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--restore-only-above", type=int, default=None, metavar="N",
                        help="for chains longer than N, measure the restore only (for a "
                        "version whose listing builds every path at once: 10^10 characters "
                        "for 100,000 nodes)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    only = set(args.only.split(","))
    if "chain" in only:
        print("| chain nodes | file | restore | + unmatched_checkpoint_paths(), len, first 20 "
              "| + every path, one at a time |")
        print("|---|---|---|---|---|")
        for n, weights, walk_all in ((10_000 // scale, 12_000 // scale, 1),
                                     (100_000 // scale, 120_000 // scale, 0)):
            list_it = args.restore_only_above is None or n <= args.restore_only_above
            r = in_child("chain", n, weights, walk_all if list_it else 2)
            if "error" in r:
                print(f"| {n:,} | failed: {r['error']!r} |")
                continue
            cells = [f"{r['file_bytes'] / 1e3:,.0f} KB"]
            for part in ("restore", "listing", "walk"):
                if part in r:
                    cells.append(f"{r[part]['seconds']:.2f} s, {r[part]['peak_mib']:+.1f} MiB")
                elif part == "walk":
                    cells.append("not run (n(n+1) characters: quadratic time whatever the "
                                 "listing)")
                else:
                    cells.append("not run (--restore-only-above)")
            print(f"| {n:,} | " + " | ".join(cells) + " |", flush=True)
    if "npz" in only:
        r = in_child("npz", 50_000 // scale)
        if "error" in r:
            print(f"npz: failed: {r['error']!r}")
        else:
            print(f"\nnpz of {50_000 // scale:,} members ({r['npz_bytes'] / 1e6:.1f} MB): "
                  f"ocf convert {r['convert']['seconds']:.1f} s (status "
                  f"{r['convert']['status']}), ocf verify {r['verify']['seconds']:.1f} s "
                  f"(status {r['verify']['status']}) of the {(r['ocf_bytes'] or 0) / 1e6:.1f} "
                  "MB OCF file", flush=True)
    if "slices" in only:
        h = 2048 // scale
        r = in_child("slices", h)
        if "error" in r:
            print(f"slices: failed: {r['error']!r}")
        else:
            valid, overlap = r["valid"], r["overlap"]
            print(f"\nslices, ({2 * h}, {h}) uint8, {h} rows over {h} columns: valid: open "
                  f"{valid['open']['seconds']:.3f} s, verify_all "
                  f"{valid['verify_all']['seconds']:.3f} s; one pair overlapping: open "
                  f"{overlap['open']['seconds']:.3f} s ({overlap['open']['result']})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        kind, directory, *rest = sys.argv[2:]
        function = {"chain": child_chain, "npz": child_npz, "slices": child_slices}[kind]
        print(json.dumps(function(directory, *map(int, rest)), default=str))
    else:
        os.environ.setdefault("PYTHONHASHSEED", "0")
        main()
