"""Memory bounds of the command line, measured as the peak RSS of the real ``ocf`` process.

One float32 tensor of 160 MiB is large enough to show the difference:
reading it whole costs at least 160 MiB over the process's baseline (diff
would hold two, and their float64 copies), streaming it piece by piece a
bounded few tens of MiB. The peak is the kernel's (``ru_maxrss`` of the
child, which counts mapped file pages too), and the baseline is the same
command on a tiny checkpoint, so imports and interpreter are not counted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import ocf_command

import ocf

MIB = 1 << 20
TENSOR_BYTES = 160 * MIB
# What streaming may add over the baseline: a few pieces of 16 MiB and their temporaries.
STREAMING_BOUND = 100 * MIB
# What a conversion to OCF may add (the issue's bound: 64 MiB plus the largest tensor).
CONVERSION_BOUND = 64 * MIB + TENSOR_BYTES

PEAK = ("import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def peak_rss(*args: str) -> int:
    """The exit status must be 0 or 1 (diff's 'different'); the child's peak RSS in bytes."""
    done = subprocess.run([sys.executable, "-c", PEAK, *ocf_command(), *args],
                          capture_output=True, text=True, check=True, timeout=600)
    status, kib = map(int, done.stdout.split())
    assert status in (0, 1), done.stderr
    return kib * 1024


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from safetensors.numpy import save_file

    where = tmp_path_factory.mktemp("memory")
    values = np.random.default_rng(1).standard_normal(TENSOR_BYTES // 4, dtype=np.float32)
    ocf.save_file({"w": values}, where / "a.ocf")
    save_file({"w": values}, str(where / "a.safetensors"))
    values[123_456] += 1  # one difference, found in one piece
    ocf.save_file({"w": values}, where / "b.ocf", compression="zstd")
    ocf.save_file({"w": values[:8]}, where / "tiny.ocf")
    return {name: str(where / name) for name in ("a.ocf", "a.safetensors", "b.ocf",
                                                  "tiny.ocf")} | {"dir": str(where)}


@pytest.fixture(scope="module")
def baseline(files: dict[str, str]) -> int:
    return peak_rss("diff", files["tiny.ocf"], files["tiny.ocf"])


@pytest.mark.parametrize("command", [
    ("diff", "a.ocf", "a.safetensors"),
    ("diff", "a.ocf", "b.ocf"),
    ("inspect", "--stats", "b.ocf"),
    ("verify", "a.ocf"),
    ("verify", "a.safetensors"),
    ("convert", "a.ocf", "out.safetensors"),
])
def test_streaming_commands_stay_far_below_the_tensor_size(
        files: dict[str, str], baseline: int, command: tuple[str, ...]) -> None:
    args = [files.get(part, part) for part in command]
    if command[0] == "convert":
        args[-1] = str(Path(files["dir"]) / command[-1])
    extra = peak_rss(*args) - baseline
    assert extra < STREAMING_BOUND, f"{command}: {extra / MIB:.0f} MiB over the baseline"


@pytest.mark.parametrize("target", ["out.npz", "relayout", "from-safetensors.ocf"])
def test_conversions_hold_at_most_one_tensor(files: dict[str, str], baseline: int,
                                             target: str) -> None:
    source = files["a.safetensors" if target.startswith("from") else "a.ocf"]
    options = ["--layout", "directory", "--compression", "zstd"] if target == "relayout" else []
    extra = peak_rss("convert", source, str(Path(files["dir"]) / target), *options) - baseline
    assert extra < CONVERSION_BOUND, f"{target}: {extra / MIB:.0f} MiB over the baseline"
