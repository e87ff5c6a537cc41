"""The peer benchmark still runs end to end (tiny sizes; it measures nothing here).

Benchmarks never gate on speed: this only keeps python/benchmarks/bench_io.py
from rotting as the API changes. The systems are the raw floor, OCF and
safetensors; the framework peers cost tens of seconds of imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import PYTHON_DIR

BENCH = PYTHON_DIR / "benchmarks" / "bench_io.py"


def test_bench_io_smoke_run_reports_every_workload_of_ocf(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    out = tmp_path / "samples.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--dir", str(tmp_path), "--json", str(out),
         "--systems", "raw,ocf,safetensors", "--workloads", "W1,W2,W3,W4,W5,W6,W7"],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    measured = {name for name, samples in results["ocf"].items() if samples}
    assert {"W1 save", "W1 load", "W2 save", "W2 open + load", "W3 open + one",
            "W4 open + list", "W5 per-key reads", "W6 zstd load", "W7 async save stall"
            } <= measured
    assert "| W5 per-key reads |" in done.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("bench-io-")]
