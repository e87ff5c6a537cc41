"""Cases of protobuf decoding: what a field's value is when the wire says it oddly.

spec/format.md, [R-FILE-007] (valid UTF-8, nesting, groups of unknown fields)
and [R-FILE-009] (32-bit truncation, bools, open enums, repeated map keys).
Each index is written field by field: the valid index of a Builder, with one
column or map written again by hand (ocfbytes.varint, field_bytes), so the
bytes hold exactly the encoding under test. A reader whose protobuf runtime
decodes these differently from proto3's rules reads a different checkpoint,
or refuses a valid one.
"""

from __future__ import annotations

from ocf.v1 import index_pb2, metadata_pb2

import sample_data as samples
from case_dirs import Suite, error
from cases_read import FILE
from ocfbytes import CODEC_ZSTD, Builder, field_bytes, varint
from semantic import i, lst, s

METADATA = 5  # the field number of Index.metadata
OBJECT_GRAPH = 6  # the field number of Index.object_graph
UNKNOWN_GROUP = 15  # no field of Index has this number
ABOVE_32_BITS = 1 << 32


def _with_column(index: index_pb2.Index, table: str, column: str, payload: bytes) -> bytes:
    """The bytes of ``index`` whose ``table.column`` is the packed ``payload`` instead."""
    copy = index_pb2.Index()
    copy.CopyFrom(index)
    sub = getattr(copy, table)
    sub.ClearField(column)
    number = sub.DESCRIPTOR.fields_by_name[column].number
    sub_bytes = sub.SerializeToString(deterministic=True) + field_bytes(number, payload)
    field = copy.DESCRIPTOR.fields_by_name[table].number
    copy.ClearField(table)
    return copy.SerializeToString(deterministic=True) + field_bytes(field, sub_bytes)


def _base() -> Builder:
    builder = Builder()
    builder.add("w", "float32", [2], samples.ramp("float32", [2]))
    return builder


def _read(suite: Suite, name: str, requirements: list[str], description: str,
          builder: Builder, index: bytes) -> None:
    suite.read(f"read.protobuf.{name}", requirements=requirements, description=description,
               files={FILE: builder.single(index)}, input=FILE, expect=builder.expect())


def _reject(suite: Suite, name: str, requirements: list[str], category: str,
            description: str, blob: bytes) -> None:
    suite.read(f"reject.protobuf.{name}", requirements=requirements, description=description,
               files={FILE: blob}, input=FILE, expect=error(category))


def integers(suite: Suite) -> None:
    """[R-FILE-009]: 32-bit fields keep the low 32 bits; a bool is any non-zero varint."""
    builder = _base()
    _read(suite, "rank-varint-above-32-bits", ["R-FILE-009"],
          "The rank of 'w' is written as the varint 2^32 + 1, which a uint32 field holds as "
          "1 (its low 32 bits): 'w' has rank 1 and shape [2].",
          builder, _with_column(builder.index(), "tensors", "ranks",
                                varint(ABOVE_32_BITS + 1)))
    _read(suite, "dtype-varint-above-32-bits", ["R-FILE-009", "R-TENSOR-002"],
          "The dtype of 'w' is written as the varint 2^32 + 12, which the 32-bit enum Dtype "
          "holds as 12 (DTYPE_FLOAT32).",
          builder, _with_column(builder.index(), "tensors", "dtypes",
                                varint(ABOVE_32_BITS + 12)))
    _read(suite, "block-shard-varint-2-to-the-32", ["R-FILE-009", "R-SHARD-001"],
          "The shard of the only block is written as the varint 2^32, which a uint32 field "
          "holds as 0: the index file itself.",
          builder, _with_column(builder.index(), "blocks", "shards", varint(ABOVE_32_BITS)))

    shuffled = Builder()
    shuffled.add("z", "float32", [64], samples.ramp("float32", [64]), codec=CODEC_ZSTD,
                 shuffle_bytes=True)
    _read(suite, "bool-varint-2", ["R-FILE-009", "R-CODEC-002"],
          "The byte_shuffles value of a shuffled zstd block is written as the varint 2, "
          "which a bool field reads as true: the chunk is unshuffled after decoding.",
          shuffled, _with_column(shuffled.index(), "blocks", "byte_shuffles", varint(2)))


def repeated_keys(suite: Suite) -> None:
    """[R-META-001], [R-FILE-009]: a map key on the wire twice takes its last value."""
    builder = _base()
    builder.metadata = {"step": i(2)}
    index = builder.index()
    index.ClearField("metadata")

    def entry(value: int) -> bytes:
        item = metadata_pb2.Value(int_value=value)
        return field_bytes(METADATA, field_bytes(1, b"step") +
                           field_bytes(2, item.SerializeToString()))

    _read(suite, "metadata-key-repeated-last-wins", ["R-META-001", "R-FILE-009"],
          "Index.metadata holds two entries with the key 'step', the integers 1 and then 2: "
          "the last entry is the value.",
          builder, index.SerializeToString(deterministic=True) + entry(1) + entry(2))


def _entry(*fields: bytes) -> bytes:
    """One entry of Index.metadata, its fields written as given."""
    return field_bytes(METADATA, b"".join(fields))


def _value(**kind: object) -> bytes:
    return metadata_pb2.Value(**kind).SerializeToString()  # type: ignore[arg-type]


KEY, VALUE = field_bytes(1, b"step"), field_bytes(2, _value(int_value=2))


