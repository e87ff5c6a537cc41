"""The reader's worker threads (ocf.format.workers): every job runs, by a worker or by
whoever waits for it, so a read finishes (or fails) even when no thread can start."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import pytest

from ocf.format.workers import Workers


def test_without_any_thread_the_waiter_runs_every_job_in_order() -> None:
    workers = Workers(0)  # as if no thread could be started
    ran_on: list[int] = []

    def job(i: int) -> int:
        ran_on.append(threading.get_ident())
        return i * i

    assert workers.map(job, range(6)) == [0, 1, 4, 9, 16, 25]
    assert set(ran_on) == {threading.get_ident()}
    workers.shutdown()


def test_jobs_run_on_workers_and_the_first_error_in_order_is_raised() -> None:
    workers = Workers(3)
    threads: set[int] = set()

    def job(i: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.01)
        if i in (4, 6):
            raise ValueError(f"job {i}")
        return i

    with pytest.raises(ValueError, match="job 4"):
        workers.map(job, range(8))
    assert len(threads) >= 2  # the waiter and at least one worker
    assert workers.map(str, [1, 2]) == ["1", "2"]
    workers.shutdown()


def test_shutdown_waits_for_running_jobs_and_cancels_queued_ones() -> None:
    workers = Workers(1)
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(5)
        finished.append("slow")

    running = workers.submit(slow)
    queued = workers.submit(finished.append, "queued")  # a second job wakes the worker
    assert started.wait(5)
    threading.Timer(0.2, release.set).start()
    workers.shutdown()
    assert running.done()
    assert queued.cancelled()
    assert finished == ["slow"]


def test_a_lone_job_runs_on_the_thread_that_waits_for_it_without_waking_a_worker() -> None:
    workers = Workers(2)
    ran_on: list[int] = []
    lone = workers.submit(lambda: ran_on.append(threading.get_ident()))
    time.sleep(0.05)
    assert not lone.done()  # no worker was woken for it
    workers.wait(lone)
    assert ran_on == [threading.get_ident()]
    # Two at once: a worker is woken and takes one while the waiter runs the other.
    started, release = threading.Event(), threading.Event()
    first = workers.submit(lambda: (started.set(), release.wait(5)))
    second = workers.submit(lambda: release.set())
    assert started.wait(5)
    workers.wait(second)
    workers.wait(first)
    workers.shutdown()


def test_with_no_memory_for_a_thread_the_jobs_still_run() -> None:
    code = textwrap.dedent("""
        import resource
        from ocf.format.workers import Workers
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        limit = pages * resource.getpagesize() + (256 << 10)  # no room for a thread's stack
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(Workers(4).map(abs, range(-8, 0)))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[8, 7, 6, 5, 4, 3, 2, 1]"


def _pieces_taken_in_turn(count: int, done: list[int], threads: set[int],
                          fail_at: int | None = None) -> tuple[Callable[[], None], list[int]]:
    """A work function taking pieces 0..count-1 in turn (5 ms each), and its running count."""
    taken = iter(range(count))
    lock = threading.Lock()
    running = [0]

    def work() -> None:
        while True:
            with lock:
                piece = next(taken, None)
                if piece is None:
                    return
                running[0] += 1
            try:
                threads.add(threading.get_ident())
                time.sleep(0.005)
                if piece == fail_at:
                    raise ValueError(f"piece {piece}")
                done.append(piece)
            finally:
                with lock:
                    running[0] -= 1

    return work, running


def test_shared_work_takes_every_piece_once_on_the_caller_and_idle_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ocf.format.workers._idle_cores", lambda: 4)
    workers = Workers(3)
    done: list[int] = []
    threads: set[int] = set()
    work, running = _pieces_taken_in_turn(40, done, threads)
    workers.share(work, 39)
    assert sorted(done) == list(range(40))
    assert running == [0]
    assert threading.get_ident() in threads
    assert len(threads) > 1
    workers.shutdown()


def test_on_a_machine_with_no_idle_core_the_caller_does_all_the_shared_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ocf.format.workers._idle_cores", lambda: 0)
    workers = Workers(3)
    done: list[int] = []
    threads: set[int] = set()
    work, _ = _pieces_taken_in_turn(10, done, threads)
    workers.share(work, 9)
    assert sorted(done) == list(range(10))
    assert threads == {threading.get_ident()}
    workers.shutdown()


def test_an_error_in_shared_work_is_raised_once_every_run_has_ended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ocf.format.workers._idle_cores", lambda: 4)
    workers = Workers(3)
    done: list[int] = []
    threads: set[int] = set()
    work, running = _pieces_taken_in_turn(30, done, threads, fail_at=7)
    with pytest.raises(ValueError, match="piece 7"):
        workers.share(work, 29)
    assert running == [0]  # no piece is still being worked on
    assert 7 not in done
    workers.shutdown()
