from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_TYPE_UNSPECIFIED: _ClassVar[DataType]
    DATA_TYPE_FLOAT: _ClassVar[DataType]
    DATA_TYPE_DOUBLE: _ClassVar[DataType]
    DATA_TYPE_INT32: _ClassVar[DataType]
    DATA_TYPE_UINT8: _ClassVar[DataType]
    DATA_TYPE_INT16: _ClassVar[DataType]
    DATA_TYPE_INT8: _ClassVar[DataType]
    DATA_TYPE_STRING: _ClassVar[DataType]
    DATA_TYPE_COMPLEX64: _ClassVar[DataType]
    DATA_TYPE_INT64: _ClassVar[DataType]
    DATA_TYPE_BOOL: _ClassVar[DataType]
    DATA_TYPE_QINT8: _ClassVar[DataType]
    DATA_TYPE_QUINT8: _ClassVar[DataType]
    DATA_TYPE_QINT32: _ClassVar[DataType]
    DATA_TYPE_BFLOAT16: _ClassVar[DataType]
    DATA_TYPE_QINT16: _ClassVar[DataType]
    DATA_TYPE_QUINT16: _ClassVar[DataType]
    DATA_TYPE_UINT16: _ClassVar[DataType]
    DATA_TYPE_COMPLEX128: _ClassVar[DataType]
    DATA_TYPE_HALF: _ClassVar[DataType]
    DATA_TYPE_RESOURCE: _ClassVar[DataType]
    DATA_TYPE_VARIANT: _ClassVar[DataType]
    DATA_TYPE_UINT32: _ClassVar[DataType]
    DATA_TYPE_UINT64: _ClassVar[DataType]
    DATA_TYPE_FLOAT8_E5M2: _ClassVar[DataType]
    DATA_TYPE_FLOAT8_E4M3FN: _ClassVar[DataType]
    DATA_TYPE_FLOAT8_E4M3FNUZ: _ClassVar[DataType]
    DATA_TYPE_FLOAT8_E4M3B11FNUZ: _ClassVar[DataType]
    DATA_TYPE_FLOAT8_E5M2FNUZ: _ClassVar[DataType]
    DATA_TYPE_INT4: _ClassVar[DataType]
    DATA_TYPE_UINT4: _ClassVar[DataType]
    DATA_TYPE_INT2: _ClassVar[DataType]
    DATA_TYPE_UINT2: _ClassVar[DataType]
    DATA_TYPE_FLOAT4_E2M1FN: _ClassVar[DataType]
DATA_TYPE_UNSPECIFIED: DataType
DATA_TYPE_FLOAT: DataType
DATA_TYPE_DOUBLE: DataType
DATA_TYPE_INT32: DataType
DATA_TYPE_UINT8: DataType
DATA_TYPE_INT16: DataType
DATA_TYPE_INT8: DataType
DATA_TYPE_STRING: DataType
DATA_TYPE_COMPLEX64: DataType
DATA_TYPE_INT64: DataType
DATA_TYPE_BOOL: DataType
DATA_TYPE_QINT8: DataType
DATA_TYPE_QUINT8: DataType
DATA_TYPE_QINT32: DataType
DATA_TYPE_BFLOAT16: DataType
DATA_TYPE_QINT16: DataType
DATA_TYPE_QUINT16: DataType
DATA_TYPE_UINT16: DataType
DATA_TYPE_COMPLEX128: DataType
DATA_TYPE_HALF: DataType
DATA_TYPE_RESOURCE: DataType
DATA_TYPE_VARIANT: DataType
DATA_TYPE_UINT32: DataType
DATA_TYPE_UINT64: DataType
DATA_TYPE_FLOAT8_E5M2: DataType
DATA_TYPE_FLOAT8_E4M3FN: DataType
DATA_TYPE_FLOAT8_E4M3FNUZ: DataType
DATA_TYPE_FLOAT8_E4M3B11FNUZ: DataType
DATA_TYPE_FLOAT8_E5M2FNUZ: DataType
DATA_TYPE_INT4: DataType
DATA_TYPE_UINT4: DataType
DATA_TYPE_INT2: DataType
DATA_TYPE_UINT2: DataType
DATA_TYPE_FLOAT4_E2M1FN: DataType

class TensorShapeProto(_message.Message):
    __slots__ = ("dims", "unknown_rank")
    class Dim(_message.Message):
        __slots__ = ("size", "name")
        SIZE_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        size: int
        name: str
        def __init__(self, size: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...
    DIMS_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_RANK_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedCompositeFieldContainer[TensorShapeProto.Dim]
    unknown_rank: bool
    def __init__(self, dims: _Optional[_Iterable[_Union[TensorShapeProto.Dim, _Mapping]]] = ..., unknown_rank: _Optional[bool] = ...) -> None: ...

class TensorSliceProto(_message.Message):
    __slots__ = ("extents",)
    class Extent(_message.Message):
        __slots__ = ("start", "length")
        START_FIELD_NUMBER: _ClassVar[int]
        LENGTH_FIELD_NUMBER: _ClassVar[int]
        start: int
        length: int
        def __init__(self, start: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...
    EXTENTS_FIELD_NUMBER: _ClassVar[int]
    extents: _containers.RepeatedCompositeFieldContainer[TensorSliceProto.Extent]
    def __init__(self, extents: _Optional[_Iterable[_Union[TensorSliceProto.Extent, _Mapping]]] = ...) -> None: ...

class VersionDef(_message.Message):
    __slots__ = ("producer", "min_consumer", "bad_consumers")
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    MIN_CONSUMER_FIELD_NUMBER: _ClassVar[int]
    BAD_CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    producer: int
    min_consumer: int
    bad_consumers: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, producer: _Optional[int] = ..., min_consumer: _Optional[int] = ..., bad_consumers: _Optional[_Iterable[int]] = ...) -> None: ...

class BundleHeaderProto(_message.Message):
    __slots__ = ("num_shards", "endianness", "version")
    class Endianness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ENDIANNESS_UNSPECIFIED: _ClassVar[BundleHeaderProto.Endianness]
        ENDIANNESS_BIG: _ClassVar[BundleHeaderProto.Endianness]
    ENDIANNESS_UNSPECIFIED: BundleHeaderProto.Endianness
    ENDIANNESS_BIG: BundleHeaderProto.Endianness
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDIANNESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    num_shards: int
    endianness: BundleHeaderProto.Endianness
    version: VersionDef
    def __init__(self, num_shards: _Optional[int] = ..., endianness: _Optional[_Union[BundleHeaderProto.Endianness, str]] = ..., version: _Optional[_Union[VersionDef, _Mapping]] = ...) -> None: ...

class BundleEntryProto(_message.Message):
    __slots__ = ("dtype", "shape", "shard_id", "offset", "size", "crc32c", "slices")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    dtype: DataType
    shape: TensorShapeProto
    shard_id: int
    offset: int
    size: int
    crc32c: int
    slices: _containers.RepeatedCompositeFieldContainer[TensorSliceProto]
    def __init__(self, dtype: _Optional[_Union[DataType, str]] = ..., shape: _Optional[_Union[TensorShapeProto, _Mapping]] = ..., shard_id: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ..., slices: _Optional[_Iterable[_Union[TensorSliceProto, _Mapping]]] = ...) -> None: ...
