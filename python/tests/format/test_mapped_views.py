"""Views of a memory-mapped file outlive the reader that returned them.

``get_tensor`` returns zero-copy views of the file's map. Closing the reader
must not unmap memory a view still reads: the map closes when the last view
is gone. Run in a child process, since the failure is a segmentation fault.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import ocf

CHILD = """
import gc, sys
import numpy as np
import ocf

with ocf.open(sys.argv[1]) as reader:
    small, big = reader.get_tensor("small"), reader.get_tensor("big")
gc.collect()
print(float(small.sum()), float(big.sum()))
"""


def test_views_from_get_tensor_read_correctly_after_their_reader_closed(tmp_path: Path) -> None:
    path = tmp_path / "views.ocf"
    ocf.save_file({"small": np.arange(16, dtype=np.float32),  # a one-chunk tensor
                   "big": np.ones(1 << 20, dtype=np.float32)}, path)
    result = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["120.0", str(float(1 << 20))]


def test_a_name_based_restore_copies_values_after_the_file_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "model.ocf"
    ocf.save_file({"dense/kernel": np.full((256, 128), 2.0, np.float32)}, path)
    target = np.zeros((256, 128), np.float32)
    ocf.Saver({"dense/kernel": target}).restore(path)  # reads views, closes, then copies
    assert (target == 2.0).all()
