from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
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

class TensorTable(_message.Message):
    __slots__ = ("keys", "dtypes", "ranks", "dims", "slice_counts")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    DTYPES_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    SLICE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    dtypes: _containers.RepeatedScalarFieldContainer[Dtype]
    ranks: _containers.RepeatedScalarFieldContainer[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    slice_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., dtypes: _Optional[_Iterable[_Union[Dtype, str]]] = ..., ranks: _Optional[_Iterable[int]] = ..., dims: _Optional[_Iterable[int]] = ..., slice_counts: _Optional[_Iterable[int]] = ...) -> None: ...

class BlockTable(_message.Message):
    __slots__ = ("shards", "offsets", "stored_lengths", "raw_lengths", "codecs", "byte_shuffles", "chunk_sizes", "chunk_crcs", "chunk_stored_lengths", "slice_starts", "slice_extents")
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    STORED_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    RAW_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    CODECS_FIELD_NUMBER: _ClassVar[int]
    BYTE_SHUFFLES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_CRCS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_STORED_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    SLICE_STARTS_FIELD_NUMBER: _ClassVar[int]
    SLICE_EXTENTS_FIELD_NUMBER: _ClassVar[int]
    shards: _containers.RepeatedScalarFieldContainer[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    stored_lengths: _containers.RepeatedScalarFieldContainer[int]
    raw_lengths: _containers.RepeatedScalarFieldContainer[int]
    codecs: _containers.RepeatedScalarFieldContainer[Codec]
    byte_shuffles: _containers.RepeatedScalarFieldContainer[bool]
    chunk_sizes: _containers.RepeatedScalarFieldContainer[int]
    chunk_crcs: _containers.RepeatedScalarFieldContainer[int]
    chunk_stored_lengths: _containers.RepeatedScalarFieldContainer[int]
    slice_starts: _containers.RepeatedScalarFieldContainer[int]
    slice_extents: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, shards: _Optional[_Iterable[int]] = ..., offsets: _Optional[_Iterable[int]] = ..., stored_lengths: _Optional[_Iterable[int]] = ..., raw_lengths: _Optional[_Iterable[int]] = ..., codecs: _Optional[_Iterable[_Union[Codec, str]]] = ..., byte_shuffles: _Optional[_Iterable[bool]] = ..., chunk_sizes: _Optional[_Iterable[int]] = ..., chunk_crcs: _Optional[_Iterable[int]] = ..., chunk_stored_lengths: _Optional[_Iterable[int]] = ..., slice_starts: _Optional[_Iterable[int]] = ..., slice_extents: _Optional[_Iterable[int]] = ...) -> None: ...
