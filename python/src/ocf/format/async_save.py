"""Asynchronous saves: return once the tensors are copied, write in the background.

``ocf.save_file(..., blocking=False)`` and ``ocf.Checkpoint.save(...,
blocking=False)`` copy every tensor into host memory (the snapshot) and
return a :class:`SaveHandle`; writing, checksumming, uploading and the
commit run on one background thread. The training loop may change its
arrays as soon as the call returns: the checkpoint holds the values they
had at the call.

Rules:

- One asynchronous save at a time, in the whole process: a save (blocking
  or not) first waits until the previous asynchronous save has finished.
  If that save failed and nobody has asked its handle (``wait``,
  ``result``, ``exception``), the new save raises its error instead of
  starting, so a failed checkpoint is never lost silently.
- Memory: the snapshot is one copy of the bytes of the tensors saved, in
  one staging buffer. The buffer is kept for the next asynchronous save
  (copying into memory already mapped is about twice as fast as into new
  pages); :func:`release_staging_memory` frees it. Beyond the snapshot, the
  background write holds what a blocking one holds (a few chunks, or one
  upload part per object). So the peak extra memory of an asynchronous save
  is the size of the state plus a few tens of MiB.
- Speed: the snapshot is bound by memory bandwidth. Tensors are copied in
  pieces by the calling thread and up to 3 helpers; tensors of 256 MiB or
  more in pieces of 128 MiB, large enough for glibc's non-temporal stores
  (about 1.7x faster where measured; see _LARGE_PIECE). Smaller tensors get
  them only if the process is started with a lower threshold, e.g.
  ``GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x400000`` (4 MiB;
  this applies to every large memcpy of the process, which then bypasses
  the cache).
- The commit protocol is unchanged: the checkpoint appears only when the
  background write commits; a crash before that leaves the previous one.
- Python waits for a pending save at exit (the background thread is joined),
  so a normal exit never cuts a save short.
"""

from __future__ import annotations

import contextlib
import copy
import mmap
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np

from ocf.format import dtypes
from ocf.format.workers import in_turn

Snapshot = dict[str, np.ndarray]

# Tensors at least this large are copied by several threads, in pieces of
# _PIECE bytes: one thread cannot saturate memory bandwidth. The calling
# thread copies too, with at most _COPY_HELPERS threads of the copy pool.
_PARALLEL_COPY = 4 << 20
_PIECE = 8 << 20
# Tensors of at least two such pieces are copied in them instead: glibc's
# memcpy uses non-temporal stores only for copies above a threshold (3/4 of
# the shared cache; 114 MiB on the 2-core benchmark machine), and those copy
# 1 GiB in 0.11 s there against 0.18 s for cached stores (no read of the
# target's cache lines first). Smaller tensors cannot get them from NumPy.
_LARGE_PIECE = 128 << 20
_COPY_HELPERS = min(3, (os.cpu_count() or 1) - 1)
_ALIGN = 64


