"""Cases of the index's wire encoding and of the open edges around it.

spec/protobuf.md, "Wire-level rules" ([R-WIRE-001] varints, tags and lengths;
[R-WIRE-002] known fields with another wire type; [R-WIRE-003] presence of a
message field), the directory of a symbolically linked index ([R-FILE-008]),
part indexes under a symbolic link ([R-PART-004]), and the writers' SHOULDs
that the harness checks on written bytes ([R-FILE-007], [R-DATA-004],
[R-CODEC-001]). Every index is the valid index of a Builder with bytes added
or rewritten by hand (ocfbytes.varint, field_bytes), so the wire holds exactly
the encoding under test.
"""

from __future__ import annotations

from ocf.v1 import index_pb2

import cases_merge as merges
import cases_write as writes
import sample_data as samples
import semantic
from case_dirs import Suite, error
from cases_read import FILE
from cases_reject import append_tensor
from ocfbytes import (
    CODEC_ZSTD,
    Block,
    Builder,
    crc32c,
    field_bytes,
    index_bytes_of,
    index_file,
    raw_frame,
    varint,
)
from semantic import i, s

VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5
TENSORS, BLOCKS, OBJECT_GRAPH, PART = 3, 4, 6, 7  # fields of Index


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def _base() -> Builder:
    builder = Builder()
    builder.add("w", "float32", [2], samples.ramp("float32", [2]))
    return builder


def _plain(builder: Builder) -> bytes:
    return builder.index().SerializeToString(deterministic=True)


def _in_message(index: index_pb2.Index, field: str, extra: bytes) -> bytes:
    """The bytes of ``index`` with ``extra`` appended inside its message field
    ``field`` (tensors, blocks, header)."""
    copy = index_pb2.Index()
    copy.CopyFrom(index)
    sub = getattr(copy, field)
    number = copy.DESCRIPTOR.fields_by_name[field].number
    inner = sub.SerializeToString(deterministic=True) + extra
    copy.ClearField(field)
    return copy.SerializeToString(deterministic=True) + field_bytes(number, inner)


def _read(suite: Suite, name: str, requirements: list[str], description: str,
          builder: Builder, index: bytes) -> None:
    suite.read(f"read.wire.{name}", requirements=requirements, description=description,
               files={FILE: builder.single(index)}, input=FILE, expect=builder.expect())


def _reject(suite: Suite, name: str, description: str, index: bytes,
            category: str = "MALFORMED", requirements: list[str] | None = None) -> None:
    suite.read(f"reject.wire.{name}", requirements=requirements or ["R-WIRE-001"],
               description=description, files={FILE: _base().single(index)}, input=FILE,
               expect=error(category))


def wrong_wire_types(suite: Suite) -> None:
    """[R-WIRE-002]: a known field with another wire type is an unknown field."""
    builder = _base()
    index = builder.index()
    plain = _plain(builder)
    _read(suite, "wrong-wire-type-index-fields", ["R-WIRE-002", "R-VER-002"],
          "After a valid index, Index.shards (2) as the varint 5, Index.tensors (3) as a "
          "fixed32 and Index.blocks (4) as a fixed64: none is length-delimited, so each is an "
          "unknown field and skipped.", builder,
          plain + tag(2, VARINT) + varint(5) + tag(TENSORS, FIXED32) + b"\1\0\0\0" +
          tag(BLOCKS, FIXED64) + bytes(8))
    _read(suite, "wrong-wire-type-table-columns", ["R-WIRE-002", "R-TABLE-001",
                                                   "R-TABLE-002"],
          "TensorTable.ranks (3) gets a fixed32 1, TensorTable.keys (1) the varint 7 and "
          "BlockTable.chunk_crcs (8) the varint 5 besides their values: a repeated varint "
          "field is varint or packed, chunk_crcs fixed32 or packed, keys length-delimited; "
          "these are unknown fields, so the columns keep their lengths.", builder,
          _in_message(index_pb2.Index.FromString(
              _in_message(index, "tensors", tag(3, FIXED32) + b"\1\0\0\0" + tag(1, VARINT) +
                          varint(7))), "blocks", tag(8, VARINT) + varint(5)))
    _read(suite, "wrong-wire-type-required-feature", ["R-WIRE-002", "R-FEAT-001"],
          "Header.required_features (1) written as the varint 1 and as a fixed32: not a "
          "string, so not a feature name; the index requires no feature.", builder,
          _in_message(index, "header", tag(1, VARINT) + varint(1) + tag(1, FIXED32) +
                      b"abcd"))
    _read(suite, "wrong-wire-type-shard-length", ["R-WIRE-002", "R-SHARD-002"],
          "The shard with the empty path (the index file) has Shard.length (2) as a "
          "length-delimited field, an unknown field; the length of that shard is ignored "
          "anyway.", builder,
          _plain_without_shards(index) + field_bytes(2, field_bytes(2, b"xx")))

    directory = Builder(["data-0.ocfd"])
    directory.add("w", "float32", [2], samples.ramp("float32", [2]))
    files = directory.files()
    listed = directory.index()
    listed.ClearField("shards")
    wrong = field_bytes(2, field_bytes(1, b"data-0.ocfd") + field_bytes(2, varint(128)))
    files["index.ocf"] = index_file(b"", wrong + listed.SerializeToString(deterministic=True))
    suite.read("reject.wire.shard-length-length-delimited",
               requirements=["R-WIRE-002", "R-SHARD-002"],
               description="A directory checkpoint whose only external shard has its length "
               "written as a length-delimited field: an unknown field, so the length is 0, "
               "outside [64, 2^63 - 1].",
               files={f"checkpoint/{n}": d for n, d in files.items()}, input="checkpoint",
               expect=error("INVALID"))


