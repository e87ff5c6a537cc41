"""Whether a stored tensor fits the live object it restores into: shapes and the dtype policy.

Every restore into objects (by structure or by name, in every adapter)
checks each stored tensor's shape and dtype, from the index alone, against
what its object expects (``ocf_expected_tensors``) before any value is
handed over, so that a mismatch anywhere leaves every object as it was.

The dtype policy is the same everywhere: a stored dtype other than the
expected one is an error unless the caller asked for ``cast=True``; then
the value is cast to the expected dtype once read (float32 into a float16
model, as ``torch.load_state_dict`` would silently do).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.source import TensorView
from ocf.objects.tracking import Expected


def fitted_dtype(stored: TensorView, expected: Expected, *, cast: bool, key: str,
                 path: str) -> np.dtype[Any] | None:
    """The dtype to cast the value to (None: keep it as read); INVALID naming the
    key and file when the shapes differ, or the dtypes do and ``cast`` is False."""
    shape, dtype, what = expected
    if tuple(stored.shape) != tuple(shape):
        raise InvalidError(f"cannot restore a tensor of shape {list(stored.shape)} into a "
                           f"{what} of shape {list(shape)}", path=path, key=key)
    if stored.dtype.numpy is None or dtype.kind == "O" or stored.dtype.numpy == dtype:
        return None
    if not cast:
        raise InvalidError(f"the checkpoint holds {stored.dtype.name}, the {what} is "
                           f"{dtype.name}: restore(..., cast=True) casts", path=path, key=key)
    return dtype


def cast_values(values: dict[str, np.ndarray], casts: dict[str, np.dtype[Any] | None]
                ) -> dict[str, np.ndarray]:
    """``values`` with each value cast to its dtype in ``casts``, where there is one."""
    for name, dtype in casts.items():
        if dtype is not None and name in values:
            values[name] = values[name].astype(dtype)
    return values
