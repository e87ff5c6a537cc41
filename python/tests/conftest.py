"""Shared fixtures."""

from __future__ import annotations

import numpy as np
import pytest
from samples import every_dtype


@pytest.fixture
def arrays() -> dict[str, np.ndarray]:
    return every_dtype()
