"""The peak memory a block of test code allocates, as tracemalloc sees it.

Python objects and NumPy arrays are traced (NumPy reports its buffers to
tracemalloc); what a C library allocates on its own heap is not. Tests that
pin down "refused before allocating" or "memory linear in the size" read
the peak after the block::

    with traced_memory() as memory, pytest.raises(ocf.LimitExceededError):
        ocf.Reader(path)
    assert memory.peak < 1 << 20
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class TracedMemory:
    peak: int = 0  # the most bytes traced at once within the block; set when it ends


@contextmanager
def traced_memory() -> Iterator[TracedMemory]:
    """Trace allocations within the block (tracing stops when it ends, also by an
    exception) and record their peak."""
    traced = TracedMemory()
    tracemalloc.start()
    try:
        yield traced
        traced.peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
