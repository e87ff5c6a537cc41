"""ocf.testing.AdapterTests over ocf.jax, with real JAX (CPU).

JAX arrays are immutable: a restore returns a new tree shaped like its
target. Without ``jax_enable_x64`` (the default, kept here) JAX holds no
64-bit values, so ocf.jax.load_file refuses them rather than truncating them.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

from collections.abc import Collection
from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")

import jax
from adapter_contract import ProjectAdapterTests

import ocf
import ocf.jax
import ocf.numpy
from ocf.format.dtypes import BY_NAME
from ocf.testing import ALL_DTYPES


class TestJaxAdapter(ProjectAdapterTests):
    module = ocf.jax
    float16 = jax.numpy.float16

    def dtypes(self) -> Collection[str]:
        return {name for name in ALL_DTYPES - {"bytes"}
                if jax.dtypes.canonicalize_dtype(BY_NAME[name].numpy) == BY_NAME[name].numpy}

    def tensor(self, array: np.ndarray) -> Any:
        return jax.numpy.asarray(array)

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return np.asarray(tensor)

    def is_tensor(self, value: object) -> bool:
        return isinstance(value, jax.Array)

    def restored(self, result: Any, target: Any) -> Any:
        return result


def test_a_64_bit_value_is_refused_naming_the_stored_dtype_and_the_lossy_cast(
        tmp_path: Any) -> None:
    path = tmp_path / "wide.ocf"
    ocf.numpy.save_file({"w": np.arange(3, dtype=np.int64)}, path)
    with pytest.raises(ocf.InvalidError, match=r"the checkpoint holds int64.*loses what"):
        ocf.jax.load_file(path)


def test_a_64_bit_dtype_asked_for_is_refused_naming_the_request_not_the_file(
        tmp_path: Any) -> None:
    path = tmp_path / "narrow.ocf"
    ocf.numpy.save_file({"w": np.arange(3, dtype=np.float32)}, path)
    with pytest.raises(ocf.InvalidError, match="dtype=float64 was asked for"):
        ocf.jax.load_file(path, dtype=np.float64)