def _plain_without_shards(index: index_pb2.Index) -> bytes:
    copy = index_pb2.Index()
    copy.CopyFrom(index)
    copy.ClearField("shards")
    return copy.SerializeToString(deterministic=True)


def presence(suite: Suite) -> None:
    """[R-WIRE-003]: a message field is present when it occurs length-delimited."""
    builder = _base()
    plain = _plain(builder)
    _read(suite, "object-graph-as-varint", ["R-WIRE-003", "R-GRAPH-001"],
          "Index.object_graph (6) occurs only as the varint 0: an unknown field, so the "
          "field is absent and the checkpoint is name-based (not a graph without nodes).",
          builder, plain + tag(OBJECT_GRAPH, VARINT) + varint(0))
    _read(suite, "object-graph-as-group", ["R-WIRE-003", "R-GRAPH-001"],
          "Index.object_graph (6) occurs only as an empty group (wire types 3 and 4): an "
          "unknown field, so the checkpoint is name-based.",
          builder, plain + tag(OBJECT_GRAPH, START_GROUP) + tag(OBJECT_GRAPH, END_GROUP))
    suite.read("reject.wire.object-graph-empty-message", requirements=["R-WIRE-003",
                                                                      "R-GRAPH-001"],
               description="Index.object_graph (6) occurs as an empty length-delimited "
               "field: present, with no node.",
               files={FILE: builder.single(plain + field_bytes(OBJECT_GRAPH, b""))},
               input=FILE, expect=error("INVALID"))

    tensors = merges.four_tensors()

    def part_field(extra: bytes, clear: bool) -> dict[str, bytes]:
        files = merges.save_files(tensors, merges.four_parts())
        name = f"{merges.DIRECTORY}/part-{merges.SAVE}-00000.ocfpart"
        index = index_pb2.Index.FromString(index_bytes_of(files[name]))
        if clear:
            index.ClearField("part")
        files[name] = index_file(b"", index.SerializeToString(deterministic=True) + extra)
        return files

    suite.merge("merge.wire.part-field-also-varint", requirements=["R-WIRE-002", "R-WIRE-003",
                                                                  "R-PART-001"],
                description="Part 0 holds a valid Index.part (7) and, after it, field 7 "
                "again as the varint 1: an unknown field, which neither replaces nor clears "
                "the part's identity.", files=part_field(tag(PART, VARINT) + varint(1), False),
                input=merges.DIRECTORY, save_id=merges.SAVE, parts=4,
                expect=merges.meaning(tensors, {"epoch": i(3)}))
    suite.merge("merge.wire.part-field-only-varint", requirements=["R-WIRE-003",
                                                                  "R-PART-001"],
                description="Part 0 has field 7 only as the varint 1: Index.part is unset.",
                files=part_field(tag(PART, VARINT) + varint(1), True),
                input=merges.DIRECTORY, save_id=merges.SAVE, parts=4, expect=error("INVALID"))


