"""The runnable examples do what they say."""

from __future__ import annotations

import subprocess
import sys

from repo_paths import PYTHON_DIR

EXAMPLES = PYTHON_DIR / "examples"


def test_resumed_training_matches_an_uninterrupted_run_bit_for_bit() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "resume_training.py")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("losses match bit for bit")
    assert done.stdout.count("step ") == 10


def test_the_demo_resumes_a_run_killed_with_sigkill_and_catches_a_flipped_bit() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "demo.py")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with SIGKILL after step" in done.stdout
    assert "losses match the uninterrupted run bit for bit" in done.stdout
    assert "\nOK: " in done.stdout
    assert "\nINTEGRITY: " in done.stdout  # the corrupted copy, refused by ocf verify
    assert done.stdout.rstrip().endswith("every step behaved as expected")
