"""The byte shuffle of [R-CODEC-002], and the per-thread buffer that stages it."""

from __future__ import annotations

import threading

import numpy as np

# Per thread, a scratch buffer: one allocated per chunk costs page faults whenever
# the allocator has given its memory back to the system in between.
_local = threading.local()
# A thread keeps a scratch buffer up to this size; larger chunks get one per
# call, so that no thread holds more than this once its reads are done.
_KEPT_SCRATCH = 4 << 20


def scratch(size: int) -> np.ndarray:
    """A uint8 buffer of ``size`` bytes for this thread's use until it next calls this."""
    if size > _KEPT_SCRATCH:
        return np.empty(size, np.uint8)
    buffer: np.ndarray | None = getattr(_local, "scratch", None)
    if buffer is None or len(buffer) < size:
        buffer = _local.scratch = np.empty(size, np.uint8)
    return buffer[:size]


def shuffle_into(out: np.ndarray, raw: np.ndarray, itemsize: int) -> None:
    """Group byte j of every element of ``raw`` together in ``out``: out[j*m + i] =
    raw[i*s + j]. One copy through a transposed view, whose inner loop reads with a
    stride of ``itemsize`` and writes contiguously."""
    np.copyto(out.reshape(itemsize, -1), raw.reshape(-1, itemsize).T)


def shuffled_scratch(raw: memoryview, itemsize: int) -> memoryview:
    """``raw`` shuffled into this thread's scratch buffer (valid until its next use)."""
    shuffled = scratch(len(raw))
    shuffle_into(shuffled, np.frombuffer(raw, dtype=np.uint8), itemsize)
    return shuffled.data


def unshuffle_into(out: np.ndarray, shuffled: np.ndarray, itemsize: int, *,
                   out_zeroed: bool = False) -> None:
    """Invert :func:`shuffle_into`, straight into ``out``, one byte stream at a time.

    Each stream is read contiguously and written with a stride of
    ``itemsize``: 2 to 10 times faster than one copy through a transposed
    view, whose inner loop moves a single byte per step. That strided write
    is the costliest step of a shuffled read (as much CPU as decompressing),
    so when ``out`` is known to be zero-filled, streams that are all zero
    are not written at all: the low two bytes of float32 weights rounded to
    bfloat16, the high bytes of small integers.
    """
    streams = shuffled.reshape(itemsize, -1)
    elements = out.reshape(-1, itemsize)
    for j in range(itemsize):
        if out_zeroed and _all_zero(streams[j]):
            continue
        elements[:, j] = streams[j]


def _all_zero(stream: np.ndarray) -> bool:
    # The first bytes tell most streams that are not (at no cost); only a stream
    # that starts with zeros is read whole, at the speed of a vectorized max.
    return bool(stream[:4096].max(initial=0) == 0 and stream.max(initial=0) == 0)
