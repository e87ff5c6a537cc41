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

import ocf.jax
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
