"""ocf.testing.SourceTests over every format ocf.open reads.

Each checkpoint is written by its format's own writer: OCF by ocf.save_file
(a file, and a zstd-compressed directory), safetensors by the safetensors
package, npz by NumPy, and a TensorFlow bundle by ocf.tensorflow.BundleWriter
(whose files TensorFlow itself reads back in test_tf_bundle_writing.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

import ocf
from ocf.testing import SourceTests


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
        from safetensors.numpy import save_file

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
