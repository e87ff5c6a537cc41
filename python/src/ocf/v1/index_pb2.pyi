from ocf.v1 import metadata_pb2 as _metadata_pb2
from ocf.v1 import object_graph_pb2 as _object_graph_pb2
from ocf.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Header(_message.Message):
    __slots__ = ("required_features", "writer")
    REQUIRED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    WRITER_FIELD_NUMBER: _ClassVar[int]
    required_features: _containers.RepeatedScalarFieldContainer[str]
    writer: str
    def __init__(self, required_features: _Optional[_Iterable[str]] = ..., writer: _Optional[str] = ...) -> None: ...

class Shard(_message.Message):
    __slots__ = ("path", "length", "pool_sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    POOL_SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    length: int
    pool_sha256: bytes
    def __init__(self, path: _Optional[str] = ..., length: _Optional[int] = ..., pool_sha256: _Optional[bytes] = ...) -> None: ...

class Index(_message.Message):
    __slots__ = ("header", "shards", "tensors", "blocks", "metadata", "object_graph", "part")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _metadata_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_metadata_pb2.Value, _Mapping]] = ...) -> None: ...
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OBJECT_GRAPH_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    header: Header
    shards: _containers.RepeatedCompositeFieldContainer[Shard]
    tensors: _tensor_pb2.TensorTable
    blocks: _tensor_pb2.BlockTable
    metadata: _containers.MessageMap[str, _metadata_pb2.Value]
    object_graph: _object_graph_pb2.ObjectGraph
    part: Part
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., shards: _Optional[_Iterable[_Union[Shard, _Mapping]]] = ..., tensors: _Optional[_Union[_tensor_pb2.TensorTable, _Mapping]] = ..., blocks: _Optional[_Union[_tensor_pb2.BlockTable, _Mapping]] = ..., metadata: _Optional[_Mapping[str, _metadata_pb2.Value]] = ..., object_graph: _Optional[_Union[_object_graph_pb2.ObjectGraph, _Mapping]] = ..., part: _Optional[_Union[Part, _Mapping]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("save_id", "number", "count")
    SAVE_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    save_id: str
    number: int
    count: int
    def __init__(self, save_id: _Optional[str] = ..., number: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...
