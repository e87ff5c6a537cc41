"""Worker threads for a reader, which finish their work even when no thread can start.

A reader reads, checksums and decodes chunks on a few threads. When memory
runs out, a new thread can die before it starts, and CPython's
``Thread.start()`` (which ``ThreadPoolExecutor`` uses) then waits forever
for it: a read under memory pressure hangs instead of failing. These
workers are started without that wait, and whoever waits for a job runs
queued jobs itself, so every job is run, by a worker or by the caller, and
a memory error in one reaches the caller as an exception [R-ERR-003].
"""

from __future__ import annotations

import _thread
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, TypeVar

# A worker with nothing to do for this long ends; the next job starts another.
_IDLE_SECONDS = 5.0

_CORES = os.cpu_count() or 1

T = TypeVar("T")
U = TypeVar("U")


class _Job:
    __slots__ = ("arguments", "function", "future")

    def __init__(self, function: Callable[..., Any], arguments: tuple[Any, ...]) -> None:
        self.future: Future[Any] = Future()
        self.function = function
        self.arguments = arguments

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.function(*self.arguments)
        except BaseException as exc:  # the caller of wait() gets it, MemoryError included
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)


def _idle_cores() -> int:
    """About how many cores nothing else runs on (by the 1-minute load average)."""
    load = getattr(os, "getloadavg", None)  # not on Windows
    try:
        return _CORES if load is None else max(0, int(_CORES - load()[0]))
    except OSError:  # no load average to be had: assume the cores are free
        return _CORES


def in_turn(count: int, action: Callable[[int], None]) -> Callable[[], None]:
    """Work for several threads (:meth:`Workers.share`): ``action(i)`` for every i
    below ``count``, each run once, by whichever thread takes it next."""
    taken = itertools.count()
    lock = threading.Lock()  # next() on a shared iterator is atomic only under the GIL

    def work() -> None:
        while True:
            with lock:
                at = next(taken)
            if at >= count:
                return
            action(at)

    return work


class Workers:
    """Up to ``count`` threads running submitted jobs, started as jobs arrive."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._started = 0
        self._running = 0  # jobs being run by workers
        self._jobs: deque[_Job] = deque()
        self._ready = threading.Condition()
        self._closed = False

    def submit(self, function: Callable[..., T], *arguments: Any) -> Future[T]:
        """Queue ``function(*arguments)``; the caller waits for it with :meth:`wait`.

        A worker is woken (or started) only when another job is queued already:
        whoever waits runs queued jobs itself, so a lone job (the one read of a
        small tensor) runs on the waiting thread, without handing it to a worker
        and back, which cost more than the read. A worker that is awake takes
        queued jobs whether woken or not.
        """
        return self._queue(_Job(function, arguments), wake=False)

    def _queue(self, job: _Job, *, wake: bool) -> Future[Any]:
        with self._ready:
            self._jobs.append(job)
            wake = wake or len(self._jobs) > 1
            if wake:
                self._ready.notify()
            start = wake and self._started < self._count and not self._closed
            if start:
                self._started += 1
        if start:
            self._start_thread()
        return job.future

    def wait(self, future: Future[T]) -> T:
        """The result of ``future``; queued jobs are run here until it is done."""
        while not future.done():
            job = self._take()
            if job is None:
                break  # the job is running on a worker, which finishes it
            job.run()
        return future.result()

    def map(self, function: Callable[[U], T], items: Iterable[U]) -> list[T]:
        """``function`` of each item, in order, run on the workers and here."""
        futures = [self.submit(function, item) for item in items]
        try:
            return [self.wait(f) for f in futures]
        except BaseException:
            for future in futures:  # what has not started yet never will
                future.cancel()
            raise

    def share(self, work: Callable[[], None], most: int) -> None:
        """Run ``work`` on this thread and on up to ``most`` workers at once; return
        once every run has ended, raising the first error.

        ``work`` takes pieces of a shared task in turn until none is left, so a
        worker the system does not run soon leaves the pieces it has not taken
        to the others. Workers join only for cores that are idle: with the
        caller they fill the cores, and on a machine whose cores are all busy
        (load average at or above their number) the caller works alone, since
        waiting for a worker the system preempted in the middle of a piece
        costs more than the piece.
        """
        wanted = min(self._count - 1, most)
        if wanted > 0:  # a one-piece task (most small reads) asks nothing of the system
            wanted = min(wanted, _idle_cores())
        # Woken at once: the caller works too, and waits for them only at the end.
        helpers = [self._queue(_Job(work, ()), wake=True) for _ in range(wanted)]
        errors: list[BaseException] = []
        try:
            work()
        except BaseException as exc:  # raised once every helper has ended
            errors.append(exc)
        for helper in helpers:
            try:
                self.wait(helper)
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def shutdown(self) -> None:
        """Cancel queued jobs, wait for running ones, and let the workers end."""
        with self._ready:
            self._closed = True
            for job in self._jobs:
                job.future.cancel()
            self._jobs.clear()
            self._ready.notify_all()
            while self._running:
                self._ready.wait()

    def _take(self) -> _Job | None:
        with self._ready:
            return self._jobs.popleft() if self._jobs else None

    def _start_thread(self) -> None:
        try:
            # Not threading.Thread: its start() waits for the thread to report, forever
            # when the thread dies of MemoryError first. Without a thread, waiters run jobs.
            _thread.start_new_thread(self._serve, ())
        except RuntimeError:  # no thread to be had (memory, process limits)
            with self._ready:
                self._started -= 1

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._jobs and not self._closed:
                    if not self._ready.wait(_IDLE_SECONDS) and not self._jobs:
                        break  # idle: a reader nobody closed keeps no thread
                if not self._jobs:
                    self._started -= 1
                    return
                job = self._jobs.popleft()
                self._running += 1
            try:
                job.run()
            finally:
                with self._ready:
                    self._running -= 1
                    self._ready.notify_all()


_shared: tuple[int, Workers] | None = None
_shared_lock = threading.Lock()


def reader_workers() -> Workers:
    """The worker threads of every Reader of this process.

    Shared, not one pool per Reader: starting threads at each open cost more
    than reading a 16 MiB tensor. A forked child gets workers of its own
    (the parent's threads do not exist there); idle workers end by themselves.
    """
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            _shared = (os.getpid(), Workers(min(4, os.cpu_count() or 1)))
        return _shared[1]
