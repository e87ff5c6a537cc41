"""ocf.testing.AdapterTests over ocf.keras, with real Keras 3 in this process.

Keras fixes its backend when it is first imported: KERAS_BACKEND if set,
else JAX, torch or TensorFlow, the first one installed (for this import
only; other tests' processes choose their own). States hold
``keras.Variable`` objects, restored in place; what the backend cannot
hold (64 bits on JAX without x64, float8 on torch, ...) is left out of the
round trips and must be refused by ocf.keras.load_file.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@contextmanager
def backend_chosen() -> Iterator[None]:
    """KERAS_BACKEND set for Keras' first import, and the environment as it was after."""
    if "KERAS_BACKEND" in os.environ:
        yield
        return
    installed = [name for name in ("jax", "torch", "tensorflow")
                 if importlib.util.find_spec(name) is not None]
    os.environ["KERAS_BACKEND"] = installed[0] if installed else "tensorflow"
    try:
        yield
    finally:
        del os.environ["KERAS_BACKEND"]


os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported
with backend_chosen():
    keras = pytest.importorskip("keras")

# After Keras' first import, which fixes the backend ocf.keras then uses:
from adapter_contract import ProjectAdapterTests  # noqa: E402

import ocf  # noqa: E402
import ocf.keras  # noqa: E402
from ocf.format.dtypes import BY_NAME  # noqa: E402
from ocf.testing import ALL_DTYPES  # noqa: E402


def backend_holds(name: str) -> bool:
    """Whether the Keras backend makes a tensor of OCF dtype ``name`` as it is."""
    try:
        tensor = keras.ops.convert_to_tensor(np.zeros(2, BY_NAME[name].numpy))
    except (TypeError, ValueError):
        return False
    return bool(keras.backend.standardize_dtype(tensor.dtype) == name)


class TestKerasAdapter(ProjectAdapterTests):
    module = ocf.keras
    float16 = "float16"

    def dtypes(self) -> Collection[str]:
        return {name for name in ALL_DTYPES - {"bytes"} if backend_holds(name)}

    def tensor(self, array: np.ndarray) -> Any:
        return keras.ops.convert_to_tensor(array)

    def leaf(self, array: np.ndarray) -> Any:
        return keras.Variable(array, trainable=array.dtype.kind in "fc")

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return np.asarray(keras.ops.convert_to_numpy(tensor))

    def is_tensor(self, value: object) -> bool:
        return bool(keras.ops.is_tensor(value))

    def process_environment(self) -> Mapping[str, str]:
        return {"KERAS_BACKEND": keras.backend.backend()}

    def test_save_file_writes_keras_variables_as_their_values(self, tmp_path: Path) -> None:
        variable = keras.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
        ocf.keras.save_file({"variable": variable}, tmp_path / "flat.ocf", {"epoch": 3})
        with ocf.open(tmp_path / "flat.ocf") as reader:  # the reference reader
            np.testing.assert_array_equal(reader.read_tensor("variable"),
                                          np.arange(6, dtype=np.float32).reshape(2, 3))
            assert reader.metadata == {"epoch": 3}
