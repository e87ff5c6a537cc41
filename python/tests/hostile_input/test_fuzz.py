"""The fuzz target over every reader (python/tools/fuzz.py), run with a small budget.

The long run is the script itself (``--seconds 600``); here it runs for 20
seconds from a random seed, printed on failure so the run can be repeated.
A second test plants each kind of failure in a reader of the fuzzer's own
machinery, to show that an escape, a hang, a crash and an over-allocation
are each caught and named, not counted as outcomes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from repo_paths import PYTHON_DIR

import ocf
from ocf.format.memory import out_of_memory

TOOLS = PYTHON_DIR / "tools"
FORMATS = {"ocf-file", "ocf-dir", "tensorflow", "safetensors", "npz", "gguf",
           "sharded-safetensors", "pytorch", "dcp"}


def test_fuzzing_every_reader_for_20_seconds_lets_only_ocf_errors_out() -> None:
    seed = random.SystemRandom().randrange(2**32)
    result = subprocess.run(
        [sys.executable, str(TOOLS / "fuzz.py"), "--seconds", "20", "--seed", str(seed),
         "--json"], capture_output=True, text=True, timeout=300, check=False)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["failures"] == {"escape": 0, "hang": 0, "crash": 0,
                                   "over-allocation": 0}, (seed, summary["failed_inputs"])
    assert result.returncode == 0, result.stderr
    assert summary["inputs"] >= 100, summary
    assert set(summary["by_format"]) == FORMATS  # every reader was fed
    # Mutations reach past the first checks: valid reads and several categories.
    assert summary["outcomes"].get("ok", 0) > 0
    assert len(set(summary["outcomes"]) - {"ok"}) >= 3, summary["outcomes"]


@pytest.fixture(scope="module")
def fuzzing() -> Iterator[tuple[ModuleType, ModuleType]]:
    """The fuzzer's readers and worker modules."""
    sys.path.insert(0, str(TOOLS))
    try:
        import fuzzing.readers
        import fuzzing.worker
        yield fuzzing.readers, fuzzing.worker
    finally:
        sys.path.remove(str(TOOLS))


def _escape(path: Path, verify: bool) -> None:
    raise KeyError("a bug")


def _hang(path: Path, verify: bool) -> None:
    time.sleep(60)


def _crash(path: Path, verify: bool) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _resident(path: Path, verify: bool) -> None:
    np.ones(96 << 20, dtype=np.uint8)  # touched: resident, far beyond a 5-byte file


def _out_of_memory(path: Path, verify: bool) -> None:
    raise out_of_memory(1 << 30, "reading this tensor", path=path, key="k")


def _ocf_error(path: Path, verify: bool) -> None:
    raise ocf.InvalidError("a verdict on the file", path=path)


@pytest.mark.parametrize(("reader", "expected"), [
    (_escape, "escape"), (_hang, "hang"), (_crash, "crash"),
    (_resident, "over-allocation"), (_out_of_memory, "over-allocation"),
    (_ocf_error, "INVALID"),
])
def test_the_fuzzer_names_each_kind_of_failure(
        fuzzing: tuple[ModuleType, ModuleType], tmp_path: Path,
        reader: Callable[[Path, bool], None], expected: str) -> None:
    readers, workers = fuzzing
    (tmp_path / "x").write_bytes(b"12345")
    readers.READERS["planted"] = reader  # before the worker forks, so it inherits it
    try:
        worker = workers.Worker()
        try:
            result = workers.run_one(worker, "planted", tmp_path, "x", True, timeout=5)
            assert result.outcome == expected, result
            after = workers.run_one(worker, "planted", tmp_path, "x", True, timeout=5)
            assert after.outcome == expected  # a replaced worker serves the next input
        finally:
            worker.close()
    finally:
        del readers.READERS["planted"]
