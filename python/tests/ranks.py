"""Running a worker script as the ranks of a gloo process group on loopback.

Each rank is a real process started with RANK, WORLD_SIZE and OCF_TEST_INIT
(a tcp:// URL on 127.0.0.1) in its environment and one JSON job as its
argument; shared by the multi-process tests of ocf.distributed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(script: Path, job: dict[str, Any], world: int) -> list[subprocess.Popen[bytes]]:
    """Start ``world`` ranks of ``script`` on ``job``; its ``out`` folder is their cwd."""
    init = f"tcp://127.0.0.1:{free_port()}"
    Path(job["out"]).mkdir(parents=True, exist_ok=True)
    processes = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
               "OCF_TEST_INIT": init, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
        processes.append(subprocess.Popen(
            [sys.executable, str(script), json.dumps(job)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=job["out"]))
    return processes


def finish(processes: list[subprocess.Popen[bytes]], timeout: float = TIMEOUT) -> list[int]:
    """Wait for every rank, killing those still running after ``timeout`` seconds (their
    code is then -SIGKILL: the caller's assertion reports it, and closes the pipes)."""
    deadline = time.monotonic() + timeout
    codes = []
    try:
        for process in processes:
            try:
                codes.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait())
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return codes


def close_pipes(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def run(script: Path, job: dict[str, Any], world: int,
        timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """Run the job on ``world`` ranks; each rank's ``<rank>.json`` once all exit 0."""
    processes = start(script, job, world)
    codes = finish(processes, timeout)
    errors = [p.stderr.read().decode()[-3000:] for p in processes if p.stderr]
    close_pipes(processes)
    assert codes == [0] * world, "\n".join(errors)
    return [json.loads((Path(job["out"]) / f"{r}.json").read_text()) for r in range(world)]
