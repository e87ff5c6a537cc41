"""Save and load throughput of OCF against a raw floor and safetensors.

One command measures everything and prints a Markdown report::

    .venv/bin/python python/benchmarks/bench_io.py [--quick] [--repeat N] [--dir DIR]
                                                   [--json PATH]

Cases: (a) 1 GiB in 64 float32 tensors of 16 MiB; (b) 20,000 float32
tensors of 4 KiB. Systems: the raw floor (``ndarray.tofile`` into one file
plus fsync; ``readinto`` preallocated arrays), safetensors
(``safetensors.numpy``, plus an fsync of the file so that every system pays
for durability) and OCF (``ocf.save_file`` / ``ocf.load_file``, verified).
Each measurement is the median of ``--repeat`` timed runs after one untimed
warm-up run; the systems take turns within every round so that slow drift of
the machine hits all of them alike. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import safetensors
import safetensors.numpy
from safetensors import safe_open

import ocf

Tensors = dict[str, np.ndarray]
SYSTEMS = ("raw", "safetensors", "ocf")
REPO_ROOT = Path(__file__).resolve().parents[2]

MiB = 1 << 20


# -- cases ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A checkpoint shape: ``count`` float32 tensors of shape ``shape``."""

    name: str
    count: int
    shape: tuple[int, ...]

    @property
    def tensor_bytes(self) -> int:
        return int(np.prod(self.shape)) * 4

    @property
    def total_bytes(self) -> int:
        return self.count * self.tensor_bytes

    @property
    def probe(self) -> int:
        """Index of the tensor read by the 'open + one tensor' measurement."""
        return self.count // 2

    def key(self, i: int) -> str:
        return f"layers.{i:05d}.weight"

    def label(self) -> str:
        return (f"({self.name}) {self.count:,} x {_size(self.tensor_bytes)} "
                f"= {_size(self.total_bytes)}")

    def make(self, seed: int) -> Tensors:
        rng = np.random.default_rng(seed)
        return {self.key(i): rng.random(self.shape, dtype=np.float32) for i in range(self.count)}


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}" if n % scale == 0 else f"{n / scale:.1f} {unit}"
    return f"{n} B"


FULL_CASES = (Case("a", 64, (2048, 2048)), Case("b", 20_000, (1024,)))
QUICK_CASES = (Case("a", 8, (128, 128)), Case("b", 200, (1024,)))


# -- the systems ---------------------------------------------------------------


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_save(tensors: Tensors, path: Path) -> None:
    with open(path, "wb") as f:
        for array in tensors.values():
            array.tofile(f)
        f.flush()
        os.fsync(f.fileno())


def safetensors_save(tensors: Tensors, path: Path) -> None:
    safetensors.numpy.save_file(tensors, path)
    fsync_path(path)  # safetensors does not fsync; every system pays for durability


def ocf_save(tensors: Tensors, path: Path) -> None:
    ocf.save_file(tensors, path)  # temp file, fsync, rename, fsync of the directory


def raw_load(path: Path, layout: list[tuple[str, tuple[int, ...]]]) -> Tensors:
    out: Tensors = {}
    with open(path, "rb") as f:
        for key, shape in layout:
            array = np.empty(shape, dtype=np.float32)
            if f.readinto(array.data.cast("B")) != array.nbytes:
                raise EOFError(f"{path} ended early")
            out[key] = array
    return out


def safetensors_load(path: Path) -> Tensors:
    return safetensors.numpy.load_file(path)


def ocf_load(path: Path) -> Tensors:
    return ocf.load_file(path)


def ocf_load_zero_copy(path: Path) -> tuple[ocf.Reader, Tensors]:
    reader = ocf.open(path)
    return reader, {key: reader.get_tensor(key) for key in reader}


