"""The wire check of metadata map entries [R-META-001].

A protobuf ``map<string, Value>`` entry is a small message of its own: key
(field 1) and value (field 2). Runtimes disagree on an entry that holds any
other field: C++, Java and Go drop the field and keep the entry, upb (the
Python runtime) drops the whole entry. The spec therefore refuses such an
entry as INVALID, and this module finds one in the index bytes themselves,
since the parsed message no longer shows it. It walks only what leads to
map entries (Index.metadata, ObjectGraph.nodes[].metadata, list and map
values), skipping everything else by its length. It runs on bytes that
already parsed, so nesting is at most 100 levels and the wire is well formed.
"""

from __future__ import annotations

from collections.abc import Iterator

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5

# Field numbers on the paths to map entries (proto/ocf/v1/*.proto).
INDEX_METADATA, INDEX_OBJECT_GRAPH = 5, 6
GRAPH_NODES, NODE_METADATA = 1, 5
ENTRY_KEY, ENTRY_VALUE = 1, 2
VALUE_LIST, VALUE_MAP = 6, 7
LIST_VALUES, MAP_ENTRIES = 1, 1


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _skip(data: memoryview, at: int, wire_type: int) -> int:
    """The position after a field's value; a group is skipped to its end tag."""
    if wire_type == _VARINT:
        return _varint(data, at)[1]
    if wire_type == _FIXED64:
        return at + 8
    if wire_type == _FIXED32:
        return at + 4
    if wire_type == _LENGTH:
        length, at = _varint(data, at)
        return at + length
    depth = 1  # a group: find its matching end, counting nested groups
    while depth:
        tag, at = _varint(data, at)
        if tag & 7 == _START_GROUP:
            depth += 1
        elif tag & 7 == _END_GROUP:
            depth -= 1
        else:
            at = _skip(data, at, tag & 7)
    return at


def fields(data: memoryview) -> Iterator[tuple[int, int, memoryview]]:
    """(field number, wire type, payload) of each field; the payload is the content of
    a length-delimited field and empty for the others."""
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == _LENGTH:
            length, at = _varint(data, at)
            yield number, wire_type, data[at : at + length]
            at += length
        else:
            at = _skip(data, at, wire_type)
            yield number, wire_type, data[at:at]


def _embedded(data: memoryview, number: int) -> Iterator[memoryview]:
    """The payloads of the length-delimited occurrences of field ``number``: the
    messages of a known message field (any other wire type is an unknown field)."""
    return (payload for n, wire_type, payload in fields(data)
            if n == number and wire_type == _LENGTH)


def entry_is_plain(entry: memoryview) -> bool:
    """True when a map entry holds only its key and value (each length-delimited), and
    every entry inside its value does too."""
    for number, wire_type, payload in fields(entry):
        if wire_type != _LENGTH or number not in (ENTRY_KEY, ENTRY_VALUE):
            return False
        if number == ENTRY_VALUE and not _value_is_plain(payload):
            return False
    return True


def _value_is_plain(value: memoryview) -> bool:
    for number, wire_type, payload in fields(value):
        if wire_type != _LENGTH:
            continue
        if number == VALUE_LIST and not all(map(_value_is_plain,
                                                _embedded(payload, LIST_VALUES))):
            return False
        if number == VALUE_MAP and not all(map(entry_is_plain,
                                               _embedded(payload, MAP_ENTRIES))):
            return False
    return True


def index_metadata_is_plain(index: bytes) -> bool:
    """True when every map entry of Index.metadata, at every level, is plain."""
    return all(map(entry_is_plain, _embedded(memoryview(index), INDEX_METADATA)))


def graph_bytes(index: bytes) -> tuple[bytes, ...]:
    """The occurrences of Index.object_graph (protobuf merges them in this order)."""
    return tuple(bytes(p) for p in _embedded(memoryview(index), INDEX_OBJECT_GRAPH))


def nodes_with_odd_entries(graph: tuple[bytes, ...]) -> frozenset[int]:
    """Ids of the nodes whose metadata holds an entry that is not plain."""
    odd: set[int] = set()
    node_id = 0
    for occurrence in graph:
        for node in _embedded(memoryview(occurrence), GRAPH_NODES):
            # Most nodes hold no metadata at all: the tag byte 0x2A (field 5,
            # length-delimited) absent from the node's bytes settles it at C speed.
            if b"\x2a" in bytes(node) and not all(map(entry_is_plain,
                                                _embedded(node, NODE_METADATA))):
                odd.add(node_id)
            node_id += 1
    return frozenset(odd)