def map_entries(suite: Suite) -> None:
    """[R-META-001]: a map entry is read as protobuf reads the message of two fields it is
    (a missing key or value is the default, a repeated one the last, a value merges), and
    one holding any other field is INVALID, since runtimes disagree on it."""
    for name, metadata, description, fields in [
            ("missing-key", {"": i(2)}, "no key: the key is the empty string", [VALUE]),
            ("missing-value", {"step": None}, "no value: the value is null", [KEY]),
            ("empty", {"": None}, "no field at all: the empty key holds null", []),
            ("key-repeated", {"step": i(2)}, "the key twice, 'other' and then 'step': the "
             "last is the key", [field_bytes(1, b"other"), KEY, VALUE]),
            ("value-kind-replaced", {"step": s("two")}, "the value twice, the integer 2 and "
             "then the text 'two': the two Values merge, and the kind set last wins",
             [KEY, VALUE, field_bytes(2, _value(string_value="two"))]),
            ("value-lists-merge", {"step": lst(i(1), i(2))}, "the value twice, the lists [1] "
             "and [2]: the two Values merge into the list [1, 2]",
             [KEY] + [field_bytes(2, field_bytes(6, field_bytes(1, _value(int_value=n))))
                      for n in (1, 2)])]:
        builder = _base()
        builder.metadata = metadata
        index = builder.index()
        index.ClearField("metadata")
        _read(suite, f"metadata-entry-{name}", ["R-META-001", "R-FILE-009"],
              f"Index.metadata holds one entry with {description}.",
              builder, index.SerializeToString(deterministic=True) + _entry(*fields))
    builder = _base()
    plain = builder.index().SerializeToString(deterministic=True)
    nested = field_bytes(2, field_bytes(7, field_bytes(1, KEY + VALUE + varint(3 << 3) +
                                                       varint(1))))
    for name, description, entries in [
            ("unknown-field", "an entry holding key, value and a field 3 (the varint 1)",
             _entry(KEY, VALUE, varint(3 << 3), varint(1))),
            ("key-as-varint", "an entry whose field 1 is the varint 7 (wire type 0), not a "
             "string", _entry(varint(1 << 3), varint(7), VALUE)),
            ("nested-unknown-field", "an entry whose value is a map with one entry holding "
             "key, value and a field 3", _entry(KEY, nested)),
            ("replaced-entry-unknown-field", "an entry 'step' whose value is a map with an "
             "entry holding a field 3, then a plain entry 'step' that replaces it: the rule "
             "is on every entry of the wire", _entry(KEY, nested) + _entry(KEY, VALUE))]:
        _reject(suite, f"metadata-entry-{name}", ["R-META-001"], "INVALID",
                f"Index.metadata holds {description}.", builder.single(plain + entries))
    graph = index_pb2.Index(object_graph={"nodes": [{}]}).object_graph
    node = graph.nodes[0].SerializeToString() + field_bytes(
        5, KEY + VALUE + varint(3 << 3) + varint(1))
    suite.read("reject.graph.node-metadata-entry-unknown-field", requirements=["R-META-001"],
               description="An object graph of one node whose metadata entry holds key, "
               "value and a field 3.", files={FILE: builder.single(
                   plain + field_bytes(OBJECT_GRAPH, field_bytes(1, node)))},
               input=FILE, expect=error("INVALID"))


def utf8(suite: Suite) -> None:
    """[R-FILE-007]: valid UTF-8 as the Unicode Standard defines it."""
    builder = Builder()
    builder.add("w\uffff", "float32", [2], samples.ramp("float32", [2]))
    single = builder.single()
    suite.read("read.protobuf.utf8-noncharacter", requirements=["R-FILE-007"],
               description="A key ending with U+FFFF (EF BF BF), a noncharacter, which is "
               "valid UTF-8.", files={FILE: single}, input=FILE, expect=builder.expect())
    for name, bad, what in [
            ("surrogate", b"\xed\xa0\x80", "ED A0 80, the surrogate U+D800"),
            ("overlong", b"\xc0\xaf", "C0 AF, an overlong form of '/'"),
            ("above-10ffff", b"\xf4\x90\x80\x80", "F4 90 80 80, the code point U+110000"),
            ("truncated", b"\xe2\x82", "E2 82, a sequence cut after two of its three bytes")]:
        marker = b"QZJX"[:len(bad)]  # as many bytes, found nowhere else in the index
        builder = Builder()
        builder.add("w" + marker.decode(), "float32", [2], samples.ramp("float32", [2]))
        index = builder.index().SerializeToString(deterministic=True)
        assert index.count(marker) == 1
        _reject(suite, f"utf8-{name}", ["R-FILE-007"], "MALFORMED",
                f"The key of the only tensor holds {what}: not valid UTF-8.",
                builder.single(index.replace(marker, bad)))


def groups(suite: Suite) -> None:
    """[R-FILE-007] (b): groups of unknown fields count as nesting levels."""
    builder = _base()
    valid = builder.index().SerializeToString(deterministic=True)
    start, end = varint(UNKNOWN_GROUP << 3 | 3), varint(UNKNOWN_GROUP << 3 | 4)
    for depth, ok in ((100, True), (101, False)):
        nested = start * depth + end * depth
        description = (f"After a valid index, an unknown field 15 holding {depth} nested "
                       f"groups, the deepest at nesting level {depth}")
        if ok:
            _read(suite, f"unknown-groups-{depth}-levels", ["R-FILE-007", "R-VER-002"],
                  f"{description}: within the bound of 100, ignored like any unknown field.",
                  builder, valid + nested)
        else:
            _reject(suite, f"unknown-groups-{depth}-levels", ["R-FILE-007"], "MALFORMED",
                    f"{description}: deeper than 100 levels, whether or not the field is "
                    "known.", builder.single(valid + nested))


def generate(suite: Suite) -> None:
    integers(suite)
    repeated_keys(suite)
    map_entries(suite)
    utf8(suite)
    groups(suite)