def varints(suite: Suite) -> None:
    """[R-WIRE-001]: varint lengths, padding, bits above 64, tags, lengths."""
    builder = _base()
    index = builder.index()
    plain = _plain(builder)
    _read(suite, "padded-varints", ["R-WIRE-001"],
          "The packed column TensorTable.dims written with its tag padded to 5 bytes (A2 80 "
          "80 80 00), its length 10 padded to 5 bytes (8A 80 80 80 00) and its one value, 2, "
          "padded to 10 bytes: zero-padded varints keep their value.", builder,
          _with_raw_column(index, "tensors", "dims",
                           b"\xa2\x80\x80\x80\x00" + b"\x8a\x80\x80\x80\x00" +
                           b"\x82" + b"\x80" * 8 + b"\x00"))
    _read(suite, "varint-bits-above-64", ["R-WIRE-001"],
          "The offset of the only block is the varint of 10 bytes C0 80 80 80 80 80 80 80 80 "
          "7E: bits 64 to 69 are set, and the low 64 bits, the value, are 64.", builder,
          _with_raw_column(index, "blocks", "offsets", field_bytes(2, b"\xc0" + b"\x80" * 8 +
                                                                   b"\x7e")))
    _read(suite, "field-number-2-29-minus-1", ["R-WIRE-001", "R-VER-002"],
          "After a valid index, an unknown varint field numbered 2^29 - 1, the largest "
          "field number.", builder, plain + tag((1 << 29) - 1, VARINT) + varint(1))
    for name, description, extra in [
            ("varint-eleven-bytes", "an unknown varint field whose value takes 11 bytes",
             tag(20, VARINT) + b"\x81" + b"\x80" * 9 + b"\x00"),
            ("tag-six-bytes", "the tag of an unknown varint field 20 padded to 6 bytes",
             b"\xa0\x81\x80\x80\x80\x00" + varint(1)),
            ("field-number-2-29", "a tag of 5 bytes whose field number is 2^29, one above "
             "the largest", tag(1 << 29, VARINT) + varint(1)),
            ("tag-above-32-bits", "a tag of 5 bytes, 98 80 80 80 10, whose value 2^32 + 24 "
             "has bits above 32 (its low 32 bits would be field 3)",
             b"\x98\x80\x80\x80\x10" + varint(1)),
            ("field-number-zero", "a varint field numbered 0", tag(0, VARINT) + varint(1)),
            ("wire-type-6", "a field 20 of wire type 6, which protobuf does not define",
             tag(20, 6) + varint(1)),
            ("wire-type-7", "a field 20 of wire type 7, which protobuf does not define",
             tag(20, 7) + varint(1)),
            ("end-group-unmatched", "an end-group tag of field 20 with no group open",
             tag(20, END_GROUP)),
            ("end-group-other-field", "a group of field 20 closed by the end tag of field 21",
             tag(20, START_GROUP) + tag(21, END_GROUP)),
            ("length-past-end", "an unknown length-delimited field 20 whose length, 9, runs "
             "past the end of the index", tag(20, LENGTH) + varint(9) + b"abc"),
            ("length-six-bytes", "an unknown length-delimited field 20 whose length 3 is "
             "padded to 6 bytes", tag(20, LENGTH) + b"\x83\x80\x80\x80\x80\x00" + b"abc"),
            ("truncated-varint", "a varint field 20 whose value ends the index with its "
             "continuation bit set", tag(20, VARINT) + b"\x81")]:
        _reject(suite, name, f"After a valid index, {description}.", plain + extra)
    _reject(suite, "packed-varint-truncated",
            "The packed column ranks whose last varint has its continuation bit set at the "
            "end of the column.",
            _with_raw_column(index, "tensors", "ranks", field_bytes(3, b"\x01\x81")))
    _reject(suite, "packed-fixed32-ragged",
            "The packed fixed32 column chunk_crcs holding 5 bytes, not a multiple of 4.",
            _with_raw_column(index, "blocks", "chunk_crcs",
                             field_bytes(8, bytes(index.blocks.chunk_crcs[0].to_bytes(4,
                                                                          "little")) + b"\0")))


def _with_raw_column(index: index_pb2.Index, table: str, column: str, raw: bytes) -> bytes:
    """The bytes of ``index`` whose ``table.column`` is ``raw`` (its tag included)."""
    copy = index_pb2.Index()
    copy.CopyFrom(index)
    getattr(copy, table).ClearField(column)
    return _in_message(copy, table, raw)


def symlinks(suite: Suite) -> None:
    """[R-FILE-008]: external shards are found beside the path as given, not beside
    the target of a link; [R-PART-004]: a part index is never read through a link."""
    directory = Builder(["data-0.ocfd"])
    directory.add("w", "float32", [2, 2], samples.ramp("float32", [2, 2]))
    files = directory.files()
    suite.read("read.path.index-symlink-shards-beside-link",
               requirements=["R-FILE-008", "R-SHARD-001"],
               description="checkpoint/index.ocf is a symbolic link to stored/index.ocf, whose "
               "shard data-0.ocfd is in checkpoint/ only: shards are resolved in the "
               "directory of the path the reader was given.",
               files={"stored/index.ocf": files["index.ocf"],
                      "checkpoint/data-0.ocfd": files["data-0.ocfd"]},
               input="checkpoint", links={"checkpoint/index.ocf": "../stored/index.ocf"},
               expect=directory.expect())

    tensors = merges.four_tensors()
    files = merges.save_files(tensors, merges.four_parts())
    name = f"part-{merges.SAVE}-00001.ocfpart"
    files[f"{merges.DIRECTORY}/kept/{name}"] = files.pop(f"{merges.DIRECTORY}/{name}")
    suite.merge("merge.wire.part-index-symlink", requirements=["R-PART-004"],
                description="Part 1 exists only as a symbolic link to a valid part index in a "
                "subdirectory: a part index is never read through a link, so part 1 is "
                "missing.", files=files, input=merges.DIRECTORY, save_id=merges.SAVE,
                parts=4, expect=error("NOT_FOUND"),
                links={f"{merges.DIRECTORY}/{name}": f"kept/{name}"})


