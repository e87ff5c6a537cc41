"""PyTorch tensors to NumPy arrays and back, bit for bit and without copies.

Every torch dtype with an OCF counterpart converts: the NumPy kinds
directly (``Tensor.numpy`` / ``torch.from_numpy`` share memory), bfloat16
and the two float8 kinds through an integer of the same width, since NumPy
knows them only through ml_dtypes. Other dtypes (complex32, the float8
"fnuz" kinds, quantized types) have no OCF dtype and are refused by name.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from ocf.format import dtypes
from ocf.format.errors import InvalidError
from ocf.torch._framework import torch

# torch dtype -> the OCF dtype name that stores it exactly [R-DTYPE-001].
TORCH_TO_OCF: dict[torch.dtype, str] = {
    torch.bool: "bool",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}
OCF_TO_TORCH: dict[str, torch.dtype] = {name: dtype for dtype, name in TORCH_TO_OCF.items()}

# dtypes NumPy holds only through ml_dtypes: the integer of the same width that
# carries their bits between torch and NumPy.
_CARRIERS: dict[torch.dtype, tuple[torch.dtype, np.dtype[np.generic]]] = {
    torch.bfloat16: (torch.int16, np.dtype(ml_dtypes.bfloat16)),
    torch.float8_e4m3fn: (torch.uint8, np.dtype(ml_dtypes.float8_e4m3fn)),
    torch.float8_e5m2: (torch.uint8, np.dtype(ml_dtypes.float8_e5m2)),
}
_NUMPY_CARRIERS: dict[np.dtype[np.generic], torch.dtype] = {
    numpy_dtype: dtype for dtype, (_, numpy_dtype) in _CARRIERS.items()
}


def ocf_dtype(dtype: torch.dtype, key: str | None = None) -> dtypes.Dtype:
    """The OCF dtype row storing ``dtype``; InvalidError naming both when there is none."""
    name = TORCH_TO_OCF.get(dtype)
    if name is None:
        raise InvalidError(f"torch dtype {dtype} has no OCF counterpart; storable torch dtypes: "
                           + ", ".join(str(d) for d in TORCH_TO_OCF),
                           key=key, requirement="R-DTYPE-001")
    return dtypes.BY_NAME[name]


def torch_dtype(dtype: dtypes.Dtype, key: str | None = None) -> torch.dtype:
    """The torch dtype of a stored OCF dtype; byte strings have none."""
    found = OCF_TO_TORCH.get(dtype.name)
    if found is None:
        raise InvalidError(f"OCF dtype {dtype.name} has no torch counterpart; read it with "
                           "ocf.load_file or ocf.open instead", key=key)
    return found


def is_uninitialized(tensor: object) -> bool:
    """Whether ``tensor`` is a lazy module's parameter or buffer not materialised yet."""
    return isinstance(tensor, (UninitializedParameter, UninitializedBuffer))


def to_numpy(tensor: torch.Tensor, key: str | None = None) -> np.ndarray:
    """The values of ``tensor`` as a NumPy array of the matching OCF dtype.

    A CPU tensor is viewed, not copied; a tensor on another device is
    copied to the CPU first, and one with a lazy conjugate or negative bit
    (``x.conj()``) is resolved, which copies too.

    Examples:
        >>> array = ocf.torch.to_numpy(torch.ones(2, 3, dtype=torch.bfloat16))
    """
    if is_uninitialized(tensor):
        raise InvalidError("a lazy module's parameter that is not materialised yet has no "
                           "values to save; run a forward pass first", key=key)
    if tensor.layout != torch.strided:
        raise InvalidError(f"{tensor.layout} tensors are not storable; convert to dense "
                           "(tensor.to_dense()) first", key=key)
    ocf_dtype(tensor.dtype, key)
    if tensor.device.type == "meta":
        raise InvalidError("a tensor on the meta device has no values to save", key=key)
    plain = tensor.detach().cpu().resolve_conj().resolve_neg()
    carrier = _CARRIERS.get(plain.dtype)
    if carrier is None:
        array: np.ndarray = plain.numpy()
        return array
    integer, numpy_dtype = carrier
    return plain.view(integer).numpy().view(numpy_dtype)


def from_numpy(array: np.ndarray, key: str | None = None) -> torch.Tensor:
    """A CPU tensor holding ``array``'s values, sharing its memory when it can.

    The memory is shared when ``array`` is writable, native-endian and has
    no negative strides; otherwise the values are copied, since a torch
    tensor cannot be read-only (a write would crash on read-only memory).

    Examples:
        >>> tensor = ocf.torch.from_numpy(np.ones((2, 3), np.float32))
    """
    dtype = dtypes.for_array(array)
    if dtype.is_bytes:
        raise InvalidError("byte-string tensors have no torch counterpart; read them with "
                           "ocf.load_file or ocf.open instead", key=key)
    if not array.flags.writeable or any(s < 0 for s in array.strides) or \
            not array.dtype.isnative:
        array = np.array(array, dtype=array.dtype.newbyteorder("="), order="C")
    carried = _NUMPY_CARRIERS.get(array.dtype)
    if carried is None:
        return torch.from_numpy(array)
    integer, _ = _CARRIERS[carried]
    integer_numpy = np.dtype(str(integer).removeprefix("torch."))
    return torch.from_numpy(array.view(integer_numpy)).view(carried)
