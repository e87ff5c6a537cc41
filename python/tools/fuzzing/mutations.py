"""Mutations of a seed: byte-level, and protobuf-aware for OCF index files."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from typing import Any

from google.protobuf.message import DecodeError, Message

from fuzzing.seeds import Files, Seed
from ocf.format.checksum import crc32c
from ocf.format.container import FOOTER_SIZE, Footer
from ocf.v1 import index_pb2

_EDGE_INTEGERS = [0, 1, 2, 7, 63, 64, 65, 127, 128, 255, 256, 4095, 4096, 32767, 32768,
                  65535, 65536, 2**24, 2**24 + 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                  2**58, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


def _edge_value(rng: random.Random) -> int:
    value = rng.choice(_EDGE_INTEGERS)
    return value if rng.random() < 0.8 else max(0, value + rng.randint(-3, 3))


def _mutate_bytes(data: bytes, rng: random.Random, donors: list[bytes]) -> bytes:
    """One byte-level mutation of ``data``."""
    blob = bytearray(data)
    if not blob:
        return bytes(rng.randbytes(rng.randint(1, 64)))
    at = rng.randrange(len(blob))
    choice = rng.randrange(9)
    if choice == 0:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(blob))
            blob[i] ^= 1 << rng.randrange(8)
    elif choice == 1:  # a random byte
        blob[at] = rng.randrange(256)
    elif choice == 2:  # an edge integer, little-endian, of 1 to 8 bytes
        width = rng.choice([1, 2, 4, 8])
        value = _edge_value(rng) % (1 << (8 * width))
        blob[at:at + width] = value.to_bytes(width, "little")
    elif choice == 3:  # truncate
        del blob[rng.randrange(len(blob)):]
    elif choice == 4:  # insert random bytes
        blob[at:at] = rng.randbytes(rng.randint(1, 32))
    elif choice == 5:  # delete a range
        del blob[at:at + rng.randint(1, 64)]
    elif choice == 6:  # duplicate a range
        end = min(len(blob), at + rng.randint(1, 256))
        blob[at:at] = blob[at:end]
    elif choice == 7 and donors:  # splice a piece of another file of the same format
        donor = rng.choice(donors)
        if donor:
            start = rng.randrange(len(donor))
            blob[at:at + rng.randint(1, 128)] = donor[start:start + rng.randint(1, 128)]
    else:  # a run of one byte (zeros, 0xff)
        blob[at:at + rng.randint(1, 64)] = bytes([rng.choice([0, 0xFF, 0x80])]) * \
            rng.randint(1, 64)
    return bytes(blob)


def _scalar_fields(message: Message) -> Iterator[tuple[Message, Any, int | None]]:
    """Every scalar field of ``message`` and its submessages: (message, field, index)."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is not None:
            if descriptor.message_type.GetOptions().map_entry:
                continue
            children = value if descriptor.is_repeated else [value]
            for child in children:
                yield from _scalar_fields(child)
        elif descriptor.is_repeated:
            for i in range(len(value)):
                yield message, descriptor, i
        else:
            yield message, descriptor, None


def _mutate_index_field(index: index_pb2.Index, rng: random.Random) -> bool:
    """Set one scalar field of the index to an edge value; False if there is none."""
    fields = list(_scalar_fields(index))
    if not fields:
        return False
    message, descriptor, i = rng.choice(fields)
    kind = descriptor.cpp_type
    container = getattr(message, descriptor.name)
    if kind == descriptor.CPPTYPE_STRING:
        old = container[i] if i is not None else container
        choices = [old[:-1], old + old[:1], "", ".", "..", "a/b", "index.ocf", "\x00",
                   "x" * 5000]
        value: Any = rng.choice(choices)
        if descriptor.type == descriptor.TYPE_BYTES:
            value = value.encode() if isinstance(value, str) else value
    elif kind == descriptor.CPPTYPE_BOOL:
        value = rng.random() < 0.5
    elif kind in (descriptor.CPPTYPE_FLOAT, descriptor.CPPTYPE_DOUBLE):
        value = rng.choice([0.0, -0.0, float("nan"), float("inf"), 1e308])
    else:
        bits = {descriptor.CPPTYPE_INT32: 31, descriptor.CPPTYPE_UINT32: 32,
                descriptor.CPPTYPE_INT64: 63, descriptor.CPPTYPE_UINT64: 64,
                descriptor.CPPTYPE_ENUM: 31}[kind]
        value = _edge_value(rng) % (1 << bits)
    try:
        if i is None:
            setattr(message, descriptor.name, value)
        else:
            container[i] = value
    except (TypeError, ValueError):
        return False
    return True


def _mutate_ocf_index(data: bytes, rng: random.Random) -> bytes | None:
    """``data`` (an OCF index file) with one index field changed and its index
    checksum and footer rewritten to match; None when the index does not parse."""
    if len(data) < 96:
        return None
    offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
    if offset + length != len(data) - FOOTER_SIZE:
        return None
    index = index_pb2.Index()
    try:
        index.ParseFromString(data[offset:offset + length])
    except DecodeError:
        return None
    if rng.random() < 0.15 and len(index.shards) > 0:  # structural: drop or repeat entries
        index.shards.add().CopyFrom(index.shards[rng.randrange(len(index.shards))])
    elif not _mutate_index_field(index, rng):
        return None
    body = index.SerializeToString()
    footer = Footer(offset, len(body), crc32c(body), *struct.unpack_from(
        "<HH", data, len(data) - FOOTER_SIZE + 20)).pack()
    return data[:offset] + body + footer


def _fix_index_checksum(data: bytes) -> bytes:
    """An OCF index file whose footer's CRC matches the index bytes again."""
    if len(data) < 96:
        return data
    offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
    if offset + length != len(data) - FOOTER_SIZE:
        return data
    at = len(data) - FOOTER_SIZE + 16
    return data[:at] + struct.pack("<I", crc32c(data[offset:offset + length])) + data[at + 4:]


def mutate(seed: Seed, rng: random.Random, donors: dict[str, list[bytes]]) -> Files:
    """The files of ``seed`` with one of them changed by one to four mutations."""
    files = dict(seed.files)
    names = sorted(files)
    indexes = [n for n in names if n.endswith((".ocf", ".index", ".metadata"))]
    name = rng.choice(indexes) if indexes and rng.random() < 0.6 else rng.choice(names)
    data = files[name]
    is_ocf_index = seed.kind.startswith("ocf") and name.endswith(".ocf")
    if is_ocf_index and rng.random() < 0.35:
        changed = _mutate_ocf_index(data, rng)
        if changed is not None:
            files[name] = changed
            return files
    for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
        data = _mutate_bytes(data, rng, donors.get(seed.kind, []))
    if is_ocf_index and rng.random() < 0.7:  # past the index checksum, into the parser
        data = _fix_index_checksum(data)
    files[name] = data
    return files
