"""What the CheckpointManager tests share (the test_manager_*.py files, and the
child processes some of them start, which import this module).

Everything runs on real files. The managed object is :class:`ArrayCheckpoint`,
a small real implementation of the ``Saveable`` protocol on top of
``ocf.save_file`` and ``ocf.open``: named NumPy arrays, the save counter
stored in the file's metadata; :class:`StoreCheckpoint` is the same on an
object store.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import numpy as np

import ocf
from ocf.objects.state_file import STATE_FILE_NAME

# This directory: child processes put it on sys.path to import this module.
TESTS_DIR = Path(__file__).resolve().parent
# The seed of the SIGKILL tests' random kill moments; printed, and replayed by setting it.
SEED = int(os.environ.get("OCF_MANAGER_SEED", time.time_ns() % (1 << 32)))


def first_line(stream: IO[str]) -> str:
    """The first line a child process prints, read a byte at a time from the pipe's file
    descriptor: a buffered ``readline`` may take the lines after it too, and
    ``Popen.communicate`` reads the descriptor, so it would never see them (a child
    that printed "ready" and three "saved" lines before the test read then seemed to
    have saved from the fourth on)."""
    fd = stream.fileno()
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line.decode()


def run_saving_child(argv: list[str], kill_after: float | None, timeout: float
                     ) -> tuple[int, list[int], int, str]:
    """Run a child that prints ``ready <n>`` then ``saved <n>`` per save; SIGKILL it
    ``kill_after`` seconds after it is ready. The number it resumed from, the numbers
    it reported saved (a torn last line reports nothing), its return code and stderr."""
    child = subprocess.Popen([sys.executable, "-c", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        ready = first_line(child.stdout).split()
        assert ready[:1] == ["ready"], child.communicate()[1]
        if kill_after is not None:
            time.sleep(kill_after)
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    saved = [int(m.group(1)) for line in out.splitlines()
             if (m := re.fullmatch(r"saved (\d+)", line))]
    return int(ready[1]), saved, child.returncode, err


class ArrayCheckpoint:
    """A real Saveable: named arrays in one OCF file, ``save_counter`` in its metadata."""

    def __init__(self, arrays: dict[str, np.ndarray] | None = None) -> None:
        self.arrays = dict(arrays or {})
        self._save_counter = 0

    @property
    def save_counter(self) -> int:
        return self._save_counter

    def write(self, path: str) -> str:
        ocf.save_file(self.arrays, path, metadata={"save_counter": self._save_counter})
        return path

    def save(self, prefix: str) -> str:
        self._save_counter += 1
        return self.write(f"{prefix}-{self._save_counter}")

    def restore(self, path: str) -> dict[str, object]:
        with ocf.open(path) as reader:
            counter = reader.metadata["save_counter"]
            assert isinstance(counter, int)
            self.arrays = reader.read_tensors(reader)
        self._save_counter = counter
        return {"restored": path, "keys": sorted(self.arrays)}


def values_for(number: int, size: int = 1024) -> dict[str, np.ndarray]:
    """Arrays that say which checkpoint they belong to."""
    return {"number": np.array(number, dtype=np.int64),
            "weights": np.full(size, number, dtype=np.float32),
            "bias": np.arange(16, dtype=np.int32) + number}


def assert_holds(path: str, number: int, size: int = 1024) -> None:
    """``path`` restores to the values of checkpoint ``number`` with save_counter ``number``."""
    restored = ArrayCheckpoint()
    restored.restore(path)
    assert restored.save_counter == number, path
    expected = values_for(number, size)
    assert sorted(restored.arrays) == sorted(expected), path
    for key, array in expected.items():
        np.testing.assert_array_equal(restored.arrays[key], array, err_msg=f"{path} {key}")


def save_numbered(manager: ocf.CheckpointManager, checkpoint: ArrayCheckpoint) -> str:
    """Save the values of the next number through the save counter."""
    checkpoint.arrays = values_for(checkpoint.save_counter + 1)
    path = manager.save()
    assert path is not None
    return path


def state_json(directory: Path) -> dict[str, object]:
    document = json.loads((directory / STATE_FILE_NAME).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def names(paths: list[str]) -> list[str]:
    return [os.path.basename(p) for p in paths]


# A well-formed state file: the base of the hostile state-file cases.
GOOD = {"format": "ocf-checkpoint-state", "version": 1, "latest": "ckpt-1", "all": ["ckpt-1"],
        "timestamps": [1.0], "last_preserved_timestamp": 0.0}


def state_with(**changes: object) -> bytes:
    """The bytes of a good state file (GOOD) with these fields changed."""
    return json.dumps({**GOOD, **changes}).encode()


class StoreCheckpoint(ArrayCheckpoint):
    """ArrayCheckpoint on an object store in the multi-file form: takes storage_options."""

    def write(self, path: str, storage_options: dict[str, object] | None = None) -> str:
        ocf.save_file(self.arrays, path, layout="directory", storage_options=storage_options,
                      metadata={"save_counter": self._save_counter})
        return path

    def save(self, prefix: str, storage_options: dict[str, object] | None = None) -> str:
        self._save_counter += 1
        return self.write(f"{prefix}-{self._save_counter}", storage_options)

    def restore(self, path: str, storage_options: dict[str, object] | None = None
                ) -> dict[str, object]:
        with ocf.open(path, storage_options=storage_options) as reader:
            counter = reader.metadata["save_counter"]
            assert isinstance(counter, int)
            self.arrays = reader.read_tensors(reader)
        self._save_counter = counter
        return {"restored": path}
