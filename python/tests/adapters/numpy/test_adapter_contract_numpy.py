"""ocf.testing.AdapterTests over ocf.numpy, the adapter every other one mirrors."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from adapter_contract import ProjectAdapterTests

import ocf.numpy
from ocf.testing import ALL_DTYPES


class TestNumpyAdapter(ProjectAdapterTests):
    module = ocf.numpy
    float16 = np.float16

    def dtypes(self) -> Collection[str]:
        return ALL_DTYPES

    def tensor(self, array: np.ndarray) -> np.ndarray:
        return array.copy()

    def to_numpy(self, tensor: np.ndarray) -> np.ndarray:
        return tensor

    def is_tensor(self, value: object) -> bool:
        return isinstance(value, np.ndarray)
