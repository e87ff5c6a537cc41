"""``ocf inspect`` says what it did not check (issue 24).

Inspect reads the index, not the tensor bytes; a flipped data bit goes
unnoticed there, so the summary's last line says the data was not read and
names ``ocf verify``, which finds the damage. When it prints values
(``--tensor``, ``--all``, ``--stats``) it reads and checks them, and stdout
holds only the data asked for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cli_support import run
from helpers import corrupt_tensor

import ocf


def damaged(tmp_path: Path) -> Path:
    path = tmp_path / "model.ocf"
    ocf.save_file({"w": np.arange(1000, dtype=np.float32), "b": np.ones(4)}, path)
    corrupt_tensor(path, "w")
    return path


def test_inspect_says_it_did_not_read_the_data_and_how_to_verify(tmp_path: Path) -> None:
    path = damaged(tmp_path)
    done = run("inspect", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"data: tensor bytes not read, checksums not checked; `ocf verify {path}` reads "
        "and checks every byte")
    verified = run("verify", str(path))
    assert verified.returncode == 1
    assert verified.stderr.startswith(f"INTEGRITY: {path}")


def test_inspect_printing_values_checks_them_and_prints_only_them(tmp_path: Path) -> None:
    path = damaged(tmp_path)
    fine = run("inspect", str(path), "--tensor", "b")
    assert fine.returncode == 0, fine.stderr
    assert fine.stdout.splitlines() == ["tensor_name: b", "[1. 1. 1. 1.]"]
    assert fine.stderr == ""
    broken = run("inspect", str(path), "--tensor", "w")
    assert broken.returncode == 1
    assert broken.stderr.startswith("INTEGRITY: ")
    assert run("inspect", str(path), "--tensor", "w", "--no-verify").returncode == 0