def raw_open_one(path: Path, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    with open(path, "rb") as f:
        f.seek(offset)
        array = np.empty(shape, dtype=np.float32)
        if f.readinto(array.data.cast("B")) != array.nbytes:
            raise EOFError(f"{path} ended early")
    return array


def safetensors_open_one(path: Path, key: str) -> np.ndarray:
    with safe_open(path, framework="np") as f:
        return f.get_tensor(key)  # type: ignore[no-any-return]


def ocf_open_one(path: Path, key: str) -> np.ndarray:
    with ocf.open(path) as reader:
        return reader.read_tensor(key)


# -- timing --------------------------------------------------------------------


@dataclass
class Timing:
    warmup: float
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def time_rounds(
    actions: Mapping[str, Callable[[], object]],
    repeat: int,
    *,
    before: Callable[[str], None] | None = None,
    check: Callable[[str, object], None] | None = None,
    release: Callable[[object], None] | None = None,
) -> dict[str, Timing]:
    """One warm-up round, then ``repeat`` timed rounds; each round runs every action once.

    ``before`` (untimed) prepares a system's run, ``check`` (untimed, warm-up
    only) validates its result, ``release`` (untimed) frees it. The result
    stays referenced until the clock has stopped.
    """
    warmups: dict[str, float] = {}
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for round_no in range(repeat + 1):
        for name, action in actions.items():
            if before is not None:
                before(name)
            gc.collect()
            start = time.perf_counter()
            result = action()
            elapsed = time.perf_counter() - start
            if round_no == 0:
                warmups[name] = elapsed
                if check is not None:
                    check(name, result)
            else:
                samples[name].append(elapsed)
            if release is not None:
                release(result)
            del result
    return {name: Timing(warmups[name], samples[name]) for name in actions}


def same_tensors(expected: Tensors, got: Mapping[str, np.ndarray], what: str) -> None:
    if list(got) != list(expected) and sorted(got) != sorted(expected):
        raise AssertionError(f"{what}: keys differ")
    for key, array in expected.items():
        value = got[key]
        if value.dtype != array.dtype or value.shape != array.shape or not np.array_equal(
            value, array
        ):
            raise AssertionError(f"{what}: tensor {key} differs")


# -- one case ------------------------------------------------------------------


OPERATIONS = ("save", "load", "load_zero_copy", "open_one")


def bench_case(case: Case, workdir: Path, repeat: int) -> dict[str, dict[str, Timing]]:
    log(f"case {case.label()}: generating data")
    tensors = case.make(seed=0)
    paths = {s: workdir / f"{case.name}.{s}" for s in SYSTEMS}
    results: dict[str, dict[str, Timing]] = {}

    def fresh(system: str) -> None:
        for leftover in workdir.iterdir():  # the target, and any temp file of a failed save
            if leftover.name.startswith((paths[system].name, "." + paths[system].name)):
                leftover.unlink()
        os.sync()  # settle write-back and discards of deleted files before the clock starts

    log(f"case {case.label()}: save")
    results["save"] = time_rounds(
        {
            "raw": lambda: raw_save(tensors, paths["raw"]),
            "safetensors": lambda: safetensors_save(tensors, paths["safetensors"]),
            "ocf": lambda: ocf_save(tensors, paths["ocf"]),
        },
        repeat,
        before=fresh,
    )

    layout = [(key, array.shape) for key, array in tensors.items()]

    def check_load(system: str, result: object) -> None:
        loaded = result[1] if isinstance(result, tuple) else result
        assert isinstance(loaded, dict)
        same_tensors(tensors, loaded, f"{system} load")

    log(f"case {case.label()}: load")
    results["load"] = time_rounds(
        {
            "raw": lambda: raw_load(paths["raw"], layout),
            "safetensors": lambda: safetensors_load(paths["safetensors"]),
            "ocf": lambda: ocf_load(paths["ocf"]),
        },
        repeat,
        check=check_load,
    )

    def close_reader(result: object) -> None:
        if isinstance(result, tuple):
            reader, arrays = result
            arrays.clear()
            reader.close()

    log(f"case {case.label()}: zero-copy load")
    results["load_zero_copy"] = time_rounds(
        {"ocf": lambda: ocf_load_zero_copy(paths["ocf"])},
        repeat,
        check=check_load,
        release=close_reader,
    )

    key = case.key(case.probe)

    def check_one(system: str, result: object) -> None:
        assert isinstance(result, np.ndarray)
        same_tensors({key: tensors[key]}, {key: result}, f"{system} open + one tensor")

    log(f"case {case.label()}: open + one tensor")
    results["open_one"] = time_rounds(
        {
            "raw": lambda: raw_open_one(paths["raw"], case.probe * case.tensor_bytes, case.shape),
            "safetensors": lambda: safetensors_open_one(paths["safetensors"], key),
            "ocf": lambda: ocf_open_one(paths["ocf"], key),
        },
        repeat,
        check=check_one,
    )
    for path in paths.values():
        path.unlink()
    return results


# -- targets and the report ----------------------------------------------------


@dataclass(frozen=True)
class Target:
    text: str
    met: Callable[[float, float, float], bool]  # (ocf, raw, safetensors) medians


TARGETS: dict[tuple[str, str], Target] = {
    ("a", "save"): Target("<= 1.10x raw and < safetensors",
                          lambda o, r, s: o <= 1.10 * r and o < s),
    ("a", "load"): Target("<= 1.10x raw", lambda o, r, s: o <= 1.10 * r),
    ("a", "open_one"): Target("< 50 ms", lambda o, r, s: o < 0.050),
    ("b", "save"): Target("<= safetensors", lambda o, r, s: o <= s),
    ("b", "load"): Target("<= safetensors", lambda o, r, s: o <= s),
}

OPERATION_LABELS = {
    "save": "save",
    "load": "load (full, new arrays)",
    "load_zero_copy": "load zero-copy (OCF extra row)",
    "open_one": "open + read one tensor",
}


def fmt_seconds(t: float) -> str:
    if t >= 1:
        return f"{t:.3f}"
    if t >= 0.01:
        return f"{t:.4f}"
    return f"{t:.6f}"


@dataclass(frozen=True)
class Row:
    case: str
    operation: str
    raw_s: float
    safetensors_s: float
    ocf_s: float
    ocf_over_raw: float
    ocf_over_safetensors: float
    target: str | None
    met: bool | None


def table_rows(
    cases: tuple[Case, ...], results: dict[str, dict[str, dict[str, Timing]]]
) -> list[Row]:
    rows: list[Row] = []
    for case in cases:
        by_op = results[case.name]
        for op in OPERATIONS:
            timings = by_op[op]
            # The zero-copy row compares with the raw and safetensors full loads.
            ref = by_op["load"] if op == "load_zero_copy" else timings
            o, r, s = timings["ocf"].median, ref["raw"].median, ref["safetensors"].median
            target = TARGETS.get((case.name, op))
            label = OPERATION_LABELS[op]
            if op == "open_one":
                label += f" ({_size(case.tensor_bytes)})"
            rows.append(Row(
                case=case.label(),
                operation=label,
                raw_s=r,
                safetensors_s=s,
                ocf_s=o,
                ocf_over_raw=o / r,
                ocf_over_safetensors=o / s,
                target=target.text if target else None,
                met=target.met(o, r, s) if target else None,
            ))
    return rows


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| case | operation | raw floor (s) | safetensors (s) | OCF (s) | OCF / raw "
        "| OCF / safetensors | target | met? |",
        "|---|---|--:|--:|--:|--:|--:|---|---|",
    ]
    for row in rows:
        met = "-" if row.met is None else ("yes" if row.met else "NO")
        lines.append(
            f"| {row.case} | {row.operation} | {fmt_seconds(row.raw_s)} "
            f"| {fmt_seconds(row.safetensors_s)} | {fmt_seconds(row.ocf_s)} "
            f"| {row.ocf_over_raw:.2f}x | {row.ocf_over_safetensors:.2f}x "
            f"| {row.target or '-'} | {met} |"
        )
    return "\n".join(lines)


