"""The worker threads readers share: one pool per process, a new one in a forked child."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pytest

import ocf
from ocf.format.storage import local
from ocf.format.workers import reader_workers

# More than one read group, so that reading it uses the worker threads.
ELEMENTS = 3 * local._READ_GROUP // 4


def _read_in_child(path: str, expected: float, results: multiprocessing.Queue[object]) -> None:
    with ocf.open(path) as reader:
        results.put(float(reader.read_tensor("w").sum()) == expected)


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_a_child_forked_after_reads_on_threads_reads_with_threads_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "big.ocf"
    values = np.arange(ELEMENTS, dtype=np.float32)
    ocf.save_file({"w": values}, path)
    with ocf.open(path) as reader:  # the parent's threads now exist
        expected = float(reader.read_tensor("w").sum())
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_read_in_child, args=(str(path), expected, results))
    child.start()
    child.join(120)  # the parent's pool has no threads in the child: it would hang
    if child.is_alive():
        child.kill()
        child.join()
    assert child.exitcode == 0
    assert results.get(timeout=5) is True


def test_readers_opened_one_after_another_share_their_worker_threads(tmp_path: Path) -> None:
    path = tmp_path / "big.ocf"
    ocf.save_file({"w": np.ones(ELEMENTS, dtype=np.float32)}, path)
    pools = set()
    for _ in range(3):
        with ocf.open(path) as reader:
            reader.read_tensor("w")
            pools.add(id(reader_workers()))
    assert len(pools) == 1
