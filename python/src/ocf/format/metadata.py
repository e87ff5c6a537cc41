"""Typed user metadata: Python values to ``ocf.v1.Value`` and back.

spec/format.md, "Metadata" [R-META-001] [R-META-002]. The value kinds are
kept apart: ``1``, ``1.0``, ``True``, ``"1"`` and ``b"1"`` all come back as
they went in. None is a Value with no kind set. Lists and tuples both come
back as lists; dict keys must be strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Union

# A recursive alias: the X | Y form cannot refer to itself by name on 3.10.
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.limits import MAX_METADATA_DEPTH, MAX_PROTOBUF_NESTING
from ocf.v1 import metadata_pb2

MetadataValue = Union[  # noqa: UP007
    None, bool, int, float, str, bytes, list["MetadataValue"], dict[str, "MetadataValue"]
]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The protobuf level of a value of Index.metadata (Index, map entry, Value); a
# value of a node's metadata is two levels deeper (spec/objects.md, "Limits").
INDEX_METADATA_LEVEL = 2
NODE_METADATA_LEVEL = 4


def to_proto(value: object, out: metadata_pb2.Value, depth: int = 0,
             level: int = INDEX_METADATA_LEVEL) -> None:
    """Fill ``out``, a Value at protobuf nesting ``level``, with ``value``; raise
    InvalidError for unsupported types, LimitExceededError for nesting that breaks
    [R-META-002] or that no reader could parse [R-FILE-007]."""
    if depth > MAX_METADATA_DEPTH:
        raise LimitExceededError(
            f"metadata nests deeper than {MAX_METADATA_DEPTH} levels", requirement="R-META-002"
        )
    # A list or map adds its own message one level below the Value: an empty one at
    # metadata level 32 of a node is protobuf level 101 (spec/objects.md, "Limits").
    if isinstance(value, (list, tuple, Mapping)) and level + 1 > MAX_PROTOBUF_NESTING:
        raise LimitExceededError(
            f"metadata nests deeper than the {MAX_PROTOBUF_NESTING} protobuf levels a reader "
            "parses (a list or map at this level, even empty)", requirement="R-FILE-007")
    if value is None:
        return
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidError(f"metadata integer {value} does not fit in int64")
        out.int_value = value
    elif isinstance(value, float):
        out.float_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, (bytes, bytearray)):
        out.bytes_value = bytes(value)
    elif isinstance(value, (list, tuple)):
        values = out.list_value.values
        out.list_value.SetInParent()
        for item in value:
            to_proto(item, values.add(), depth + 1, level + 2)  # ValueList, Value
    elif isinstance(value, Mapping):
        entries = out.map_value.entries
        out.map_value.SetInParent()
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidError(f"metadata map keys must be str, got {type(key).__name__}")
            to_proto(item, entries[key], depth + 1, level + 3)  # ValueMap, entry, Value
    else:
        raise InvalidError(
            f"metadata value of type {type(value).__name__} is not storable; use None, bool, "
            "int, float, str, bytes, list or dict"
        )


def from_proto(value: metadata_pb2.Value, depth: int = 0) -> MetadataValue:
    """The Python value of a stored Value, refusing nesting beyond the limit."""
    if depth > MAX_METADATA_DEPTH:
        raise LimitExceededError(
            f"metadata nests deeper than {MAX_METADATA_DEPTH} levels", requirement="R-META-002"
        )
    kind = value.WhichOneof("kind")
    if kind is None:
        return None
    if kind == "list_value":
        return [from_proto(item, depth + 1) for item in value.list_value.values]
    if kind == "map_value":
        return {k: from_proto(v, depth + 1) for k, v in value.map_value.entries.items()}
    result: MetadataValue = getattr(value, kind)
    return result


def encode_map(values: Mapping[str, object], out: Mapping[str, metadata_pb2.Value],
               level: int = INDEX_METADATA_LEVEL) -> None:
    """Store a str-keyed mapping into a protobuf ``map<string, Value>`` field whose
    values are at protobuf nesting ``level``."""
    for key, item in values.items():
        if not isinstance(key, str):
            raise InvalidError(f"metadata keys must be str, got {type(key).__name__}")
        to_proto(item, out[key], level=level)


def decode_map(values: Mapping[str, metadata_pb2.Value]) -> dict[str, MetadataValue]:
    """The Python dict of a protobuf ``map<string, Value>`` field."""
    return {key: from_proto(item) for key, item in values.items()}
