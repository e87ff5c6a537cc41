"""The runnable examples do what they say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_resumed_training_matches_an_uninterrupted_run_bit_for_bit() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "resume_training.py")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("losses match bit for bit")
    assert done.stdout.count("step ") == 10
