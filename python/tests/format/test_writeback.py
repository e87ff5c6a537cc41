"""A save starts writeback early but leaves the checkpoint in the page cache.

Reading a checkpoint right after saving it (a restore, a verify, an
evaluation job) must read memory, not the disk: the early writeback of a
large save (ocf.format.storage.writeback) must not drop the pages it has
written, as POSIX_FADV_DONTNEED did. Residency is asked of the kernel with
mincore(2) over a private mapping of the file (Linux only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import sys
from pathlib import Path

import numpy as np
import pytest

import ocf

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="mincore(2) and sync_file_range(2) are Linux's")


def resident_fraction(path: Path) -> float:
    """The fraction of the file's pages in the page cache."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with path.open("rb") as file:
        size = path.stat().st_size
        with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
            page = mmap.PAGESIZE
            pages = (size + page - 1) // page
            vector = ctypes.create_string_buffer(pages)
            address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
            if libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            resident = np.frombuffer(vector.raw, np.uint8) & 1
            del address
            return float(resident.mean())


def test_a_large_save_stays_in_the_page_cache_after_its_early_writeback(
        tmp_path: Path) -> None:
    # 384 MiB: six writeback steps of 64 MiB, each started while the save goes on.
    tensors = {f"t{i}": np.full((16, 1 << 20), i, np.float32) for i in range(6)}
    path = tmp_path / "big.ocf"
    ocf.save_file(tensors, path)
    assert resident_fraction(path) > 0.99
