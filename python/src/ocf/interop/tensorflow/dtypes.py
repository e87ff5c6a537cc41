"""TensorFlow's ``DataType`` values and the NumPy dtypes that hold their bytes.

Every fixed-width type TensorFlow stores in a bundle maps to the NumPy dtype
that TensorFlow's own reader (``tf.train.load_checkpoint(...).get_tensor``)
returns for it, holding the stored bytes unchanged:

- bfloat16, the float8 variants, and the sub-byte types int4, uint4, int2,
  uint2 and float4_e2m1fn come from ml_dtypes. TensorFlow stores a sub-byte
  element in one byte of its own, the value's bits in the low bits (two's
  complement for int4/int2) and every higher bit zero: int4 -2 is 0x0e, -8 is
  0x08, float4_e2m1fn -6.0 is 0x0f. ml_dtypes holds them the same way.
- The quantized types qint8, quint8, qint16, quint16 and qint32 are plain
  integers of their width (int8, uint8, int16, uint16, int32), as TensorFlow's
  reader returns them; the reverse mapping (:func:`from_numpy`) gives the
  plain integer types, so a quantized tensor is written only when asked for by
  name or code (:func:`resolve`).
- DT_STRING maps to ``None``: its tensors are object arrays of ``bytes``.

Resource and variant tensors are known by name but have no NumPy dtype;
reading one is refused.

A byte with a bit set above a sub-byte type's width is not a value of the
type: TensorFlow never writes one (its reader passes it through, and ml_dtypes
then ignores the high bits, so two different stored bytes would read as one
value). :func:`first_out_of_range` finds such bytes; the reader refuses them
and the writer does not write them.
"""

from __future__ import annotations

import numpy as np

from ocf.format.ml_types import as_numpy
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb

DT_STRING = pb.DATA_TYPE_STRING
_ENUM_PREFIX = "DATA_TYPE_"  # OCF's spelling of TensorFlow's "DT_"

# Types whose NumPy dtype is theirs alone: reading and writing map one to one.
# A type is a NumPy type, or an ml_dtypes type by name (loaded on first use).
_NATIVE: dict[int, tuple[str, type[np.generic] | str | None]] = {
    pb.DATA_TYPE_FLOAT: ("float32", np.float32),
    pb.DATA_TYPE_DOUBLE: ("float64", np.float64),
    pb.DATA_TYPE_INT32: ("int32", np.int32),
    pb.DATA_TYPE_UINT8: ("uint8", np.uint8),
    pb.DATA_TYPE_INT16: ("int16", np.int16),
    pb.DATA_TYPE_INT8: ("int8", np.int8),
    pb.DATA_TYPE_STRING: ("string", None),
    pb.DATA_TYPE_COMPLEX64: ("complex64", np.complex64),
    pb.DATA_TYPE_INT64: ("int64", np.int64),
    pb.DATA_TYPE_BOOL: ("bool", np.bool_),
    pb.DATA_TYPE_BFLOAT16: ("bfloat16", "bfloat16"),
    pb.DATA_TYPE_UINT16: ("uint16", np.uint16),
    pb.DATA_TYPE_COMPLEX128: ("complex128", np.complex128),
    pb.DATA_TYPE_HALF: ("float16", np.float16),
    pb.DATA_TYPE_UINT32: ("uint32", np.uint32),
    pb.DATA_TYPE_UINT64: ("uint64", np.uint64),
    pb.DATA_TYPE_FLOAT8_E5M2: ("float8_e5m2", "float8_e5m2"),
    pb.DATA_TYPE_FLOAT8_E4M3FN: ("float8_e4m3fn", "float8_e4m3fn"),
    pb.DATA_TYPE_FLOAT8_E4M3FNUZ: ("float8_e4m3fnuz", "float8_e4m3fnuz"),
    pb.DATA_TYPE_FLOAT8_E4M3B11FNUZ: ("float8_e4m3b11fnuz", "float8_e4m3b11fnuz"),
    pb.DATA_TYPE_FLOAT8_E5M2FNUZ: ("float8_e5m2fnuz", "float8_e5m2fnuz"),
    pb.DATA_TYPE_INT4: ("int4", "int4"),
    pb.DATA_TYPE_UINT4: ("uint4", "uint4"),
    pb.DATA_TYPE_INT2: ("int2", "int2"),
    pb.DATA_TYPE_UINT2: ("uint2", "uint2"),
    pb.DATA_TYPE_FLOAT4_E2M1FN: ("float4_e2m1fn", "float4_e2m1fn"),
}

