from ocf.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ObjectGraph(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[ObjectNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[ObjectNode, _Mapping]]] = ...) -> None: ...

class ObjectNode(_message.Message):
    __slots__ = ("children", "attributes", "slot_variables", "type_name", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _metadata_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_metadata_pb2.Value, _Mapping]] = ...) -> None: ...
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SLOT_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    children: _containers.RepeatedCompositeFieldContainer[ChildReference]
    attributes: _containers.RepeatedCompositeFieldContainer[TensorAttribute]
    slot_variables: _containers.RepeatedCompositeFieldContainer[SlotVariable]
    type_name: str
    metadata: _containers.MessageMap[str, _metadata_pb2.Value]
    def __init__(self, children: _Optional[_Iterable[_Union[ChildReference, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[TensorAttribute, _Mapping]]] = ..., slot_variables: _Optional[_Iterable[_Union[SlotVariable, _Mapping]]] = ..., type_name: _Optional[str] = ..., metadata: _Optional[_Mapping[str, _metadata_pb2.Value]] = ...) -> None: ...

class ChildReference(_message.Message):
    __slots__ = ("name", "node_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    node_id: int
    def __init__(self, name: _Optional[str] = ..., node_id: _Optional[int] = ...) -> None: ...

class TensorAttribute(_message.Message):
    __slots__ = ("name", "key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class SlotVariable(_message.Message):
    __slots__ = ("original_variable_node_id", "slot_name", "slot_variable_node_id")
    ORIGINAL_VARIABLE_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_NAME_FIELD_NUMBER: _ClassVar[int]
    SLOT_VARIABLE_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    original_variable_node_id: int
    slot_name: str
    slot_variable_node_id: int
    def __init__(self, original_variable_node_id: _Optional[int] = ..., slot_name: _Optional[str] = ..., slot_variable_node_id: _Optional[int] = ...) -> None: ...
