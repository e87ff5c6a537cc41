"""The dtype table of spec/format.md, "Data types" [R-DTYPE-001].

Maps each ``ocf.v1.DType`` value to the little-endian NumPy dtype holding
its bytes (bfloat16 and float8 come from ml_dtypes) and back. DTYPE_BYTES
has no fixed item size: its tensors are NumPy object arrays of ``bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ocf.format.errors import InvalidError
from ocf.v1 import tensor_pb2


@dataclass(frozen=True)
class Dtype:
    """One row of the dtype table."""

    code: tensor_pb2.Dtype
    name: str
    numpy: np.dtype[np.generic] | None  # None for variable-length byte strings

    @property
    def itemsize(self) -> int:
        """Bytes per element; 0 for variable-length byte strings."""
        return 0 if self.numpy is None else self.numpy.itemsize

    @property
    def is_bytes(self) -> bool:
        return self.numpy is None


def _row(code: tensor_pb2.Dtype, name: str, numpy_dtype: type[np.generic] | None) -> Dtype:
    dtype = None if numpy_dtype is None else np.dtype(numpy_dtype).newbyteorder("<")
    return Dtype(code, name, dtype)


_D = tensor_pb2
TABLE: tuple[Dtype, ...] = (
    _row(_D.DTYPE_BOOL, "bool", np.bool_),
    _row(_D.DTYPE_INT8, "int8", np.int8),
    _row(_D.DTYPE_INT16, "int16", np.int16),
    _row(_D.DTYPE_INT32, "int32", np.int32),
    _row(_D.DTYPE_INT64, "int64", np.int64),
    _row(_D.DTYPE_UINT8, "uint8", np.uint8),
    _row(_D.DTYPE_UINT16, "uint16", np.uint16),
    _row(_D.DTYPE_UINT32, "uint32", np.uint32),
    _row(_D.DTYPE_UINT64, "uint64", np.uint64),
    _row(_D.DTYPE_FLOAT16, "float16", np.float16),
    _row(_D.DTYPE_BFLOAT16, "bfloat16", ml_dtypes.bfloat16),
    _row(_D.DTYPE_FLOAT32, "float32", np.float32),
    _row(_D.DTYPE_FLOAT64, "float64", np.float64),
    _row(_D.DTYPE_COMPLEX64, "complex64", np.complex64),
    _row(_D.DTYPE_COMPLEX128, "complex128", np.complex128),
    _row(_D.DTYPE_FLOAT8_E4M3FN, "float8_e4m3fn", ml_dtypes.float8_e4m3fn),
    _row(_D.DTYPE_FLOAT8_E5M2, "float8_e5m2", ml_dtypes.float8_e5m2),
    _row(_D.DTYPE_BYTES, "bytes", None),
)

BY_CODE: dict[int, Dtype] = {row.code: row for row in TABLE}
BY_NAME: dict[str, Dtype] = {row.name: row for row in TABLE}
_BY_NUMPY: dict[np.dtype[np.generic], Dtype] = {
    row.numpy: row for row in TABLE if row.numpy is not None
}
BYTES = BY_NAME["bytes"]


def from_code(code: int) -> Dtype | None:
    """The table row of a stored dtype value, or None when it is not defined."""
    return BY_CODE.get(code)


def for_array(array: np.ndarray) -> Dtype:
    """The OCF dtype that stores ``array`` exactly, or InvalidError if none does."""
    dtype = array.dtype
    if dtype.kind in "OS":
        return BYTES
    row = _BY_NUMPY.get(dtype) or _BY_NUMPY.get(dtype.newbyteorder("<"))
    if row is None:
        raise InvalidError(
            f"NumPy dtype {dtype} has no OCF equivalent; supported: "
            + ", ".join(r.name for r in TABLE),
            requirement="R-DTYPE-001",
        )
    return row
