"""The wire check of metadata map entries [R-META-001] (ocf.format.map_entries)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ocf.format.map_entries import graph_bytes, index_metadata_is_plain, nodes_with_odd_entries
from ocf.format.metadata import encode_map
from ocf.v1 import index_pb2

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(),
                    st.binary(), st.floats(allow_nan=False))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=12)
metadata = st.dictionaries(st.text(max_size=4), values, max_size=4)


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


@settings(max_examples=150, deadline=None)
@given(stored=metadata)
def test_metadata_a_writer_serializes_is_plain(stored: dict[str, object]) -> None:
    index = index_pb2.Index()
    encode_map(stored, index.metadata)
    assert index_metadata_is_plain(index.SerializeToString(deterministic=True))


@given(number=st.integers(3, 15), at_level=st.booleans())
def test_an_entry_with_any_other_field_is_found_at_any_level(number: int,
                                                            at_level: bool) -> None:
    odd = _field(1, b"k") + _field(2, b"") + bytes([number << 3, 1])
    if at_level:  # the odd entry inside the map value of a plain entry
        odd = _field(1, b"outer") + _field(2, _field(7, _field(1, odd)))
    assert not index_metadata_is_plain(_field(5, odd))
    assert index_metadata_is_plain(_field(5, _field(1, b"k") + _field(2, b"")))


def test_only_the_node_whose_metadata_holds_an_odd_entry_is_named() -> None:
    plain_node = _field(5, _field(1, b"k"))
    odd_node = _field(5, _field(1, b"k") + bytes([3 << 3, 0]))
    index = _field(6, _field(1, plain_node) + _field(1, odd_node)) + _field(6, _field(1, odd_node))
    assert nodes_with_odd_entries(graph_bytes(index)) == {1, 2}