# Quantized types: TensorFlow's reader returns them as plain integers of their width.
_QUANTIZED: dict[int, tuple[str, type[np.generic]]] = {
    pb.DATA_TYPE_QINT8: ("qint8", np.int8),
    pb.DATA_TYPE_QUINT8: ("quint8", np.uint8),
    pb.DATA_TYPE_QINT16: ("qint16", np.int16),
    pb.DATA_TYPE_QUINT16: ("quint16", np.uint16),
    pb.DATA_TYPE_QINT32: ("qint32", np.int32),
}

# Sub-byte types: how many low bits of each stored byte hold the value.
_VALUE_BITS: dict[int, int] = {
    pb.DATA_TYPE_INT4: 4,
    pb.DATA_TYPE_UINT4: 4,
    pb.DATA_TYPE_INT2: 2,
    pb.DATA_TYPE_UINT2: 2,
    pb.DATA_TYPE_FLOAT4_E2M1FN: 4,
}

# Known to TensorFlow, not readable here.
_UNSUPPORTED: dict[int, str] = {
    pb.DATA_TYPE_RESOURCE: "resource",
    pb.DATA_TYPE_VARIANT: "variant",
}

_SUPPORTED: dict[int, tuple[str, type[np.generic] | str | None]] = {**_NATIVE, **_QUANTIZED}

# By NumPy's dtype name, which ignores byte order ('>f4' is "float32" too).
# (An ml_dtypes type's NumPy name is its ml_dtypes name: "bfloat16".)
_BY_NUMPY: dict[str, int] = {
    (t if isinstance(t, str) else np.dtype(t).name): code
    for code, (_, t) in _NATIVE.items() if t is not None
}

# TensorFlow's short names ("qint8") and enum names ("DT_QINT8"), of known types only.
_BY_NAME: dict[str, int] = {
    **{short: code for code, (short, _) in _SUPPORTED.items()},
    **{short: code for code, short in _UNSUPPORTED.items()},
    **{
        "DT_" + enum_name.removeprefix(_ENUM_PREFIX): code
        for enum_name, code in pb.DataType.items()
        if code in _SUPPORTED or code in _UNSUPPORTED
    },
}


# A TensorFlow dtype as a caller names it: its DataType value or a name.
TFDType = int | str


def is_known(code: int) -> bool:
    """Whether ``code`` is a TensorFlow DataType value a bundle entry may carry."""
    return code in _SUPPORTED or code in _UNSUPPORTED


def is_supported(code: int) -> bool:
    """Whether tensors of this DataType can be read and written here."""
    return code in _SUPPORTED


def name(code: int) -> str:
    """A short name: TensorFlow's ``tf.DType.name`` ("float32", "qint8", "int4", "string")."""
    if code in _SUPPORTED:
        return _SUPPORTED[code][0]
    return _UNSUPPORTED.get(code, f"unknown({code})")


def numpy_dtype(code: int) -> np.dtype[np.generic] | None:
    """The little-endian NumPy dtype of a supported fixed-width type; None for strings."""
    kind = _SUPPORTED[code][1]
    return None if kind is None else as_numpy(kind)


def from_numpy(dtype: np.dtype[np.generic]) -> int | None:
    """The DataType of a NumPy dtype (strings: object, bytes, str); None if there is none.

    Plain integers give the plain integer types, never the quantized ones.
    """
    if dtype.kind in "OSU":
        return DT_STRING
    return _BY_NUMPY.get(dtype.name)


def resolve(value: TFDType) -> int | None:
    """The DataType a caller names: a DataType value (``11``, as
    ``tf.qint8.as_datatype_enum``), TensorFlow's dtype name (``"qint8"``, as
    ``tf.qint8.name``) or its enum name (``"DT_QINT8"``); None when it names no type
    known here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if is_known(value) else None
    if not isinstance(value, str):
        return None
    return _BY_NAME.get(value)


def value_bits(code: int) -> int | None:
    """The bits of each stored byte a sub-byte type uses; None for other types."""
    return _VALUE_BITS.get(code)


def first_out_of_range(code: int, stored: np.ndarray) -> int | None:
    """The flat index of the first element of ``stored`` (the stored bytes of a tensor of
    type ``code``) with a bit set above the type's width; None when every byte is a value
    of the type (always, for types other than the sub-byte ones)."""
    bits = _VALUE_BITS.get(code)
    if bits is None:
        return None
    raw = stored.reshape(-1).view(np.uint8)
    bad = np.flatnonzero(raw >> bits)
    return int(bad[0]) if bad.size else None


def out_of_range_message(code: int, index: int, byte: int) -> str:
    """Why element ``index``, stored as ``byte``, is no value of the sub-byte type ``code``."""
    kind = name(code)
    return (
        f"element {index} is stored as byte {byte:#04x}, which is no {kind} value: "
        f"TensorFlow stores each {kind} element in the low {value_bits(code)} bits of a "
        "byte of its own, the other bits zero"
    )
