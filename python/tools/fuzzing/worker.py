"""A forked child that reads inputs one at a time under a memory cap and a time limit."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ocf
from fuzzing.readers import READERS, justified_bytes
from fuzzing.seeds import read_tree

# What a read may take whatever the file: thread stacks (8 MiB of address space
# each for the reader's pool), NumPy and protobuf working memory, the zip module.
BASE_ADDRESS_SPACE = 192 << 20
BASE_RESIDENT = 32 << 20
# Above this the cap no longer follows the files: memory of the machine.
MAX_CAP = 2 << 30
# mallopt parameters of glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _peak_resident() -> int:
    """The process's peak resident memory since the last _reset_peak (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)


def _read_one(job: dict[str, Any]) -> dict[str, Any]:
    """Read one input under the job's cap on the address space; how it ended.

    The cap is what the files justify, or with ``squeeze`` that many bytes
    beyond what the process maps: a machine short of memory, where running
    out is expected but must still be an OCFError.
    """
    target = Path(job["directory"]) / job["target"]
    _reset_peak()
    before = _peak_resident()
    extra = job["squeeze"] or BASE_ADDRESS_SPACE + min(job["justified"], MAX_CAP)
    cap = _address_space() + extra
    error: BaseException | None = None
    # The soft limit: the hard one stays unlimited, so the next input can raise it again.
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
    try:
        READERS[job["kind"]](target, job["verify"])
    except BaseException as exc:  # looked at once the memory is back
        error = exc
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,
                                                resource.RLIM_INFINITY))
    outcome: dict[str, Any] = {"result": "ok"}
    if isinstance(error, ocf.OCFError):
        outcome = {"result": error.label, "requirement": error.requirement}
    elif error is not None:
        outcome = {"result": "escape", "error": f"{type(error).__name__}: {error}"[:2000],
                   "traceback": "".join(traceback.format_exception(error))[-6000:]}
    outcome["growth"] = max(0, _peak_resident() - before)
    outcome["cap"] = cap
    return outcome


def _return_freed_memory() -> None:
    """Make glibc give large freed blocks back to the system, so that the address space
    a read finds mapped holds no free memory a squeezed read could use instead."""
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_TRIM_THRESHOLD, 128 << 10)
    libc.mallopt(_M_MMAP_THRESHOLD, 128 << 10)  # fixed: no longer raised by each free


def _serve(jobs: int, results: int) -> None:
    """The worker: one JSON job per line in, one JSON outcome per line out; never returns."""
    _return_freed_memory()
    with contextlib.suppress(BaseException), os.fdopen(jobs, "r") as lines:
        for line in lines:
            outcome = _read_one(json.loads(line))
            os.write(results, (json.dumps(outcome) + "\n").encode())
    os._exit(0)


@dataclass
class Result:
    outcome: str  # ok, an error label, escape, hang, crash, over-allocation
    detail: str = ""
    growth: int = 0


class Worker:
    """A forked child that reads inputs one at a time, replaced when it hangs or dies.

    Each input gets its own cap on the address space (a soft RLIMIT_AS, set
    from what the child maps before the read) and its own peak resident
    memory (VmHWM, reset before the read); a time limit kills the child.
    """

    def __init__(self) -> None:
        self.pid = 0
        self._spawn()

    def _spawn(self) -> None:
        jobs_read, jobs_write = os.pipe()
        results_read, results_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(jobs_write)
            os.close(results_read)
            try:
                _serve(jobs_read, results_write)
            finally:
                os._exit(70)
        os.close(jobs_read)
        os.close(results_write)
        self.pid, self._jobs, self._results = pid, jobs_write, results_read
        self._pending = b""

    def _replace(self, kill: bool) -> int:
        """End the child (killing it when ``kill``) and start another; its wait status."""
        if kill:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        os.close(self._jobs)
        os.close(self._results)
        self._spawn()
        return status

    def read(self, job: dict[str, Any], timeout: float) -> dict[str, Any] | Result:
        try:
            os.write(self._jobs, (json.dumps(job) + "\n").encode())
        except BrokenPipeError:
            status = self._replace(kill=False)
            return Result("crash", f"the worker had died: wait status {status:#x}")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            ready = select.select([self._results], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._replace(kill=True)
                return Result("hang", f"still running after {timeout} s")
            piece = os.read(self._results, 65536)
            if not piece:
                status = self._replace(kill=False)
                signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
                return Result("crash", f"worker died: wait status {status:#x}, signal "
                                       f"{signal_number}")
            self._pending += piece
        line, self._pending = self._pending.split(b"\n", 1)
        outcome: dict[str, Any] = json.loads(line)
        return outcome

    def close(self) -> None:
        os.close(self._jobs)
        os.waitpid(self.pid, 0)
        os.close(self._results)


def run_one(worker: Worker, seed_kind: str, directory: Path, target: str, verify: bool,
            timeout: float, squeeze: int = 0) -> Result:
    """Read one input; ``squeeze`` > 0 caps its memory at that many bytes beyond what the
    worker maps, where OUT_OF_MEMORY is an outcome, not an over-allocation."""
    justified = justified_bytes(seed_kind, read_tree(directory))
    job = {"kind": seed_kind, "directory": str(directory), "target": target, "verify": verify,
           "justified": justified, "squeeze": squeeze}
    result = _judged(worker.read(job, timeout), justified, squeeze)
    if result.outcome == "over-allocation":
        # The first read of a code path in this worker may pay once for what the input did
        # not ask for (a module imported or compiled on first use, a thread pool started):
        # an over-allocation counts only when the same read of the same bytes repeats it.
        again = _judged(worker.read(job, timeout), justified, squeeze)
        if again.outcome != "over-allocation":
            return again
    return result


def _judged(outcome: dict[str, Any] | Result, justified: int, squeeze: int) -> Result:
    """The outcome of one read, an over-allocation when it took more than ``justified``."""
    if isinstance(outcome, Result):
        return outcome
    growth = outcome["growth"]
    if outcome["result"] == "escape":
        return Result("escape", outcome["error"] + "\n" + outcome["traceback"], growth)
    if squeeze:
        return Result(outcome["result"], outcome.get("requirement") or "", growth)
    if outcome["result"] == "OUT_OF_MEMORY" and justified < MAX_CAP:
        return Result("over-allocation", f"out of memory under a cap of {outcome['cap']} "
                                         f"bytes; the files justify {justified}", growth)
    if growth > BASE_RESIDENT + justified:
        return Result("over-allocation", f"resident memory grew by {growth} bytes; the files "
                                         f"justify {justified}", growth)
    return Result(outcome["result"], outcome.get("requirement") or "", growth)
