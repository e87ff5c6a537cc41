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


def _has_prefix_keys(message: Message) -> bool:
    """Whether some map inside ``message`` has a key that is a prefix of another."""
    for field, value in message.ListFields():
        if field.message_type is None or not (_is_map(field) or
                                              _reaches_map(field.message_type)):
            continue
        if _is_map(field):
            keys = sorted(key.encode() for key in value)
            if any(b.startswith(a) for a, b in pairwise(keys)):
                return True
            items: Any = value.values()
        else:
            items = value if _repeated(field) else [value]
        if any(_has_prefix_keys(item) for item in items if isinstance(item, Message)):
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
