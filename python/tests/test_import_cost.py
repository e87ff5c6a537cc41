"""``import ocf`` loads no framework and no ml_dtypes: they load when first used.

The import time itself is measured by the benchmark (a time is never a test
here); what a test can pin down exactly is which modules a bare import loads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

import ocf

NOT_AT_IMPORT = ("ml_dtypes", "torch", "jax", "tensorflow", "keras", "safetensors", "fsspec",
                 "s3fs")


def loaded_by(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {NOT_AT_IMPORT!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


def test_import_ocf_loads_no_framework_and_no_ml_dtypes() -> None:
    assert loaded_by("import ocf") == []


def test_reading_and_writing_common_dtypes_does_not_load_ml_dtypes() -> None:
    code = ("import ocf, numpy as np, tempfile, os\n"
            "p = os.path.join(tempfile.mkdtemp(), 'a.ocf')\n"
            "ocf.save_file({'w': np.ones(3, np.float32)}, p)\n"
            "assert ocf.load_file(p)['w'].tolist() == [1.0] * 3")
    assert loaded_by(code) == []


def test_an_ml_dtypes_array_still_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "b.ocf"
    values = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    ocf.save_file({"b": values}, path)
    loaded = ocf.load_file(path)["b"]
    assert loaded.dtype == ml_dtypes.bfloat16
    assert loaded.tolist() == values.tolist()