def spread_table(cases: tuple[Case, ...],
                 results: dict[str, dict[str, dict[str, Timing]]]) -> str:
    """Min - max of the timed runs of every cell: how far to trust a ratio."""
    lines = [
        "| case | operation | raw floor min-max (s) | safetensors min-max (s) "
        "| OCF min-max (s) |",
        "|---|---|--:|--:|--:|",
    ]
    for case in cases:
        for op in OPERATIONS:
            cells = []
            for system in SYSTEMS:
                timing = results[case.name][op].get(system)
                cells.append("(as load)" if timing is None else
                             f"{fmt_seconds(min(timing.samples))} - "
                             f"{fmt_seconds(max(timing.samples))}")
            lines.append(f"| ({case.name}) | {OPERATION_LABELS[op]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine_facts(workdir: Path) -> dict[str, str]:
    cpu_model = "unknown"
    mem_total = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
                break
    except OSError:
        pass
    try:
        df = subprocess.run(["df", "-hT", str(workdir)], capture_output=True, text=True,
                            check=True).stdout.splitlines()[-1]
        device, fstype, size, _used, avail = df.split()[:5]
        filesystem = f"{fstype} on {device} ({size}, {avail} free)"
    except (OSError, subprocess.CalledProcessError, ValueError):
        filesystem = "unknown (df failed)"
    return {
        "cpu": f"{os.cpu_count()} x {cpu_model}",
        "memory": mem_total,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ocf": f"{ocf.__version__} from {Path(ocf.__file__).parent} "
               f"(source sha256 {source_fingerprint()})",
        "safetensors": safetensors.__version__,
        "git": git_state(),
        "directory": str(workdir),
        "filesystem": filesystem,
    }


def git_state() -> str:
    """The repository commit, and whether the ocf sources differ from it."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--",
                                "python/src"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} ({'python/src modified' if dirty else 'python/src clean'})"


def source_fingerprint() -> str:
    """Short hash of the ocf package's .py files, to tell which working tree was measured."""
    digest = hashlib.sha256()
    root = Path(ocf.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and 2 repeats: a smoke test, not a measurement")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per measurement (default 5, or 2 with --quick)")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "bench-out",
                        help="where to write (a fresh subdirectory is made and removed); "
                             "default: bench-out/ at the repository root (git-ignored)")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the raw measurements (every sample) to this file")
    args = parser.parse_args(argv)
    repeat = args.repeat if args.repeat is not None else (2 if args.quick else 5)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    cases = QUICK_CASES if args.quick else FULL_CASES

    args.dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-io-", dir=args.dir))
    started = time.perf_counter()
    try:
        facts = machine_facts(workdir)
        results = {case.name: bench_case(case, workdir, repeat) for case in cases}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runtime = time.perf_counter() - started
    rows = table_rows(cases, results)

    print("# OCF I/O benchmark" + (" (--quick: smoke test, sizes too small to judge)"
                                   if args.quick else ""))
    print()
    for name, value in facts.items():
        print(f"- {name}: {value}")
    print()
    print(f"Method: median of {repeat} timed runs after 1 warm-up run per cell; the systems "
          "take turns in every round. Every save writes a new file (the previous one is "
          "deleted and `sync` is called before the clock starts). Save times include "
          "fsync for all three: the raw floor and OCF fsync themselves, safetensors "
          "(which does not) gets `os.fsync` of the written file inside the timed region; "
          "OCF also renames a temp file and fsyncs the directory. Loads read from the page "
          "cache (the files were just written and fit in RAM; caches are not dropped), so "
          "they measure CPU and memory copies, not the disk. OCF loads verify every "
          "CRC-32C. The zero-copy row (`ocf.open` + `get_tensor` of every key, verified, "
          "references kept until the clock stops) is compared with the raw and safetensors "
          "full loads. 'open + read one tensor': raw = open + seek + readinto, safetensors "
          "= `safe_open` + `get_tensor`, OCF = `ocf.open` + `read_tensor` + close. "
          "'met?' is computed from the medians.")
    print()
    print(markdown_table(rows))
    print()
    print("Spread of the timed runs (the medians above are the figures that count):")
    print()
    print(spread_table(cases, results))
    print()
    print(f"Total benchmark runtime: {runtime:.0f} s.")

    if args.json is not None:
        payload = {
            "machine": facts,
            "repeat": repeat,
            "quick": args.quick,
            "runtime_s": runtime,
            "cases": {
                case.name: {
                    "label": case.label(),
                    "count": case.count,
                    "shape": list(case.shape),
                    "dtype": "float32",
                    "operations": {
                        op: {
                            system: {"median_s": t.median, "warmup_s": t.warmup,
                                     "samples_s": t.samples}
                            for system, t in results[case.name][op].items()
                        }
                        for op in OPERATIONS
                    },
                }
                for case in cases
            },
            "table": [asdict(row) for row in rows],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
