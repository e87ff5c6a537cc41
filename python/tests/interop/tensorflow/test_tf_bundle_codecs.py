"""The codecs under ocf.tensorflow's reader, by properties on random input: Snappy
decompression, SSTable blocks, index tables and varints.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import tf_support
from bundle_files import (
    float_entry,
    header,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tf_support import table, varint

from ocf.format.errors import (
    MalformedError,
    OCFError,
)
from ocf.interop.tensorflow import snappy, sstable


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=300))
def test_snappy_decoder_on_random_bytes_succeeds_or_raises_malformed(data: bytes) -> None:
    try:
        out = snappy.decompress(data)
    except MalformedError:
        return
    assert len(out) <= snappy.MAX_RATIO * len(data)


def snappy_program() -> st.SearchStrategy[list[tuple[str, Any]]]:
    literal = st.tuples(st.just("lit"), st.binary(min_size=1, max_size=300))
    copy = st.tuples(
        st.just("copy"),
        st.tuples(st.integers(1, 2000), st.integers(1, 64), st.sampled_from([1, 2, 4])),
    )
    return st.lists(st.one_of(literal, copy), max_size=20)


def encode_program(program: list[tuple[str, Any]]) -> tuple[bytes, bytes]:
    """A Snappy block from literal/copy elements, and its decoding done naively."""
    body, out = bytearray(), bytearray()
    for kind, arg in program:
        if kind == "lit":
            n = len(arg) - 1
            body += bytes([n << 2]) if n < 60 else bytes([61 << 2]) + n.to_bytes(2, "little")
            body += arg
            out += arg
            continue
        offset, length, width = arg
        if not out:
            continue
        offset = 1 + (offset - 1) % len(out)
        if width == 1 and 4 <= length <= 11 and offset < 2048:
            body += bytes([1 | ((length - 4) << 2) | ((offset >> 8) << 5), offset & 0xFF])
        else:
            width = 4 if width == 4 else 2
            tag = (2 if width == 2 else 3) | ((length - 1) << 2)
            body += bytes([tag]) + offset.to_bytes(width, "little")
        for _ in range(length):
            out.append(out[-offset])
    return varint(len(out)) + bytes(body), bytes(out)


@settings(max_examples=300, deadline=None)
@given(snappy_program())
def test_snappy_decoder_decodes_every_element_kind(program: list[tuple[str, Any]]) -> None:
    block, expected = encode_program(program)
    assert snappy.decompress(block) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), unique=True, max_size=60), st.integers(1, 20))
def test_block_builder_output_parses_back(keys: list[bytes], interval: int) -> None:
    builder = sstable.BlockBuilder(interval)
    entries = [(k, k[::-1] * 2) for k in sorted(keys)]
    for key, value in entries:
        builder.add(key, value)
    assert sstable.parse_block(builder.finish(), None) == entries
    assert tf_support.block(entries, interval) == builder.finish()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=200), st.integers(0, 10**6))
def test_random_index_mutations_raise_only_ocf_errors(noise: bytes, seed: int) -> None:
    rng = np.random.default_rng(seed)
    original = table([[(b"", header()), (b"a", float_entry()), (b"b", float_entry(shape=[1, 3]))]])
    data = bytearray(original)
    for _ in range(int(rng.integers(1, 4))):
        at = int(rng.integers(0, len(data)))
        data[at : at + len(noise[:4])] = noise[:4] or bytes([data[at] ^ 0xFF])
    with contextlib.suppress(OCFError):
        sstable.read_table(bytes(data), verify=bool(seed % 2))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_varint_roundtrip(value: int) -> None:
    from ocf.interop.tensorflow.encoding import decode_varint, encode_varint

    encoded = encode_varint(value)
    assert encoded == varint(value)
    assert decode_varint(encoded, 0, len(encoded)) == (value, len(encoded))
