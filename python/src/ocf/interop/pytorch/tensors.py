"""torch tensors to NumPy arrays and back, by the dtype names both share.

OCF's dtype names are PyTorch's (``float32``, ``bfloat16``,
``float8_e4m3fn``, ...), so a torch dtype maps to the OCF row of the same
name; one OCF lacks (``complex32``, ``float8_e4m3fnuz``, quantized types)
has none. Values move as bytes: the tensor is viewed as ``uint8`` and the
NumPy array as the row's dtype, which also serves bfloat16 and float8,
which NumPy has only through ml_dtypes. ``torch`` is passed in: this module
never imports it (ocf.interop.pytorch.torch_needed does, on first use).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError


def ocf_dtype(torch_dtype: Any) -> dtypes.Dtype | None:
    """The OCF dtype of a ``torch.dtype``; None when OCF has no such dtype."""
    row = dtypes.BY_NAME.get(str(torch_dtype).removeprefix("torch."))
    return None if row is None or row.is_bytes else row


def unreadable_reason(torch: ModuleType, tensor: Any) -> str | None:
    """Why ``tensor`` cannot be read as an OCF array (None if it can): a sparse,
    quantized, nested or meta tensor, or a dtype OCF lacks."""
    if tensor.layout != torch.strided or tensor.is_nested:
        return f"a tensor of layout {tensor.layout} (only dense tensors are read)"
    if tensor.is_quantized:
        return f"a quantized tensor ({tensor.dtype}; only plain dtypes are read)"
    if tensor.device.type != "cpu":
        return f"a tensor on device {tensor.device} (only CPU tensors are read)"
    if ocf_dtype(tensor.dtype) is None:
        return f"a tensor of dtype {tensor.dtype}, which OCF has no dtype for"
    held = tensor.untyped_storage().nbytes()
    if tensor.numel() * tensor.element_size() > held:  # strides of 0: an expanded view
        return (f"a view of {tensor.numel()} elements over {held} bytes of storage (reading it "
                "would take memory the file does not hold)")
    return None


def to_numpy(torch: ModuleType, tensor: Any) -> np.ndarray:
    """A new C-ordered little-endian array holding ``tensor``, a dense CPU tensor of a
    dtype :func:`ocf_dtype` maps."""
    row = ocf_dtype(tensor.dtype)
    assert row is not None, tensor.dtype
    assert row.numpy is not None, tensor.dtype
    if tensor.numel() == 0:  # no bytes to view (and torch refuses a view of none)
        return np.empty(tuple(tensor.shape), row.numpy)
    flat = tensor.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy()  # the tensor's own bytes: copied below
    array: np.ndarray = raw.view(row.numpy).reshape(tuple(tensor.shape)).copy()
    return array


def from_numpy(torch: ModuleType, array: np.ndarray) -> Any:
    """A torch tensor holding a copy of ``array``; InvalidError when torch lacks its dtype."""
    name = dtypes.for_array(array).name
    torch_dtype = getattr(torch, name, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise InvalidError(f"this torch ({torch.__version__}) has no dtype {name}")
    if array.size == 0:
        return torch.empty(array.shape, dtype=torch_dtype)
    flat = np.ascontiguousarray(array).reshape(-1)
    raw = torch.from_numpy(flat.view(np.uint8).copy())
    return raw.view(torch_dtype).reshape(array.shape)
