"""Progress bars: drawn on a real pseudo-terminal, absent when stderr is piped.

The threshold of work that earns a bar is lowered for these tests with
OCF_PROGRESS_MIN_BYTES, so a small checkpoint shows one; the bar itself is
tqdm's, drawn by the real ``ocf`` process on the terminal it was given.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_support import ocf_command

import ocf

COMMANDS = {
    "verify": lambda a, b, out: ["verify", a],
    "diff": lambda a, b, out: ["diff", a, b],
    "stats": lambda a, b, out: ["inspect", "--stats", a],
    "convert": lambda a, b, out: ["convert", a, out],
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    where = tmp_path_factory.mktemp("progress")
    values = np.arange(3_000_000, dtype=np.float32)  # 12 MB: several pieces
    ocf.save_file({"w": values}, where / "a.ocf")
    ocf.save_file({"w": values}, where / "b.ocf", compression="zstd")
    return str(where / "a.ocf"), str(where / "b.ocf")


def environment(threshold: int) -> dict[str, str]:
    return {**os.environ, "OCF_PROGRESS_MIN_BYTES": str(threshold), "COLUMNS": "100"}


def on_a_terminal(args: list[str], threshold: int) -> tuple[int, str]:
    """Run ``ocf ARGS`` with stderr on a new pseudo-terminal; (status, what it drew)."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([*ocf_command(), *args], stdout=subprocess.DEVNULL,
                                   stderr=terminal, env=environment(threshold))
        os.close(terminal)
        drawn = bytearray()
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # EIO: the process closed the terminal's last descriptor
                break
            if not data:
                break
            drawn += data
        status = process.wait(timeout=300)
    finally:
        os.close(controller)
    return status, drawn.decode("utf-8", "replace")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bar_is_drawn_on_a_terminal_when_the_work_is_large(
        pair: tuple[str, str], tmp_path: Path, command: str) -> None:
    args = COMMANDS[command](*pair, str(tmp_path / "out.safetensors"))
    status, drawn = on_a_terminal(args, threshold=1)
    assert status == 0, drawn
    # tqdm's bar: the description, a percentage and the total in binary units.
    assert f"\r{command}: " in drawn
    assert "%|" in drawn
    assert re.search(r"/\d+(\.\d+)?M ", drawn), drawn


def test_no_bar_below_the_threshold_even_on_a_terminal(pair: tuple[str, str]) -> None:
    status, drawn = on_a_terminal(["verify", pair[0]], threshold=1 << 40)
    assert status == 0
    assert drawn == ""


@pytest.mark.parametrize("command", list(COMMANDS))
def test_nothing_extra_when_stderr_is_piped(pair: tuple[str, str], tmp_path: Path,
                                            command: str) -> None:
    args = COMMANDS[command](*pair, str(tmp_path / "out.safetensors"))
    done = subprocess.run([*ocf_command(), *args], capture_output=True, text=True,
                          check=False, env=environment(1))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "%" not in done.stdout
