"""What the trainer integration tests share: a training child process run to
its end or SIGKILLed when it says ready, and a bit-for-bit comparison of
nested state dicts."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch


def train(worker: Path, arguments: Sequence[str | Path], kill: bool) -> None:
    """Run ``worker`` to the end, or (``kill``) SIGKILL it once it prints "ready"
    (a line of its own among whatever else it prints)."""
    command = [sys.executable, str(worker), *map(str, arguments)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill:
            assert child.stdout is not None
            for line in child.stdout:
                if line == "ready\n":
                    break
            child.send_signal(signal.SIGKILL)  # at "ready", or an early end: its code says
        _, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == (-signal.SIGKILL if kill else 0), err


def assert_same(expected: object, actual: object, where: str = "") -> None:
    """Equal structure, Python types and tensor bytes (so NaNs and -0.0 count too)."""
    assert type(actual) is type(expected), where
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert (expected.dtype, expected.shape) == (actual.dtype, actual.shape), where
        assert _bytes_of(expected) == _bytes_of(actual), where
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray)
        assert expected.dtype == actual.dtype, where
        assert expected.tobytes() == actual.tobytes(), where
    elif isinstance(expected, dict):
        assert isinstance(actual, dict)
        assert list(expected) == list(actual), where
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}/{key}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple))
        assert len(expected) == len(actual), where
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}/{i}")
    else:
        assert expected == actual, where


def _bytes_of(tensor: torch.Tensor) -> bytes:
    """The tensor's values as bytes, any dtype (NumPy knows no bfloat16)."""
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return bytes(flat.view(torch.uint8).numpy().tobytes()) if flat.numel() else b""
