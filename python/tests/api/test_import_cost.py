"""``import ocf`` and ``ocf --version`` load no dependency: each loads when first used.

The import time itself is measured by the benchmark (bench_io.py, workload W8; a time
is never a test here); what a test can pin down exactly is which modules a
bare import loads.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ocf

FRAMEWORKS = ("torch", "jax", "tensorflow", "keras", "safetensors", "fsspec", "s3fs")
DEPENDENCIES = ("numpy", "google.protobuf", "zstandard", "crc32c", "ml_dtypes")


def imported_modules(*arguments: str) -> set[str]:
    """The modules a fresh interpreter run with ``arguments`` imports (by -X importtime),
    beyond those its start-up imports (site, .pth files) when it runs nothing."""
    def imported(arguments: tuple[str, ...]) -> set[str]:
        done = subprocess.run([sys.executable, "-X", "importtime", *arguments],
                              capture_output=True, text=True, check=True)
        lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
        return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # [0] is the header
    return imported(arguments) - imported(("-c", "pass"))


def test_import_ocf_loads_no_framework_and_no_dependency() -> None:
    loaded = imported_modules("-c", "import ocf")
    assert loaded.isdisjoint(FRAMEWORKS + DEPENDENCIES), sorted(loaded)
    assert {m for m in loaded if m.startswith("ocf")} == {"ocf", "ocf._version"}
    assert "typing" not in loaded  # nor the standard library's heavier modules


def test_ocf_version_loads_no_framework_and_no_dependency() -> None:
    done = subprocess.run([sys.executable, "-m", "ocf", "--version"],
                          capture_output=True, text=True, check=True)
    assert done.stdout == f"ocf {ocf.__version__}\n"
    loaded = imported_modules("-m", "ocf", "--version")
    assert loaded.isdisjoint(FRAMEWORKS + DEPENDENCIES), sorted(loaded)


def test_reading_and_writing_uncompressed_common_dtypes_loads_no_zstandard_nor_ml_dtypes(
) -> None:
    code = ("import ocf, numpy as np, tempfile, os\n"
            "p = os.path.join(tempfile.mkdtemp(), 'a.ocf')\n"
            "ocf.save_file({'w': np.ones(3, np.float32)}, p)\n"
            "assert ocf.load_file(p)['w'].tolist() == [1.0] * 3")
    loaded = imported_modules("-c", code)
    assert "numpy" in loaded  # the probe itself works
    assert loaded.isdisjoint((*FRAMEWORKS, "zstandard", "ml_dtypes")), sorted(loaded)


def test_a_compressed_round_trip_loads_zstandard_when_first_needed(tmp_path: Path) -> None:
    values = np.arange(1000, dtype=np.float32)
    ocf.save_file({"w": values}, tmp_path / "z.ocf", compression="zstd")
    with ocf.open(tmp_path / "z.ocf") as reader:
        assert reader["w"].codec_name == "zstd"
        assert np.array_equal(reader.get_tensor("w"), values)


def test_an_ml_dtypes_array_still_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "b.ocf"
    values = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    ocf.save_file({"b": values}, path)
    loaded = ocf.load_file(path)["b"]
    assert loaded.dtype == ml_dtypes.bfloat16
    assert loaded.tolist() == values.tolist()


def test_every_public_name_is_the_object_its_module_defines() -> None:
    for name, module in ocf._PUBLIC_MODULES.items():
        assert getattr(ocf, name) is getattr(importlib.import_module(module), name), name
    assert set(ocf.__all__) == {"__version__", *ocf._PUBLIC_MODULES}
    assert set(ocf.__all__) <= set(dir(ocf))


def test_the_subpackages_import_ocf_used_to_load_are_still_attributes() -> None:
    code = "import ocf\nassert ocf.numpy.save_file is ocf.save_file and ocf.tensorflow.BundleReader"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'sav_file'"):
        ocf.sav_file  # noqa: B018
    assert not hasattr(ocf, "torch_")
