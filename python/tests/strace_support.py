"""The system calls of a real child process, recorded by strace, for commit-order tests.

SIGKILL cannot show that data is fsynced before the rename that publishes it
(the page cache survives a killed process, not a power cut). strace can: it
records the real system calls of a real write. Tests that need it are marked
``needs_strace``: skipped where strace is missing or may not trace (a
container without ptrace), never silently passed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

STRACE = shutil.which("strace")


def strace_works() -> bool:
    if STRACE is None:
        return False
    probe = subprocess.run([STRACE, "-o", os.devnull, "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_strace = pytest.mark.skipif(not strace_works(), reason="needs a working strace")


@dataclass(frozen=True)
class Call:
    name: str
    paths: tuple[str, ...]  # quoted path arguments, or the path of an fd argument
    flags: str  # every argument, as strace printed them
    result: int


def traced_calls(log: Path, syscalls: Sequence[str], command: Sequence[str]) -> list[Call]:
    """Run ``command`` (and its threads and children) under strace, keeping its calls of
    ``syscalls`` in ``log``; the calls in the order they returned, failed ones too."""
    assert STRACE is not None
    subprocess.run([STRACE, "-f", "-qq", "-y", "-e", f"trace={','.join(syscalls)}", "-o",
                    str(log), *command], check=True, capture_output=True)
    calls = []
    for line in log.read_text().splitlines():
        match = re.match(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
        if match is None or match[1] not in syscalls:
            continue
        name, args, result = match[1], match[2], int(match[3])
        if name in ("fsync", "fdatasync"):
            paths = tuple(re.findall(r"^\d+<([^>]*)>", args))
        else:
            paths = tuple(re.findall(r'"([^"]*)"', args))
        calls.append(Call(name, paths, args, result))
    return calls
