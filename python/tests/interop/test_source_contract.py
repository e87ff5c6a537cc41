"""ocf.testing.SourceTests over every format ocf.open reads.

Each checkpoint is written by its format's own writer: OCF by ocf.save_file
(a file, and a zstd-compressed directory), safetensors by the safetensors
package, npz by NumPy, a GGUF file by the gguf package, a sharded safetensors
model by huggingface_hub, an Orbax checkpoint by orbax-checkpoint, and a
TensorFlow bundle by ocf.tensorflow.BundleWriter
(whose files TensorFlow itself reads back in test_tf_bundle_writing.py).
The example in ocf.open's docstring runs on each of them.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

import ocf
from ocf.testing import SourceTests, sample_tensors


class TestOCFFile(SourceTests):
    format_name = "OCF"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        path = directory / "model.ocf"
        ocf.save_file(tensors, path, metadata={"epoch": 3})
        return path


class TestOCFDirectory(SourceTests):
    format_name = "OCF"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        path = directory / "ckpt"
        ocf.save_file(tensors, path, layout="directory", compression="zstd", chunk_size=4096)
        return path


class TestSafetensors(SourceTests):
    format_name = "safetensors"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        save_file = pytest.importorskip("safetensors.numpy").save_file
        path = directory / "model.safetensors"
        save_file(dict(tensors), str(path), metadata={"note": "written by safetensors"})
        return path


class TestNpz(SourceTests):
    format_name = "npz"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        path = directory / "model.npz"
        np.savez_compressed(path, **tensors)
        return path


class TestTensorFlowBundle(SourceTests):
    format_name = "TensorFlow"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        prefix = directory / "ckpt-1"
        with ocf.tensorflow.BundleWriter(str(prefix)) as bundle:
            for key, value in tensors.items():
                bundle.add(key, value)
        return prefix


class TestGGUF(SourceTests):
    format_name = "GGUF"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        pytest.importorskip("gguf")
        from foreign_files import write_with_gguf

        return write_with_gguf(directory / "model.gguf", tensors)


class TestShardedSafetensors(SourceTests):
    format_name = "sharded-safetensors"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        pytest.importorskip("huggingface_hub")
        pytest.importorskip("torch")
        from foreign_files import write_sharded

        return write_sharded(directory / "model", tensors, max_shard_size=100)


class TestOrbax(SourceTests):
    format_name = "Orbax"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        pytest.importorskip("orbax.checkpoint")
        from foreign_files import nested, write_orbax

        return write_orbax(directory / "ckpt", nested(tensors))


def _open_example() -> str:
    """The Examples code of ocf.open's docstring, prompts removed."""
    doc = inspect.getdoc(ocf.open)
    assert doc is not None
    lines = [line.strip() for line in doc.split("Examples:")[1].splitlines()]
    code = [re.sub(r"^(>>> |\.\.\. ?)", "", line) for line in lines
            if line.startswith((">>>", "..."))]
    return textwrap.dedent("\n".join(code))


WRITERS = (TestOCFFile, TestOCFDirectory, TestSafetensors, TestNpz, TestTensorFlowBundle,
           TestGGUF, TestShardedSafetensors, TestOrbax)


@pytest.mark.parametrize("writer", WRITERS, ids=[w.__name__ for w in WRITERS])
def test_the_example_of_ocf_open_runs_on_every_format(tmp_path: Path,
                                                      writer: type[SourceTests],
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    path = writer().write(sample_tensors(), tmp_path)
    code = _open_example()
    assert '"model.ocf"' in code
    namespace: dict[str, object] = {"ocf": ocf, "np": np}
    exec(code.replace('"model.ocf"', repr(str(path))), namespace)
    assert capsys.readouterr().out == "int64 ()\n"  # print(checkpoint["step"].dtype.name, ...)
    assert namespace["step"] == 42
    np.testing.assert_array_equal(namespace["rows"], sample_tensors()["dense/kernel"][:2])
