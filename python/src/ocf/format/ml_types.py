"""The NumPy types of ml_dtypes (bfloat16, the float8s, sub-byte integers), loaded on first use.

ml_dtypes' extension takes about half a second to load, more than the rest
of ``import ocf`` together; most programs never meet these types, and those
that do (an array of bfloat16 exists) have loaded it already. Tables name
such types by their ml_dtypes attribute name and resolve them here.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np


@functools.cache
def ml_type(name: str) -> type[np.generic]:
    """The ml_dtypes scalar type called ``name`` ("bfloat16"), importing ml_dtypes once."""
    kind: type[np.generic] = getattr(importlib.import_module("ml_dtypes"), name)
    return kind


def as_numpy(kind: type[np.generic] | str) -> np.dtype[np.generic]:
    """The little-endian NumPy dtype of a NumPy type, or of an ml_dtypes type by name."""
    dtype: np.dtype[np.generic] = np.dtype(ml_type(kind) if isinstance(kind, str) else kind)
    little: np.dtype[np.generic] = dtype.newbyteorder("<")
    return little
