from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Dtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[Dtype]
    DTYPE_BOOL: _ClassVar[Dtype]
    DTYPE_INT8: _ClassVar[Dtype]
    DTYPE_INT16: _ClassVar[Dtype]
    DTYPE_INT32: _ClassVar[Dtype]
    DTYPE_INT64: _ClassVar[Dtype]
    DTYPE_UINT8: _ClassVar[Dtype]
    DTYPE_UINT16: _ClassVar[Dtype]
    DTYPE_UINT32: _ClassVar[Dtype]
    DTYPE_UINT64: _ClassVar[Dtype]
    DTYPE_FLOAT16: _ClassVar[Dtype]
    DTYPE_BFLOAT16: _ClassVar[Dtype]
    DTYPE_FLOAT32: _ClassVar[Dtype]
    DTYPE_FLOAT64: _ClassVar[Dtype]
    DTYPE_COMPLEX64: _ClassVar[Dtype]
    DTYPE_COMPLEX128: _ClassVar[Dtype]
    DTYPE_FLOAT8_E4M3FN: _ClassVar[Dtype]
    DTYPE_FLOAT8_E5M2: _ClassVar[Dtype]
    DTYPE_BYTES: _ClassVar[Dtype]

class Codec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CODEC_UNSPECIFIED: _ClassVar[Codec]
    CODEC_NONE: _ClassVar[Codec]
    CODEC_ZSTD: _ClassVar[Codec]
DTYPE_UNSPECIFIED: Dtype
DTYPE_BOOL: Dtype
DTYPE_INT8: Dtype
DTYPE_INT16: Dtype
DTYPE_INT32: Dtype
DTYPE_INT64: Dtype
DTYPE_UINT8: Dtype
DTYPE_UINT16: Dtype
DTYPE_UINT32: Dtype
DTYPE_UINT64: Dtype
DTYPE_FLOAT16: Dtype
DTYPE_BFLOAT16: Dtype
DTYPE_FLOAT32: Dtype
DTYPE_FLOAT64: Dtype
DTYPE_COMPLEX64: Dtype
DTYPE_COMPLEX128: Dtype
DTYPE_FLOAT8_E4M3FN: Dtype
DTYPE_FLOAT8_E5M2: Dtype
DTYPE_BYTES: Dtype
CODEC_UNSPECIFIED: Codec
CODEC_NONE: Codec
CODEC_ZSTD: Codec

class StoredData(_message.Message):
    __slots__ = ("shard", "offset", "stored_length", "raw_length", "codec", "byte_shuffle", "chunk_size", "chunk_crcs", "chunk_stored_lengths")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STORED_LENGTH_FIELD_NUMBER: _ClassVar[int]
    RAW_LENGTH_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    BYTE_SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_CRCS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_STORED_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    shard: int
    offset: int
    stored_length: int
    raw_length: int
    codec: Codec
    byte_shuffle: bool
    chunk_size: int
    chunk_crcs: _containers.RepeatedScalarFieldContainer[int]
    chunk_stored_lengths: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, shard: _Optional[int] = ..., offset: _Optional[int] = ..., stored_length: _Optional[int] = ..., raw_length: _Optional[int] = ..., codec: _Optional[_Union[Codec, str]] = ..., byte_shuffle: _Optional[bool] = ..., chunk_size: _Optional[int] = ..., chunk_crcs: _Optional[_Iterable[int]] = ..., chunk_stored_lengths: _Optional[_Iterable[int]] = ...) -> None: ...

class TensorSlice(_message.Message):
    __slots__ = ("start", "extent", "data")
    START_FIELD_NUMBER: _ClassVar[int]
    EXTENT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    start: _containers.RepeatedScalarFieldContainer[int]
    extent: _containers.RepeatedScalarFieldContainer[int]
    data: StoredData
    def __init__(self, start: _Optional[_Iterable[int]] = ..., extent: _Optional[_Iterable[int]] = ..., data: _Optional[_Union[StoredData, _Mapping]] = ...) -> None: ...

class TensorEntry(_message.Message):
    __slots__ = ("key", "dtype", "shape", "data", "slices")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    key: str
    dtype: Dtype
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: StoredData
    slices: _containers.RepeatedCompositeFieldContainer[TensorSlice]
    def __init__(self, key: _Optional[str] = ..., dtype: _Optional[_Union[Dtype, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[_Union[StoredData, _Mapping]] = ..., slices: _Optional[_Iterable[_Union[TensorSlice, _Mapping]]] = ...) -> None: ...
