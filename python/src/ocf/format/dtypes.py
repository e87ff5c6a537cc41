"""The dtype table of spec/format.md, "Data types" [R-DTYPE-001].

Maps each ``ocf.v1.DType`` value to the little-endian NumPy dtype holding
its bytes (bfloat16 and float8 come from ml_dtypes, loaded only when one is
used: :mod:`ocf.format.ml_types`) and back. DTYPE_BYTES has no fixed item
size: its tensors are NumPy object arrays of ``bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.ml_types import as_numpy
from ocf.v1 import tensor_pb2


@dataclass(frozen=True)
class Dtype:
    """One row of the dtype table."""

    code: tensor_pb2.Dtype
    name: str
    # The NumPy type holding the bytes, the name of an ml_dtypes type, or None for
    # variable-length byte strings.
    kind: type[np.generic] | str | None
    itemsize: int  # bytes per element; 0 for variable-length byte strings

    @property
    def numpy(self) -> np.dtype[np.generic] | None:
        """The little-endian NumPy dtype (None for byte strings); an ml_dtypes type is
        loaded on first use."""
        if self.kind is None:
            return None
        dtype = _NUMPY.get(self.kind)
        if dtype is None:
            dtype = _NUMPY[self.kind] = as_numpy(self.kind)
        return dtype

    @property
    def is_bytes(self) -> bool:
        return self.kind is None

    def __str__(self) -> str:
        return self.name  # what messages and tables show


# The NumPy dtype of each kind, once made.
_NUMPY: dict[type[np.generic] | str, np.dtype[np.generic]] = {}


_D = tensor_pb2
TABLE: tuple[Dtype, ...] = (
    Dtype(_D.DTYPE_BOOL, "bool", np.bool_, 1),
    Dtype(_D.DTYPE_INT8, "int8", np.int8, 1),
    Dtype(_D.DTYPE_INT16, "int16", np.int16, 2),
    Dtype(_D.DTYPE_INT32, "int32", np.int32, 4),
    Dtype(_D.DTYPE_INT64, "int64", np.int64, 8),
    Dtype(_D.DTYPE_UINT8, "uint8", np.uint8, 1),
    Dtype(_D.DTYPE_UINT16, "uint16", np.uint16, 2),
    Dtype(_D.DTYPE_UINT32, "uint32", np.uint32, 4),
    Dtype(_D.DTYPE_UINT64, "uint64", np.uint64, 8),
    Dtype(_D.DTYPE_FLOAT16, "float16", np.float16, 2),
    Dtype(_D.DTYPE_BFLOAT16, "bfloat16", "bfloat16", 2),
    Dtype(_D.DTYPE_FLOAT32, "float32", np.float32, 4),
    Dtype(_D.DTYPE_FLOAT64, "float64", np.float64, 8),
    Dtype(_D.DTYPE_COMPLEX64, "complex64", np.complex64, 8),
    Dtype(_D.DTYPE_COMPLEX128, "complex128", np.complex128, 16),
    Dtype(_D.DTYPE_FLOAT8_E4M3FN, "float8_e4m3fn", "float8_e4m3fn", 1),
    Dtype(_D.DTYPE_FLOAT8_E5M2, "float8_e5m2", "float8_e5m2", 1),
    Dtype(_D.DTYPE_BYTES, "bytes", None, 0),
)

BY_CODE: dict[int, Dtype] = {row.code: row for row in TABLE}
BY_NAME: dict[str, Dtype] = {row.name: row for row in TABLE}
# NumPy's own types only: looking up an ml_dtypes type (for_array) must not load it.
_BY_NUMPY: dict[np.dtype[np.generic], Dtype] = {
    as_numpy(row.kind): row for row in TABLE if isinstance(row.kind, type)
}
BYTES = BY_NAME["bytes"]


def foreign(name: str, numpy: np.dtype[np.generic] | None) -> Dtype:
    """A dtype another format has and OCF lacks (TensorFlow's qint8, int4, ...): its
    name there and the NumPy dtype its values are read as (None: not readable as an
    array); its code is DTYPE_UNSPECIFIED, as no OCF checkpoint stores it."""
    if numpy is None:
        return Dtype(tensor_pb2.DTYPE_UNSPECIFIED, name, None, 0)
    return Dtype(tensor_pb2.DTYPE_UNSPECIFIED, name, numpy.type, numpy.itemsize)


def from_code(code: int) -> Dtype | None:
    """The table row of a stored dtype value, or None when it is not defined."""
    return BY_CODE.get(code)


def _ml_row(dtype: np.dtype[np.generic]) -> Dtype | None:
    """The row of an ml_dtypes dtype (its array exists, so ml_dtypes is loaded)."""
    row = BY_NAME.get(dtype.name)
    if row is None or not isinstance(row.kind, str) or dtype != row.numpy:
        return None
    return row


def for_array(array: np.ndarray) -> Dtype:
    """The OCF dtype that stores ``array`` exactly, or InvalidError if none does."""
    dtype = array.dtype
    if dtype.kind in "OS":
        return BYTES
    row = _BY_NUMPY.get(dtype) or _BY_NUMPY.get(dtype.newbyteorder("<")) or _ml_row(dtype)
    if row is None:
        raise InvalidError(
            f"NumPy dtype {dtype} has no OCF equivalent; supported: "
            + ", ".join(r.name for r in TABLE),
            requirement="R-DTYPE-001",
        )
    return row
