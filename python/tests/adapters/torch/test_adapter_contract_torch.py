"""ocf.testing.AdapterTests over ocf.torch, with real PyTorch (CPU)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import torch
from adapter_contract import ProjectAdapterTests

import ocf.torch
from ocf.testing import ALL_DTYPES


class TestTorchAdapter(ProjectAdapterTests):
    module = ocf.torch
    float16 = torch.float16

    def dtypes(self) -> Collection[str]:
        return ALL_DTYPES - {"bytes"}  # torch has no byte-string tensors

    def tensor(self, array: np.ndarray) -> Any:
        return ocf.torch.from_numpy(array.copy())

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return ocf.torch.to_numpy(tensor, "")

    def is_tensor(self, value: object) -> bool:
        return isinstance(value, torch.Tensor)
