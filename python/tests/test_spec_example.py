"""The spec's worked example, built byte by byte without the reference writer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import ocf

EXAMPLES = Path(__file__).resolve().parents[2] / "spec" / "examples"


def test_reference_reader_reads_the_spec_example() -> None:
    with ocf.open(EXAMPLES / "minimal.ocf") as reader:
        assert reader.format_version == (1, 0)
        assert reader.metadata == {"step": 7}
        tensor = reader.get_tensor("w")
    assert tensor.dtype == np.float32
    assert tensor.tolist() == [1.0, -2.0]


def test_spec_example_script_rebuilds_the_committed_file(tmp_path: Path) -> None:
    committed = (EXAMPLES / "minimal.ocf").read_bytes()
    subprocess.run([sys.executable, str(EXAMPLES / "make_minimal.py")], check=True,
                   cwd=tmp_path, capture_output=True)
    assert (EXAMPLES / "minimal.ocf").read_bytes() == committed
