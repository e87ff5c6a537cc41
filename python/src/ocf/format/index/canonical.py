"""The deterministic bytes of an index, as [R-FILE-007] recommends to writers.

protobuf's deterministic mode gives them, with one exception in upb (the Python
runtime): it writes the entries of a map whose keys include one that is a
prefix of another in an order of its own ("ab" before "a", the empty key last),
where the spec orders entries by the UTF-8 bytes of their keys ("" < "a" < "ab"),
as libprotobuf does. :func:`serialize` therefore uses the deterministic mode
when no map has such keys (the common case, at C speed) and otherwise writes
every field itself, in field-number order, map entries sorted by their keys.
"""

from __future__ import annotations

from functools import cache
from itertools import pairwise
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_LENGTH_DELIMITED = 2


def serialize(message: Message) -> bytes:
    """The deterministic bytes of ``message`` [R-FILE-007]."""
    if not _has_prefix_keys(message):
        return message.SerializeToString(deterministic=True)
    return b"".join(_field_bytes(message, field, value)
                    for field, value in sorted(message.ListFields(),
                                               key=lambda item: item[0].number))


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


@cache
def _reaches_map(descriptor: Descriptor) -> bool:
    """Whether a message of this type can hold a map, at any depth (types may recur:
    a Value holds lists of Values)."""
    seen, todo = {descriptor.full_name}, [descriptor]
    while todo:
        for field in todo.pop().fields:
            if field.message_type is None:
                continue
            if _is_map(field):
                return True
            if field.message_type.full_name not in seen:
                seen.add(field.message_type.full_name)
                todo.append(field.message_type)
    return False


_MAP, _REPEATED, _SINGLE = 0, 1, 2


@cache
def _map_paths(descriptor: Descriptor) -> tuple[tuple[str, int, Descriptor | None], ...]:
    """The fields of this type that are maps or can hold one, at any depth: (name,
    kind, the type of the map's values or of the field)."""
    paths = []
    for f in descriptor.fields:
        if f.message_type is None:
            continue
        if _is_map(f):
            paths.append((f.name, _MAP, f.message_type.fields_by_name["value"].message_type))
        elif _reaches_map(f.message_type):
            paths.append((f.name, _REPEATED if _repeated(f) else _SINGLE, f.message_type))
    return tuple(paths)


def _has_prefix_keys(message: Message,
                     paths: tuple[tuple[str, int, Descriptor | None], ...] | None = None) -> bool:
    """Whether some map inside ``message`` has a key that is a prefix of another.
    Only the fields that can lead to a map are looked at, so a graph of nodes
    without metadata costs an attribute lookup or two per node."""
    for name, kind, inner in _map_paths(message.DESCRIPTOR) if paths is None else paths:
        value = getattr(message, name)
        if not value and kind != _SINGLE:
            continue
        if kind == _MAP:
            keys = sorted(key.encode() for key in value)
            if any(b.startswith(a) for a, b in pairwise(keys)):
                return True
            items: Any = value.values() if inner is not None else ()
        elif kind == _REPEATED:
            items = value
        elif message.HasField(name):
            items = (value,)
        else:
            continue
        below = _map_paths(inner) if inner is not None else ()
        if len(below) == 1 and below[0][1] == _MAP:
            # The usual case, graph nodes whose one map is their metadata, mostly
            # empty: test each item's map before calling anything for it.
            items = (item for item in items if getattr(item, below[0][0]))
        if below and any(_has_prefix_keys(item, below) for item in items):
            return True
    return False


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _tagged(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_bytes(message: Message, field: FieldDescriptor, value: Any) -> bytes:
    if _is_map(field):  # every entry holds its key and value, both always written
        return b"".join(
            _tagged(field.number, _tagged(1, key.encode()) + _tagged(2, serialize(value[key])))
            for key in sorted(value, key=lambda k: k.encode()))
    if field.message_type is not None:
        items = value if _repeated(field) else [value]
        return b"".join(_tagged(field.number, serialize(item)) for item in items)
    alone = type(message)()  # a scalar field: the runtime writes it (packed, shortest)
    if _repeated(field):
        getattr(alone, field.name).extend(value)
    else:
        setattr(alone, field.name, value)
    return alone.SerializeToString(deterministic=True)
