"""The deterministic bytes of an index [R-FILE-007]: map entries ordered by the UTF-8
bytes of their keys, each with its key and value, everything else as protobuf's
deterministic mode writes it (ocf.format.index.canonical)."""

from __future__ import annotations

from ocf.format.index.canonical import serialize
from ocf.format.map_entries import fields
from ocf.v1 import index_pb2


def _entry_keys(data: bytes, number: int = 5) -> list[bytes]:
    return [bytes(next(fields(entry))[2]) for n, _, entry in fields(memoryview(data))
            if n == number]


def _field(message: memoryview, number: int) -> memoryview:
    """The payload of the first length-delimited occurrence of field ``number``."""
    return next(payload for n, _, payload in fields(message) if n == number)


def test_map_keys_that_are_prefixes_of_others_come_first() -> None:
    index = index_pb2.Index()
    for key in ("b", "ab", "", "a", "\u00e9", "Z"):
        index.metadata[key].int_value = 1
    assert _entry_keys(serialize(index)) == [b"", b"Z", b"a", b"ab", b"b", "\u00e9".encode()]


def test_nested_maps_and_graph_node_metadata_are_ordered_too() -> None:
    index = index_pb2.Index()
    inner = index.metadata["m"].map_value.entries
    inner["kk"].int_value, inner["k"].int_value = 2, 1
    node = index.object_graph.nodes.add()
    node.metadata["zz"].int_value, node.metadata["z"].int_value = 2, 1
    data = serialize(index)
    entry = _field(memoryview(data), 5)
    value_map = _field(_field(entry, 2), 7)
    assert _entry_keys(bytes(value_map), 1) == [b"k", b"kk"]
    node_bytes = _field(_field(memoryview(data), 6), 1)
    assert _entry_keys(bytes(node_bytes)) == [b"z", b"zz"]
    assert index_pb2.Index.FromString(data) == index


def test_an_entry_holds_its_key_and_value_even_when_they_are_defaults() -> None:
    index = index_pb2.Index()
    index.metadata[""].SetInParent()
    index.metadata["a"].SetInParent()
    assert serialize(index) == bytes.fromhex("2a04 0a00 1200 2a05 0a0161 1200")


def test_without_prefix_keys_the_bytes_are_the_runtimes_deterministic_ones() -> None:
    index = index_pb2.Index()
    index.tensors.keys.extend(["w", "v"])
    index.tensors.dims.extend([2, 3, 1 << 40])
    for key in ("b", "a", "c"):
        index.metadata[key].string_value = key
    assert serialize(index) == index.SerializeToString(deterministic=True)
    assert _entry_keys(serialize(index)) == [b"a", b"b", b"c"]