class SaveHandle:
    """A save running in the background; ``wait()`` returns its path or raises its error.

    Examples:
        >>> handle = ocf.save_file({"w": np.ones(1 << 20)}, "w.ocf", blocking=False)
        >>> # ... training goes on while the file is written ...
        >>> path = handle.wait()  # re-raises any error of the background save
    """

    def __init__(self, path: str, future: Future[str]) -> None:
        self.path = path
        self._future = future
        self._observed = False

    def done(self) -> bool:
        """True once the save has committed or failed."""
        return self._future.done()

    def wait(self, timeout: float | None = None) -> str:
        """Wait for the commit; return the checkpoint's path, or raise the save's error.

        Raises TimeoutError if ``timeout`` seconds pass first.
        """
        try:
            result = self._future.result(timeout)
        except FutureTimeout:
            raise TimeoutError(f"save to {self.path} still running after {timeout} s") from None
        except BaseException:
            self._observed = True
            raise
        self._observed = True
        return result

    result = wait

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error the save failed with, or None once it committed."""
        try:
            error = self._future.exception(timeout)
        except FutureTimeout:
            raise TimeoutError(f"save to {self.path} still running after {timeout} s") from None
        self._observed = True
        return error

    def __repr__(self) -> str:
        state = "running" if not self.done() else (
            "failed" if self._future.exception() is not None else "committed")
        return f"<SaveHandle {self.path} {state}>"


class _Staging:
    """The host memory snapshots are copied into, kept from one save to the next."""

    def __init__(self) -> None:
        self._buffer: np.ndarray | None = None

    def take(self, size: int) -> np.ndarray:
        buffer = self._buffer
        if buffer is None or buffer.size < size or buffer.size > 2 * size + (64 << 20):
            self._buffer = None  # the old buffer goes once the last snapshot in it is gone
            buffer = self._buffer = _allocate(size)
        return buffer[:size]

    def release(self) -> None:
        self._buffer = None


def _allocate(size: int) -> np.ndarray:
    """``size`` bytes of anonymous memory, on huge pages where the kernel offers them
    (a 1 GiB snapshot then costs 512 page faults instead of 262,144)."""
    if size == 0 or not hasattr(mmap, "MAP_PRIVATE"):  # Windows: the allocator's pages
        return np.empty(size, dtype=np.uint8)
    # Private: shared anonymous memory is a tmpfs file, slower to fault in.
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        with contextlib.suppress(OSError):  # not supported here: ordinary pages
            memory.madvise(advice)
    return np.frombuffer(memory, dtype=np.uint8)


_lock = threading.Lock()
_staging = _Staging()
_previous: SaveHandle | None = None
_writer: ThreadPoolExecutor | None = None
_copiers: ThreadPoolExecutor | None = None


def release_staging_memory() -> None:
    """Free the staging buffer kept for the next asynchronous save (after waiting for it)."""
    with _lock:
        _settle_previous(raise_unobserved=False)
        _staging.release()


def wait_for_pending(raise_unobserved: bool = True) -> None:
    """Wait until the pending asynchronous save (if any) has finished.

    Raises its error if it failed and its handle was never asked.
    """
    with _lock:
        _settle_previous(raise_unobserved)


def _settle_previous(raise_unobserved: bool) -> None:
    global _previous
    previous = _previous
    if previous is None:
        return
    error = previous._future.exception()  # waits
    _previous = None
    if error is not None and raise_unobserved and not previous._observed:
        previous._observed = True
        raise error


def submit(tensors: Mapping[str, object], job: Callable[[Snapshot], str], path: str
           ) -> SaveHandle:
    """Wait for the previous asynchronous save, snapshot ``tensors``, and run ``job`` on
    the snapshot in the background; the handle of that run."""
    global _previous, _writer
    with _lock:
        _settle_previous(raise_unobserved=True)
        snapshot = snapshot_tensors(tensors)
        if _writer is None:
            _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ocf-async-save")
        handle = SaveHandle(path, _writer.submit(job, snapshot))
        _previous = handle
    return handle


def then(handle: SaveHandle, follow_up: Callable[[str], str]) -> SaveHandle:
    """The handle of ``follow_up(path)``, run in the background once ``handle``'s save
    has committed; it fails with the save's error, without running, if the save failed.

    The background thread runs jobs in order, so ``follow_up`` starts right
    after the save. The new handle takes the save's place as the pending one:
    the next save waits for ``follow_up`` too (a checkpoint manager's state
    update is part of its save).
    """
    global _previous

    def job() -> str:
        return follow_up(handle.wait())

    with _lock:
        assert _writer is not None, "the handle comes from submit()"
        chained = SaveHandle(handle.path, _writer.submit(job))
        if _previous is None or _previous is handle:  # else a later save is pending
            _previous = chained
    return chained


def frozen_metadata(metadata: Mapping[str, object] | None) -> dict[str, object] | None:
    """A deep copy of ``metadata``, taken at the call: the caller may change it after."""
    return None if metadata is None else copy.deepcopy(dict(metadata))


def snapshot_tensors(tensors: Mapping[str, object]) -> Snapshot:
    """Copies of ``tensors`` in the staging buffer: same dtypes, shapes and keys."""
    arrays = {key: value if type(value) is np.ndarray else np.asarray(value)
              for key, value in tensors.items()}
    offsets: dict[str, int] = {}
    size = 0
    for key, array in arrays.items():
        dtypes.for_array(array)  # an unsupported dtype fails now, not in the background
        if array.dtype.hasobject:
            continue
        offsets[key] = size
        size += -(-array.nbytes // _ALIGN) * _ALIGN
    buffer = _staging.take(size)
    snapshot: Snapshot = {}
    pieces: list[tuple[np.ndarray, np.ndarray]] = []
    for key, array in arrays.items():
        if array.dtype.hasobject:  # byte strings: immutable elements, a shallow copy is whole
            snapshot[key] = array.copy()
            continue
        start = offsets[key]
        target = buffer[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
        snapshot[key] = target
        if array.nbytes < _PARALLEL_COPY:
            np.copyto(target, array, casting="no")
        elif array.flags.c_contiguous:
            flat_to = target.reshape(-1).view(np.uint8)
            flat_from = array.reshape(-1).view(np.uint8)
            step = _LARGE_PIECE if array.nbytes >= 2 * _LARGE_PIECE else _PIECE
            pieces += [(flat_to[a : a + step], flat_from[a : a + step])
                       for a in range(0, array.nbytes, step)]
        else:
            pieces.append((target, array))
    if pieces:
        _copy_pieces(pieces)
    return snapshot


def _copy_pieces(pieces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Copy every piece; the calling thread and the helpers each take the next one.

    The caller copies instead of waiting idle (with 2 cores, 1 helper and the
    caller are the 2 copiers), and there is one future per helper, not one
    per piece. Taking pieces in turn rather than fixed shares keeps both
    busy when the system preempts one of them.
    """
    def copy(at: int) -> None:
        target, source = pieces[at]
        np.copyto(target, source, casting="no")  # releases the GIL for the copy

    work = in_turn(len(pieces), copy)
    helpers = [_copy_pool().submit(work) for _ in range(min(_COPY_HELPERS, len(pieces) - 1))]
    try:
        work()
    finally:
        for helper in helpers:
            helper.result()


def _copy_pool() -> ThreadPoolExecutor:
    global _copiers
    if _copiers is None:
        _copiers = ThreadPoolExecutor(max_workers=max(1, _COPY_HELPERS),
                                      thread_name_prefix="ocf-snapshot")
    return _copiers