def recommended(suite: Suite) -> None:
    """Writers' SHOULDs, checked by the harness on the written bytes (level
    recommended: they count with --strict)."""
    metadata = {"": i(0), "a": s("x"), "ab": {"map": {"k": i(1), "kk": i(2), "": None}},
                "b": i(3), "\u00e9": i(4)}
    entries = {"w": ("float32", [2, 2], samples.ramp("float32", [2, 2]))}
    nodes = [{"type_name": "Model", "metadata": {"z": i(1), "": i(2)},
              "attributes": [["w", ".w"]]}]
    entries = {".w": entries["w"]}
    for layout in ("file", "directory"):
        writes.add(suite, f"write.wire.deterministic-index-{layout}", ["R-FILE-007"],
                   "Metadata whose keys include the empty key and keys that are prefixes of "
                   "others, at two levels, and a graph node with metadata: the index SHOULD "
                   "be the deterministic serialization (entries by the UTF-8 bytes of their "
                   "keys).", entries, metadata, nodes, layout=layout, level="recommended",
                   checks=["deterministic-index"])
    odd = {f"t{n}": ("uint8", [size], bytes(k % 251 for k in range(size)))
           for n, size in enumerate((1, 63, 64, 65, 200))}
    writes.add(suite, "write.data.no-gaps", ["R-DATA-004"],
               "Tensors of 1, 63, 64, 65 and 200 bytes: a writer SHOULD leave no gap in a data "
               "region but the padding that aligns the next block.", odd, {},
               level="recommended", checks=["no-gaps"])
    compressible = {"zeros": ("float32", [1024], bytes(4096))}
    writes.add(suite, "write.codec.zstd-content-size", ["R-CODEC-001"],
               "A highly compressible tensor: a writer that stores it with CODEC_ZSTD SHOULD "
               "record Frame_Content_Size in every frame.", compressible, {},
               level="recommended", checks=["zstd-content-size"])


def optional(suite: Suite) -> None:
    """A MAY of readers: a reader must accept windows up to 2^27 bytes and MAY refuse
    larger ones, so reading one is an optional capability."""
    content = bytes(range(200))
    frame = raw_frame(content, window_log=28)
    builder = Builder()
    offset = builder.put(0, frame)
    append_tensor(builder, "u8", "uint8", [len(content)],
                  [Block(0, offset, len(frame), len(content), CODEC_ZSTD, False, 0,
                         [crc32c(frame)], [len(frame)])])
    builder.expected_tensors["u8"] = semantic.tensor("uint8", [200], content)
    suite.read("read.codec.zstd-window-256mib", requirements=["R-CODEC-001"],
               description="A frame (not single-segment) whose Window_Descriptor declares a "
               "window of 2^28 bytes for 200 bytes of content: a reader MAY refuse it "
               "(MALFORMED); one that accepts windows above 2^27 reads it.",
               files={FILE: builder.single()}, input=FILE, expect=builder.expect(),
               level="optional")


def frame_checks(suite: Suite) -> None:
    """[R-CODEC-001]: frame rules of RFC 8878 that some decoders do not check."""
    content = bytes(range(200))

    def frame_case(name: str, description: str, frame: bytes) -> None:
        builder = Builder()
        offset = builder.put(0, frame)
        append_tensor(builder, "u8", "uint8", [len(content)],
                      [Block(0, offset, len(frame), len(content), CODEC_ZSTD, False, 0,
                             [crc32c(frame)], [len(frame)])])
        suite.read(f"reject.codec.{name}", requirements=["R-CODEC-001"],
                   description=description + " (its chunk CRC matches).",
                   files={FILE: builder.single()}, input=FILE, expect=error("MALFORMED"))

    good = bytearray(raw_frame(content))
    good[4] |= 0x08  # Frame_Header_Descriptor bit 3, reserved
    frame_case("frame-header-reserved-bit", "A frame whose Frame_Header_Descriptor has its "
               "reserved bit (3) set", bytes(good))


def generate(suite: Suite) -> None:
    wrong_wire_types(suite)
    presence(suite)
    varints(suite)
    symlinks(suite)
    recommended(suite)
    optional(suite)
    frame_checks(suite)
