"""Negative read cases: checkpoints a conforming reader refuses, with the category.

Each is a valid checkpoint built byte by byte (ocfbytes.Builder) and then
damaged in one way, which its description names: bytes of the file patched
or cut, a field of the index changed before the index is serialized (the
footer's checksum then matches, so the check under test is reached), or a
file of a directory checkpoint removed or altered. Cases whose id starts
with ``reject.order.`` break two rules at once and test the reader's order
of checks (spec/format.md, "Reader's order of checks"; spec/errors.md).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError
from ocf.v1 import index_pb2

import sample_data as samples
import semantic
from case_dirs import Suite, error
from cases_read import (
    DIRECTORY,
    FILE,
    LARGE_CROSS,
    base_builder,
    example_graph,
    in_directory,
    large_cross,
    rows_over_columns,
)
from ocfbytes import (
    CODEC_ZSTD,
    FOOTER_MAGIC,
    PREAMBLE,
    Block,
    Builder,
    Tensor,
    crc32c,
    footer,
    patch,
    raw_frame,
    read_layout,
    set_footer_field,
    to_value,
    zstd,
)
from semantic import i, nested

Mutation = Callable[[index_pb2.Index], None]


class Rejects:
    """Helpers that add one reject case each."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.categories: set[str] = set()

    def _cite(self, requirements: list[str], category: str) -> list[str]:
        """The first case of each category also cites the closed list of categories."""
        if category in self.categories:
            return requirements
        self.categories.add(category)
        return [*requirements, "R-ERR-001"]

    def blob(self, name: str, requirements: list[str], category: str, description: str,
             blob: bytes) -> None:
        self.files(name, requirements, category, description, {FILE: blob}, input=FILE)

    def files(self, name: str, requirements: list[str], category: str, description: str,
              files: dict[str, bytes], input: str = DIRECTORY,
              links: dict[str, str] | None = None) -> None:
        self.suite.read(f"reject.{name}", requirements=self._cite(requirements, category),
                        description=description, files=files, input=input,
                        expect=error(category), links=links)

    def index(self, name: str, requirements: list[str], category: str, description: str,
              mutation: Mutation, builder: Builder | None = None, **options: Any) -> None:
        """A single file whose index ``mutation`` changed (base_builder() by default)."""
        builder = builder or base_builder()
        index = builder.index()
        mutation(index)
        self.blob(name, requirements, category, description, builder.single(index, **options))

    def directory(self, name: str, requirements: list[str], category: str, description: str,
                  mutation: Mutation | None = None, builder: Builder | None = None,
                  change: Callable[[dict[str, bytes]], None] | None = None) -> None:
        """A directory checkpoint whose index ``mutation`` and whose files ``change`` changed."""
        builder = builder or directory_base()
        index = builder.index()
        if mutation:
            mutation(index)
        files = builder.files(index)
        if change:
            change(files)
        self.files(name, requirements, category, description, in_directory(files))


def directory_base() -> Builder:
    builder = Builder(["", "data-0.ocfd"])
    builder.add("a", "float32", [4], samples.ramp("float32", [4]), shard=0)
    builder.add("b", "int32", [2, 2], samples.ramp("int32", [2, 2]), shard=1)
    return builder


def _self_referencing() -> bytes:
    """base_builder()'s file, listing itself (FILE) as shard 1 and storing 'w' there:
    every other check passes, since shard 1's recorded length is the file's own."""
    builder = base_builder()
    index = builder.index()
    index.shards.add(path=FILE, length=0)
    index.blocks.shards[0] = 1
    length = 4096
    while True:  # the length is part of the index it measures: find the fixed point
        index.shards[1].length = length
        blob = builder.single(index)
        if len(blob) == length:
            return blob
        length = len(blob)


def sliced_base() -> Builder:
    builder = Builder()
    builder.add("m", "int16", [4, 3], samples.ramp("int16", [4, 3]),
                slices=[([0, 0], [2, 3]), ([2, 0], [2, 3])])
    builder.add("w", "float32", [2], samples.ramp("float32", [2]))
    return builder


def rank_base(rank: int) -> Builder:
    """A valid file whose first tensor, int8 of shape [2, 1, ..., 1] and rank ``rank``, is
    in two slices: the slice limit depends on the rank [R-SLICE-004]."""
    builder = Builder()
    shape = [2] + [1] * (rank - 1)
    builder.add("t", "int8", shape, samples.ramp("int8", shape),
                slices=[([k] + [0] * (rank - 1), [1] * rank) for k in (0, 1)])
    builder.add("w", "float32", [2], samples.ramp("float32", [2]))
    return builder


def zstd_base() -> Builder:
    builder = Builder()
    builder.add("z", "float64", [1024], samples.ramp("float64", [1024]), codec=CODEC_ZSTD,
                chunk_size=4096)
    builder.add("w", "float32", [2], samples.ramp("float32", [2]))
    return builder


def append_tensor(builder: Builder, key: str, dtype: str, shape: list[int],
                  blocks: list[Block], sliced: bool = False) -> None:
    """Add a tensor row without checking its bytes (for shapes no data could hold)."""
    builder.tensors.append(Tensor(key, semantic.DTYPES[dtype][0], shape, blocks, sliced))


def unparsable(data: bytes) -> bytes:
    """``data``, asserted not to parse as ocf.v1.Index."""
    try:
        index_pb2.Index().ParseFromString(data)
    except DecodeError:
        return data
    raise AssertionError(f"{data[:32].hex()} parses")


def utf8_broken(index: index_pb2.Index, marker: str) -> bytes:
    """The serialized ``index`` with the string ``marker`` (which starts with U+0001)
    turned into invalid UTF-8 by replacing that byte with FF."""
    data = index.SerializeToString(deterministic=True)
    encoded = marker.encode()
    assert encoded.startswith(b"\x01") and data.count(encoded) == 1
    return unparsable(data.replace(encoded, b"\xff" + encoded[1:]))


# -- file structure ----------


def file_structure(r: Rejects) -> None:
    blob = base_builder().single()
    at = read_layout(blob)
    size = len(blob)
    r.blob("file.preamble-magic", ["R-FILE-002"], "MALFORMED",
           "A valid file whose preamble magic has 'G' in place of 'F' at byte 3.",
           patch(blob, 3, b"G"))
    r.blob("file.preamble-high-bit-stripped", ["R-FILE-002"], "MALFORMED",
           "A valid file whose first byte 89 became 09, as a transfer that strips the 8th bit "
           "would leave it.", patch(blob, 0, b"\x09"))
    r.blob("file.footer-magic", ["R-FILE-004"], "MALFORMED",
           "A valid file whose last byte (0A of the footer magic) became 0D.",
           patch(blob, size - 1, b"\x0d"))
    r.blob("file.empty", ["R-FILE-004"], "MALFORMED", "A file of 0 bytes.", b"")
    r.blob("file.size-95", ["R-FILE-004"], "MALFORMED",
           "A 95-byte file, one byte short of preamble and footer, that starts with the "
           "preamble magic and ends with the footer magic.",
           PREAMBLE + bytes(23) + FOOTER_MAGIC)
    cuts = {
        "in-preamble": (32, "inside the preamble"),
        "after-preamble": (64, "right after the preamble"),
        "in-data": (100, "inside the data region"),
        "before-index": (at.index_offset, "right before the index"),
        "in-index": (at.index_offset + at.index_length // 2, "inside the index"),
        "in-footer": (size - 16, "inside the footer"),
        "last-byte": (size - 1, "one byte before its end"),
    }
    for name, (cut, where) in cuts.items():
        r.blob(f"file.truncated-{name}", ["R-FILE-004"], "MALFORMED",
               f"A valid {size}-byte file cut {where}, after {cut} bytes.", blob[:cut])

    moved = set_footer_field(set_footer_field(blob, "index_offset", 32), "index_length",
                       size - 32 - 32)
    moved = set_footer_field(moved, "index_crc32c", crc32c(blob[32:size - 32]))
    r.blob("file.index-offset-below-64", ["R-FILE-005"], "MALFORMED",
           "A valid file whose footer says the index starts at offset 32, inside the preamble, "
           "with a length and checksum that match bytes 32 to the footer.", moved)
    r.blob("file.index-length-beyond-file", ["R-FILE-005"], "MALFORMED",
           "A valid file whose footer's index_length is 100 more than the index bytes, so the "
           "index would run past the footer.",
           set_footer_field(blob, "index_length", at.index_length + 100))
    shorter = set_footer_field(set_footer_field(blob, "index_length", at.index_length - 1),
                               "index_crc32c",
                               crc32c(blob[at.index_offset:at.index_offset + at.index_length - 1]))
    r.blob("file.index-ends-before-footer", ["R-FILE-005"], "MALFORMED",
           "A valid file whose footer's index_length is one byte short (checksum matching the "
           "shorter range), leaving a byte between the index and the footer.", shorter)
    wrap = (1 << 64) - 8
    wrapped = set_footer_field(set_footer_field(blob, "index_offset", wrap), "index_length",
                         at.index_offset + at.index_length + 8)
    r.blob("file.index-offset-wraps", ["R-FILE-005", "R-LIMIT-002"], "MALFORMED",
           "A valid file whose footer says index_offset 2^64-8 and an index_length whose sum "
           "with it is the footer's position plus 2^64: equal only in 64-bit wrapping "
           "arithmetic.", wrapped)

    r.blob("file.index-crc-mismatch", ["R-FILE-006"], "INTEGRITY",
           "A valid file whose footer's index_crc32c has its lowest bit flipped.",
           set_footer_field(blob, "index_crc32c", at.index_crc ^ 1))
    r.blob("file.index-byte-changed", ["R-FILE-006"], "INTEGRITY",
           "A valid file with one bit of a tensor key in the index flipped ('w' became 'v'), "
           "the footer's checksum unchanged.",
           patch(blob, blob.index(b"\x0a\x01w", at.index_offset) + 2, b"v"))
    empty = Builder([], writer="").single()
    r.blob("file.index-empty-crc-not-zero", ["R-FILE-006"], "INTEGRITY",
           "A 96-byte file with an index of length 0 whose footer's checksum is 1 instead of "
           "0.", set_footer_field(empty, "index_crc32c", 1))

    builder = base_builder()
    r.blob("file.index-garbage", ["R-FILE-007"], "MALFORMED",
           "A valid file whose index bytes are replaced by FF FF FF FF FF (a truncated varint "
           "tag) behind a matching footer.", builder.single(unparsable(b"\xff" * 5)))
    data = builder.index().SerializeToString(deterministic=True)
    r.blob("file.index-truncated-message", ["R-FILE-007"], "MALFORMED",
           "A valid file whose index bytes lose their last 10 bytes (cutting an embedded "
           "message), behind a matching footer.", builder.single(unparsable(data[:-10])))
    r.blob("file.index-length-overrun", ["R-FILE-007"], "MALFORMED",
           "An index of the bytes 1A 64 00 00: field 3 (tensors) announcing 100 bytes of which "
           "2 follow.", builder.single(unparsable(b"\x1a\x64\x00\x00")))

    def utf8(name: str, where: str, setup: Callable[[Builder], None]) -> None:
        builder = base_builder()
        setup(builder)
        r.blob(f"file.index-invalid-utf8-{name}", ["R-FILE-007"], "MALFORMED",
               f"A valid index whose {where} holds the byte FF (not UTF-8); the footer's "
               "checksum matches.", builder.single(utf8_broken(builder.index(), "\x01MARK")))

    utf8("tensor-key", "third tensor key",
         lambda b: b.add("\x01MARK", "uint8", [1], b"\x00"))
    utf8("metadata-key", "metadata key", lambda b: b.metadata.update({"\x01MARK": i(1)}))
    utf8("metadata-string", "metadata string value",
         lambda b: b.metadata.update({"s": {"string": "\x01MARK"}}))
    utf8("graph-edge-name", "object graph edge name",
         lambda b: setattr(b, "graph", [{"children": [["\x01MARK", 1]]}, {}]))
    utf8("writer", "Header.writer", lambda b: setattr(b, "writer", "\x01MARK"))

    builder = base_builder()
    index = builder.index()
    index.shards.add(path="\x01MARK", length=64)
    r.blob("file.index-invalid-utf8-shard-path", ["R-FILE-007"], "MALFORMED",
           "A valid index with a second shard whose path holds the byte FF (not UTF-8); the "
           "footer's checksum matches.", builder.single(utf8_broken(index, "\x01MARK")))
    utf8("required-feature", "required feature name",
         lambda b: b.required_features.append("\x01MARK"))
    builder = Builder()
    builder.graph = [{"metadata": {"deep": nested(32, "map", {"list": []})}}]
    r.blob("file.index-nesting-101-node-metadata", ["R-FILE-007"], "MALFORMED",
           "A node metadata value at level 32 inside maps (allowed) that is an empty list: its "
           "ValueList message is at protobuf nesting level 101.", builder.single())
    builder = base_builder()
    builder.metadata = {"deep": nested(50, "list", i(1))}
    r.blob("file.index-nesting-102-lists", ["R-FILE-007", "R-META-002"], "MALFORMED",
           "A metadata value at level 50 inside lists, at protobuf nesting level 102: the "
           "index does not parse, which comes before the metadata level check.",
           builder.single())
    builder = base_builder()
    builder.metadata = {"deep": nested(33, "map", i(1))}
    r.blob("file.index-nesting-101", ["R-FILE-007", "R-META-002"], "MALFORMED",
           "Metadata holding a value at level 33 inside maps, which nests protobuf messages "
           "101 levels deep, beyond the 100 a reader parses.", builder.single())


# -- versions, limits and features ----------


def versions(r: Rejects) -> None:
    blob = base_builder().single()
    at = read_layout(blob)
    for major in (2, 0, 65535):
        r.blob(f"version.major-{major}", ["R-VER-001"], "UNSUPPORTED_VERSION",
               f"A valid file whose footer says format_major {major}.",
               set_footer_field(blob, "format_major", major))
    r.blob("version.major-2-garbage-index", ["R-VER-001", "R-ERR-002"], "UNSUPPORTED_VERSION",
           "Format major version 2 and index bytes that do not parse: the version is checked "
           "before the index is parsed.",
           base_builder().single(unparsable(b"\xff" * 7), major=2))
    r.blob("version.major-2-index-crc-mismatch", ["R-VER-001", "R-ERR-002"],
           "UNSUPPORTED_VERSION",
           "Format major version 2 and a wrong index checksum: the version comes first.",
           set_footer_field(set_footer_field(blob, "format_major", 2), "index_crc32c",
                            at.index_crc ^ 1))
    r.blob("version.major-2-index-position-wrong", ["R-VER-001", "R-ERR-002"],
           "UNSUPPORTED_VERSION",
           "Format major version 2 and an index_length that does not reach the footer: the "
           "version comes before the index position.",
           set_footer_field(set_footer_field(blob, "format_major", 2), "index_length", 3))
    r.blob("version.major-2-index-length-over-limit", ["R-VER-001", "R-LIMIT-001", "R-ERR-002"],
           "UNSUPPORTED_VERSION",
           "Format major version 2 and an index_length of 2^30+1, above the limit: the version "
           "comes before the limit on the index size.",
           set_footer_field(set_footer_field(blob, "format_major", 2), "index_length",
                            (1 << 30) + 1))
    r.blob("version.major-2-file-50-bytes", ["R-FILE-004", "R-ERR-002"], "MALFORMED",
           "A 50-byte file: 18 bytes of preamble and a footer saying major version 2; the "
           "file size is checked before the version.",
           PREAMBLE[:18] + footer(64, 0, 0, major=2))
    r.blob("version.major-7-footer-magic-damaged", ["R-FILE-004", "R-ERR-002"], "MALFORMED",
           "A footer saying major version 7 whose magic is damaged: the magic is checked "
           "before the version.",
           patch(set_footer_field(blob, "format_major", 7), len(blob) - 2, b"\x00"))
    r.blob("version.major-2-preamble-damaged", ["R-FILE-002", "R-ERR-002"], "MALFORMED",
           "A footer saying major version 2 in a file whose preamble magic is damaged: the "
           "preamble is checked before the version.",
           patch(set_footer_field(blob, "format_major", 2), 1, b"o"))


def limits(r: Rejects) -> None:
    blob = base_builder().single()
    r.blob("limit.index-length-over-1gib", ["R-LIMIT-001"], "LIMIT_EXCEEDED",
           "A valid file whose footer says index_length 2^30+1, one byte above the 1 GiB "
           "limit.", set_footer_field(blob, "index_length", (1 << 30) + 1))
    r.blob("limit.index-length-over-1gib-offset-wrong", ["R-LIMIT-001", "R-ERR-002"],
           "LIMIT_EXCEEDED",
           "A footer saying index_length 2^30+1 and index_offset 0: the limit is checked "
           "before the index position.",
           set_footer_field(set_footer_field(blob, "index_length", (1 << 30) + 1),
                            "index_offset", 0))
    r.blob("limit.index-length-over-256mib-in-format-1.1", ["R-LIMIT-001", "R-VER-002",
                                                            "R-FILE-005"], "MALFORMED",
           "A file of format 1.1 whose footer says index_length 2^28+1, above the 256 MiB of "
           "format 1.1 but within the 1 GiB of 1.2, which applies whatever format_minor "
           "says: the index position is checked next, and this small file does not hold it.",
           set_footer_field(blob, "index_length", (1 << 28) + 1))
    r.blob("limit.index-length-max-u64", ["R-LIMIT-001"], "LIMIT_EXCEEDED",
           "A footer saying index_length 2^64-1.", set_footer_field(blob, "index_length",
                                                             (1 << 64) - 1))
    r.blob("limit.index-length-exactly-1gib", ["R-LIMIT-001", "R-FILE-005"], "MALFORMED",
           "A footer saying index_length exactly 2^30, which is within the limit, but does not "
           "end at the footer of this small file.", set_footer_field(blob, "index_length", 1 << 30))


def features(r: Rejects) -> None:
    def add(name: str, requirements: list[str], names: list[str], description: str,
            mutation: Mutation | None = None, **options: Any) -> None:
        def mutate(index: index_pb2.Index) -> None:
            index.header.required_features.extend(names)
            if mutation:
                mutation(index)
        r.index(f"feature.{name}", requirements, "UNKNOWN_REQUIRED_FEATURE", description,
                mutate, **options)

    add("experimental-name", ["R-FEAT-001"], ["x-foo"],
        "A valid file whose Header.required_features lists 'x-foo', which no reader of "
        "format 1.1 implements.")
    add("spec-style-name", ["R-FEAT-001", "R-FEAT-002"], ["zstd_dictionary"],
        "Header.required_features lists 'zstd_dictionary', a name of the form later versions "
        "use, which format 1.1 does not define.")
    add("ill-formed-name", ["R-FEAT-001", "R-FEAT-002"], ["Not A Name!"],
        "Header.required_features lists 'Not A Name!': readers do not check the form of "
        "names, an unknown name is unknown.")
    add("empty-name", ["R-FEAT-001"], [""],
        "Header.required_features lists the empty string.")
    add("several", ["R-FEAT-001"], ["x-a", "x-b"],
        "Header.required_features lists two unknown names.")
    add("format-1.0", ["R-FEAT-001"], ["x-foo"],
        "An unknown required feature in a file of format 1.0.", minor=0)

    def misalign(index: index_pb2.Index) -> None:
        index.blocks.offsets[0] += 8

    add("before-table-checks", ["R-FEAT-001", "R-ERR-002"], ["x-foo"],
        "An unknown required feature and a misaligned block offset: features are checked "
        "right after parsing, before the tables.", misalign)

    def bad_shard(index: index_pb2.Index) -> None:
        index.shards.add(path="../x", length=64)

    add("before-shard-checks", ["R-FEAT-001", "R-ERR-002"], ["x-foo"],
        "An unknown required feature and a shard path '../x': features are checked before "
        "the shard list.", bad_shard)

    def garbage_metadata(index: index_pb2.Index) -> None:
        to_value(nested(40, "list", None), index.metadata["deep"])

    add("before-metadata-checks", ["R-FEAT-001", "R-ERR-002"], ["x-foo"],
        "An unknown required feature and a metadata value at level 40 inside lists: "
        "features come first.", garbage_metadata)


# -- shards ----------


def shards(r: Rejects) -> None:
    def shard_path(path: str) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.shards[1].path = path
        return mutate

    def block_shard(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.shards[1] = value
        return mutate

    r.index("shard.block-shard-out-of-range", ["R-SHARD-001"], "INVALID",
            "A valid single file whose second block names shard 1 of a list of one shard.",
            block_shard(1))
    r.directory("shard.block-shard-out-of-range-directory", ["R-SHARD-001"], "INVALID",
                "A valid directory checkpoint whose second block names shard 2 of two.",
                block_shard(2))
    r.index("shard.no-shards", ["R-SHARD-001"], "INVALID",
            "A valid single file whose Index.shards is emptied while its blocks name shard 0.",
            lambda index: index.ClearField("shards"))
    bad_paths = {
        "dot-dot-slash": ("../x", "'../x', which leaves the directory"),
        "dot": (".", "'.'"),
        "dot-dot": ("..", "'..'"),
        "separator": ("a/b", "'a/b', which contains a separator"),
        "backslash": ("a\\b", "'a\\b', which contains a backslash"),
        "absolute": ("/tmp/data-0.ocfd", "an absolute path"),
        "drive": ("C:data", "'C:data', a drive-relative Windows path"),
        "leading-dot": (".data-0.ocfd", "'.data-0.ocfd', which starts with a dot"),
        "leading-dash": ("-data", "'-data', which starts with a dash"),
        "leading-underscore": ("_data", "'_data', which starts with an underscore"),
        "index-ocf": ("index.ocf", "'index.ocf', the index file itself"),
        "too-long": ("d" * 256, "a name of 256 characters"),
        "space": ("data 0.ocfd", "'data 0.ocfd', which contains a space"),
        "non-ascii": ("d\u00e4ta.ocfd", "'d\u00e4ta.ocfd', which contains a non-ASCII letter"),
        "nul": ("data\u0000.ocfd", "a name containing U+0000"),
    }
    for name, (path, what) in bad_paths.items():
        r.directory(f"shard.path-{name}", ["R-SHARD-001"], "INVALID",
                    f"A valid directory checkpoint whose external shard path is {what}.",
                    shard_path(path))

    def duplicate(path: str) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.shards.add(path=path, length=index.shards[1].length)
        return mutate

    r.directory("shard.duplicate-path", ["R-SHARD-003"], "INVALID",
                "A valid directory checkpoint whose shard list repeats 'data-0.ocfd'.",
                duplicate("data-0.ocfd"))
    r.index("shard.duplicate-empty-path", ["R-SHARD-003"], "INVALID",
            "A valid single file whose shard list holds the empty path twice.",
            lambda index: index.shards.add(path=""))
    portability = {
        "case-insensitive-duplicate": (duplicate("DATA-0.OCFD"),
                                       "'DATA-0.OCFD' next to 'data-0.ocfd'"),
        "index-ocf-upper-case": (shard_path("INDEX.OCF"), "'INDEX.OCF'"),
        "index-ocf-mixed-case": (shard_path("Index.ocf"), "'Index.ocf'"),
        "device-con": (shard_path("CON"), "'CON', a Windows device name"),
        "device-nul-extension": (shard_path("nul.ocfd"), "'nul.ocfd' (device NUL)"),
        "device-com1": (shard_path("Com1.ocfd"), "'Com1.ocfd' (device COM1)"),
        "device-lpt9-two-dots": (shard_path("lpt9.tar.gz"), "'lpt9.tar.gz' (device LPT9)"),
        "device-aux": (shard_path("AUX"), "'AUX'"),
        "device-prn": (shard_path("prn.x"), "'prn.x'"),
        "trailing-dot": (shard_path("data-0."), "'data-0.', which ends with a dot"),
    }
    for name, (mutation, what) in portability.items():
        r.directory(f"shard.portable-{name}", ["R-SHARD-005"], "INVALID",
                    f"A valid directory checkpoint whose shard list holds {what}.", mutation)

    def length(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.shards[1].length = value
        return mutate

    for name, value in {"63": 63, "0": 0, "2-63": 1 << 63, "max-u64": (1 << 64) - 1}.items():
        r.directory(f"shard.length-{name}", ["R-SHARD-002"], "INVALID",
                    f"A valid directory checkpoint whose external shard's recorded length is "
                    f"{value}, outside [64, 2^63-1].", length(value))

    r.directory("shard.length-largest-valid", ["R-SHARD-002"], "MALFORMED",
                "A valid directory checkpoint whose external shard's recorded length is "
                "2^63-1, within [64, 2^63-1], but not the size of the file.",
                length((1 << 63) - 1))
    r.directory("shard.missing-file", ["R-SHARD-002"], "NOT_FOUND",
                "A valid directory checkpoint whose shard file data-0.ocfd was deleted.",
                change=lambda files: files.pop("data-0.ocfd"))

    def unused(builder: Builder) -> Builder:
        builder.shard_names.append("unused.ocfd")
        builder.regions.append(bytearray())
        return builder

    r.blob("shard.names-the-index-file-itself", ["R-SHARD-006"], "INVALID",
           f"A single file {FILE} that lists an external shard {FILE} of its own length and "
           "stores its tensor 'w' there: a shard is never the index file itself.",
           _self_referencing())
    r.directory("shard.missing-unused-file", ["R-SHARD-002"], "NOT_FOUND",
                "A directory checkpoint listing a shard 'unused.ocfd' that no block uses and "
                "that does not exist.", builder=unused(directory_base()),
                change=lambda files: files.pop("unused.ocfd"))

    def resize(delta: int) -> Callable[[dict[str, bytes]], None]:
        def change(files: dict[str, bytes]) -> None:
            data = files["data-0.ocfd"]
            files["data-0.ocfd"] = data[:delta] if delta < 0 else data + bytes(delta)
        return change

    r.directory("shard.shorter-than-recorded", ["R-SHARD-002"], "MALFORMED",
                "A valid directory checkpoint whose shard file lost its last byte.",
                change=resize(-1))
    r.directory("shard.longer-than-recorded", ["R-SHARD-002"], "MALFORMED",
                "A valid directory checkpoint whose shard file has one zero byte appended.",
                change=resize(1))

    def damage_preamble(files: dict[str, bytes]) -> None:
        files["data-0.ocfd"] = patch(files["data-0.ocfd"], 1, b"X")

    r.directory("shard.bad-preamble", ["R-SHARD-002"], "MALFORMED",
                "A valid directory checkpoint whose shard file has 'X' in place of 'O' in its "
                "preamble magic.", change=damage_preamble)

    def to_directory(files: dict[str, bytes]) -> None:
        files.pop("data-0.ocfd")
        files["data-0.ocfd/placeholder"] = b"a directory, not a shard file\n"

    r.directory("shard.is-a-directory", ["R-SHARD-002"], "NOT_FOUND",
                "A valid directory checkpoint whose shard name is a directory, not a regular "
                "file.", change=to_directory)
    symlinked_shards(r)


def symlinked_shards(r: Rejects) -> None:
    """A shard name that is a symbolic link, to a valid shard or to another file: never
    followed out of the checkpoint's directory [R-SHARD-002]. The case format cannot
    hold a link, so the case declares it and the harness makes it in a copy."""
    builder = directory_base()
    files = builder.files(builder.index())
    shard = files.pop("data-0.ocfd")
    r.files("shard.symlink-to-valid-shard", ["R-SHARD-002"], "NOT_FOUND",
            "A valid directory checkpoint whose shard data-0.ocfd is a symbolic link to the "
            "same shard, byte for byte, outside the checkpoint directory.",
            {**in_directory(files), "elsewhere/data-0.ocfd": shard},
            links={f"{DIRECTORY}/data-0.ocfd": "../elsewhere/data-0.ocfd"})
    r.files("shard.symlink-to-other-file", ["R-SHARD-002"], "NOT_FOUND",
            "A directory checkpoint whose shard data-0.ocfd is a symbolic link to a file "
            "that is no shard (a text file of the right length) outside the checkpoint "
            "directory.",
            {**in_directory(files), "elsewhere/notes.txt": b"root:x:0:0\n".ljust(len(shard))},
            links={f"{DIRECTORY}/data-0.ocfd": "../elsewhere/notes.txt"})


# -- tables ----------


def tables(r: Rejects) -> None:
    def column(table: str, name: str, action: str) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            values = getattr(getattr(index, table), name)
            if action == "drop":
                del values[-1]
            elif action == "clear":
                del values[:]
            else:
                values.append(values[-1] if len(values) else 0)
        return mutate

    tensor_columns = [("keys", "drop"), ("dtypes", "drop"), ("ranks", "add"),
                      ("slice_counts", "clear"), ("dims", "drop"), ("dims", "add")]
    for name, action in tensor_columns:
        what = {"drop": "loses its last value", "add": "gets one more value",
                "clear": "is empty"}[action]
        r.index(f"table.{name.replace('_', '-')}-{action}", ["R-TABLE-001"], "INVALID",
                f"A valid file of two tensors whose TensorTable.{name} {what}.",
                column("tensors", name, action))
    block_columns = [("shards", "drop"), ("offsets", "add"), ("stored_lengths", "drop"),
                     ("raw_lengths", "add"), ("codecs", "drop"), ("byte_shuffles", "clear"),
                     ("chunk_sizes", "add")]
    for name, action in block_columns:
        what = {"drop": "loses its last value", "add": "gets one more value",
                "clear": "is empty"}[action]
        r.index(f"table.{name.replace('_', '-')}-{action}", ["R-TABLE-002"], "INVALID",
                f"A valid file of two blocks whose BlockTable.{name} {what}.",
                column("blocks", name, action))
    r.index("table.blocks-absent", ["R-TABLE-002"], "INVALID",
            "A valid file of two tensors whose BlockTable is removed.",
            lambda index: index.ClearField("blocks"))
    r.index("table.tensors-absent", ["R-TABLE-002"], "INVALID",
            "A valid file whose TensorTable is removed while its BlockTable keeps two blocks.",
            lambda index: index.ClearField("tensors"))
    for name, action in [("slice_starts", "drop"), ("slice_extents", "add")]:
        r.index(f"table.{name.replace('_', '-')}-{action}", ["R-TABLE-002"], "INVALID",
                f"A valid file with a tensor in two slices whose BlockTable.{name} "
                f"{'loses its last value' if action == 'drop' else 'gets one more value'}.",
                column("blocks", name, action), builder=sliced_base())

    def whole_with_boxes(index: index_pb2.Index) -> None:
        index.blocks.slice_starts.extend([0, 0])
        index.blocks.slice_extents.extend([2, 3])

    r.index("table.slice-values-without-slices", ["R-TABLE-002"], "INVALID",
            "A valid file of tensors stored whole whose slice_starts and slice_extents hold "
            "a box anyway.", whole_with_boxes)
    r.index("table.chunk-crcs-drop", ["R-CHUNK-002", "R-TABLE-002"], "INVALID",
            "A valid file whose chunk_crcs loses its last value.",
            column("blocks", "chunk_crcs", "drop"))
    r.index("table.chunk-crcs-add", ["R-CHUNK-002", "R-TABLE-002"], "INVALID",
            "A valid file whose chunk_crcs gets one more value.",
            column("blocks", "chunk_crcs", "add"))
    builder = base_builder()
    builder.add("empty", "float32", [0], b"")

    def crc_for_empty(index: index_pb2.Index) -> None:
        index.blocks.chunk_crcs.append(0)

    r.index("table.chunk-crc-for-empty-block", ["R-CHUNK-002", "R-TABLE-002"], "INVALID",
            "A valid file whose last tensor has no elements (a block of no chunk) but "
            "chunk_crcs holds a CRC for it (0, the CRC of no bytes).", crc_for_empty,
            builder=builder)

    def stored_for_none(index: index_pb2.Index) -> None:
        index.blocks.chunk_stored_lengths.append(24)

    r.index("table.chunk-stored-lengths-for-none-block", ["R-CHUNK-004", "R-TABLE-002"],
            "INVALID", "A valid file of CODEC_NONE blocks whose chunk_stored_lengths holds a "
            "value.", stored_for_none)
    r.index("table.chunk-stored-lengths-drop", ["R-CHUNK-004", "R-TABLE-002"], "INVALID",
            "A valid file with a 2-chunk zstd block whose chunk_stored_lengths loses its last "
            "value.", column("blocks", "chunk_stored_lengths", "drop"), builder=zstd_base())


# -- tensors ----------


def tensors(r: Rejects) -> None:
    def key(position: int, value: str) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.tensors.keys[position] = value
        return mutate

    r.index("tensor.key-empty", ["R-TENSOR-001"], "INVALID",
            "A valid file whose first tensor key is the empty string.", key(0, ""))
    r.index("tensor.key-with-nul", ["R-TENSOR-001"], "INVALID",
            "A valid file whose second tensor key is 'st\\0ep', with a NUL byte.",
            key(1, "st\u0000ep"))
    r.index("tensor.key-4097-bytes", ["R-TENSOR-001"], "LIMIT_EXCEEDED",
            "A valid file whose first key is 4097 bytes long, one above the limit.",
            key(0, "k" * 4097))
    r.index("tensor.key-4097-bytes-multibyte", ["R-TENSOR-001"], "LIMIT_EXCEEDED",
            "A valid file whose first key is 1366 three-byte characters (4098 UTF-8 bytes, "
            "1366 code points).", key(0, "\u20ac" * 1366))
    r.index("tensor.duplicate-keys", ["R-TENSOR-001"], "INVALID",
            "A valid file of two tensors whose second key is changed to equal the first.",
            key(1, "w"))
    builder = base_builder()
    builder.add("x", "uint8", [1], b"\x01")
    r.index("tensor.duplicate-keys-apart", ["R-TENSOR-001"], "INVALID",
            "A valid file of three tensors whose third key is changed to equal the first.",
            key(2, "w"), builder=builder)

    def dtype(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.tensors.dtypes[0] = value
        return mutate

    for name, value in {"unspecified": 0, "19": 19, "1000": 1000, "minus-1": -1}.items():
        r.index(f"tensor.dtype-{name}", ["R-TENSOR-002"], "INVALID",
                f"A valid file whose first tensor's dtype is {value}, not a defined data "
                "type.", dtype(value))

    builder = base_builder()
    builder.add("deep", "uint8", [1] * 33, b"\x05")
    r.blob("tensor.rank-33", ["R-TENSOR-003"], "LIMIT_EXCEEDED",
           "A tensor of rank 33 (all dimensions 1), one above the limit.", builder.single())

    def shape(dims: list[int]) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.tensors.ranks[0] = len(dims)
            del index.tensors.dims[:2]
            for n, d in enumerate(dims):
                index.tensors.dims.insert(n, d)
        return mutate

    shapes = {
        "elements-over-2-58": ([1 << 29, (1 << 29) + 1], "2^58 + 2^29 elements"),
        "elements-2-62": ([1 << 31, 1 << 31], "2^62 elements"),
        "zero-size-over-2-58": ([1 << 29, 0, (1 << 29) + 1],
                                "shape [2^29, 0, 2^29 + 1]: no element, but non-zero "
                                "dimensions multiplying to 2^58 + 2^29"),
        "dims-product-wraps-to-zero": ([1 << 32, 1 << 32],
                                       "2^64 elements, 0 in 64-bit wrapping arithmetic"),
        "dims-product-wraps-to-small": ([1 << 33, (1 << 31) + 1, 2],
                                        "2^65 + 2^34 elements, 2^34 in 64-bit arithmetic"),
        "dim-over-2-58": ([(1 << 58) + 1], "one dimension of 2^58 + 1"),
        "zero-dim-first": ([0, 1 << 40, 1 << 30], "shape [0, 2^40, 2^30]: no element, but "
                           "non-zero dimensions multiplying to 2^70"),
        "zero-dim-last": ([1 << 40, 1 << 30, 0], "shape [2^40, 2^30, 0]"),
    }
    for name, (dims, what) in shapes.items():
        requirements = ["R-TENSOR-003"] + (["R-LIMIT-002"] if "wraps" in name else [])
        r.index(f"tensor.{name}", requirements, "LIMIT_EXCEEDED",
                f"A valid file whose first tensor's shape is changed to {what}.", shape(dims))

    def raw_length(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.raw_lengths[0] = value
            index.blocks.stored_lengths[0] = value
        return mutate

    r.index("tensor.raw-length-short", ["R-TENSOR-005"], "INVALID",
            "A valid file whose float32 [2, 3] tensor claims 20 raw and stored bytes instead "
            "of 24.", raw_length(20))
    r.index("tensor.raw-length-long", ["R-TENSOR-005"], "INVALID",
            "A valid file whose float32 [2, 3] tensor claims 28 raw and stored bytes instead "
            "of 24 (the extra bytes are padding).", raw_length(28))
    builder = base_builder()
    # [R-TENSOR-003] keeps element count x item size within 2^62, so the product
    # cannot wrap in 64 bits any more; it still does in 32.
    append_tensor(builder, "huge", "complex128", [1 << 58],
                  [Block(0, builder.put(0, b""), 0, 0)])
    r.blob("tensor.raw-length-wraps", ["R-TENSOR-005", "R-LIMIT-002"], "INVALID",
           "A complex128 tensor of 2^58 elements (the limit) with raw length 0: 2^58 x 16 is "
           "2^62, 0 in 32-bit wrapping arithmetic.", builder.single())

    def slice_raw(index: index_pb2.Index) -> None:
        index.blocks.raw_lengths[0] = 24
        index.blocks.stored_lengths[0] = 24

    r.index("tensor.raw-length-of-slice", ["R-TENSOR-005", "R-SLICE-003"], "INVALID",
            "A valid file whose int16 [4, 3] tensor is in two [2, 3] slices, the first "
            "claiming 24 raw bytes (the whole tensor's) instead of 12.", slice_raw,
            builder=sliced_base())

    def slice_count(count: int) -> Mutation:
        def mutation(index: index_pb2.Index) -> None:
            index.tensors.slice_counts[0] = count
        return mutation

    r.index("tensor.slice-count-65537", ["R-SLICE-004"], "LIMIT_EXCEEDED",
            "A valid file whose first tensor (rank 2) has the slice count 65537, one above "
            "the limit (checked before the block table's length).", slice_count(65537))
    r.index("tensor.slice-count-4097-rank-5", ["R-SLICE-004"], "LIMIT_EXCEEDED",
            "A valid file whose first tensor, of rank 5, has the slice count 4097, one above "
            "the limit for a rank above 4 (checked before the block table's length).",
            slice_count(4097), builder=rank_base(5))
    r.index("tensor.slice-count-4097-rank-4", ["R-SLICE-004", "R-VER-002", "R-TABLE-002"],
            "INVALID",
            "A file stamped format 1.1 whose first tensor, of rank 4, has the slice count "
            "4097: above the 4096 of format 1.1, within the 65536 that format 1.2 allows up "
            "to rank 4, which applies whatever format_minor says; the block table then holds "
            "too few blocks.", slice_count(4097), builder=rank_base(4))


# -- placement of blocks ----------


def data(r: Rejects) -> None:
    builder = Builder()
    raw = samples.ramp("float32", [4])
    builder.regions[0] += bytes(8) + raw
    append_tensor(builder, "w", "float32", [4], [Block(0, 72, 16, 16, chunk_crcs=[crc32c(raw)])])
    r.blob("data.offset-misaligned", ["R-DATA-001"], "INVALID",
           "A float32 tensor whose block really lies at offset 72, not a multiple of 64 (its "
           "checksum matches).", builder.single())

    def offset(position: int, value: int, stored: int | None = None) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.offsets[position] = value
            if stored is not None:
                index.blocks.stored_lengths[position] = stored
        return mutate

    builder = base_builder()
    builder.add("empty", "float32", [0], b"")
    r.index("data.offset-misaligned-empty-block", ["R-DATA-001"], "INVALID",
            "A valid file whose empty tensor's block (no bytes) is at offset 100.",
            offset(2, 100), builder=builder)
    r.index("data.offset-in-preamble", ["R-DATA-002"], "INVALID",
            "A valid file whose first block is moved to offset 0, inside the preamble.",
            offset(0, 0))

    builder = Builder()
    raw = samples.ramp("float32", [32])
    builder.regions[0] += raw[:100]
    append_tensor(builder, "w", "float32", [32],
                  [Block(0, 64, 128, 128, chunk_crcs=[crc32c(raw)])])
    blob = builder.single(pad_index=False)
    assert read_layout(blob).index_offset == 164
    r.blob("data.block-overlaps-index", ["R-DATA-002"], "INVALID",
           "A 128-byte block at offset 64 in a file whose index starts at offset 164, so the "
           "block runs into the index.", blob)
    r.index("data.block-past-end", ["R-DATA-002"], "INVALID",
            "A valid file whose first block is moved to offset 2^40, far past the end of the "
            "file.", offset(0, 1 << 40))
    builder = base_builder()
    builder.add("empty", "float32", [0], b"")

    def past_region(index: index_pb2.Index) -> None:
        index.blocks.offsets[2] = 64 + len(builder.regions[0]) + 64 + 64

    r.index("data.empty-block-past-region", ["R-DATA-002"], "INVALID",
            "A valid file whose empty tensor's block (no bytes) is at an offset past the end "
            "of the data region.", past_region, builder=builder)
    r.index("data.offset-plus-length-wraps", ["R-DATA-002", "R-LIMIT-002"], "INVALID",
            "A valid file whose first block (24 bytes) is moved to offset 2^64-64, whose end "
            "wraps to below the data region's end in 64-bit arithmetic.",
            offset(0, (1 << 64) - 64))

    def huge_stored(index: index_pb2.Index) -> None:
        index.blocks.codecs[0] = CODEC_ZSTD
        index.blocks.stored_lengths[0] = (1 << 64) - 64
        index.blocks.chunk_stored_lengths.append((1 << 64) - 64)

    r.index("data.stored-length-wraps", ["R-DATA-002", "R-LIMIT-002"], "INVALID",
            "A valid file whose first block becomes a zstd block at offset 64 of stored length "
            "2^64-64, whose end is 0 in 64-bit wrapping arithmetic.", huge_stored)

    def short_shard(index: index_pb2.Index) -> None:
        index.shards[1].length = 72

    def cut_shard(files: dict[str, bytes]) -> None:
        files["data-0.ocfd"] = files["data-0.ocfd"][:72]

    r.directory("data.block-past-shard-end", ["R-DATA-002", "R-SHARD-004"], "INVALID",
                "A valid directory checkpoint whose shard file is cut to 72 bytes (and its "
                "recorded length with it), so the 16-byte block at offset 64 runs past the end "
                "of the shard's data region.", short_shard, change=cut_shard)

    builder = Builder()
    builder.add("a", "float32", [16], samples.ramp("float32", [16]))
    builder.add("b", "float32", [16], samples.ramp("float32", [16], step=3))

    def same_offset(index: index_pb2.Index) -> None:
        index.blocks.offsets[1] = index.blocks.offsets[0]

    r.index("data.overlap-same-offset", ["R-DATA-003"], "INVALID",
            "Two 64-byte blocks moved to the same offset.", same_offset, builder=builder)
    builder = Builder()
    builder.add("a", "float32", [32], samples.ramp("float32", [32]))
    builder.add("b", "float32", [16], samples.ramp("float32", [16], step=3))

    def partial(index: index_pb2.Index) -> None:
        index.blocks.offsets[1] = 128

    r.index("data.overlap-partial", ["R-DATA-003"], "INVALID",
            "A 64-byte block moved to offset 128, inside a 128-byte block at offset 64.",
            partial, builder=builder)
    builder = sliced_base()

    def slice_and_whole(index: index_pb2.Index) -> None:
        index.blocks.offsets[2] = index.blocks.offsets[1]

    r.index("data.overlap-slice-and-whole", ["R-DATA-003"], "INVALID",
            "A whole tensor's block moved to the offset of a slice of another tensor.",
            slice_and_whole, builder=builder)

    def slices_overlap(index: index_pb2.Index) -> None:
        index.blocks.offsets[1] = index.blocks.offsets[0]

    r.index("data.overlap-two-slices", ["R-DATA-003"], "INVALID",
            "The second slice of a tensor moved to the offset of its first slice.",
            slices_overlap, builder=sliced_base())
    builder = Builder(["", "data-0.ocfd"])
    builder.add("a", "float32", [16], samples.ramp("float32", [16]), shard=1)
    builder.add("b", "float32", [16], samples.ramp("float32", [16], step=2), shard=1)
    r.directory("data.overlap-in-shard", ["R-DATA-003"], "INVALID",
                "Two blocks of an external shard moved to the same offset.", same_offset,
                builder=builder)


# -- element encodings ----------


def element_bytes(r: Rejects) -> None:
    def one(name: str, description: str, builder: Builder, requirements: list[str]) -> None:
        r.blob(f"dtype.{name}", requirements, "INVALID", description, builder.single())

    builder = base_builder()
    builder.add("flags", "bool", [3], b"\x01\x00\x02")
    one("bool-byte-2", "A bool tensor holding the bytes 01 00 02 (its checksum matches).",
        builder, ["R-DTYPE-002"])
    builder = Builder()
    builder.add("flag", "bool", [], b"\x80")
    one("bool-scalar-byte-80", "A bool scalar holding the byte 80.", builder, ["R-DTYPE-002"])
    builder = Builder()
    builder.add("flags", "bool", [2, 2], b"\x00\x01\x01\xff", slices=[([0, 0], [1, 2]),
                                                                      ([1, 0], [1, 2])])
    one("bool-byte-ff-in-slice", "A bool tensor in two slices, the second holding FF.",
        builder, ["R-DTYPE-002", "R-SLICE-003"])
    builder = Builder()
    builder.add("flags", "bool", [64], bytes(63) + b"\x03", codec=CODEC_ZSTD)
    one("bool-byte-3-compressed", "A zstd-compressed bool tensor whose last byte is 03.",
        builder, ["R-DTYPE-002"])

    def strings(key: str, lengths: list[int], payload: bytes, **options: Any) -> Builder:
        builder = Builder()
        raw = struct.pack(f"<{len(lengths)}Q", *lengths) + payload
        block = builder.encode(raw, 0, **options)
        append_tensor(builder, key, "bytes", [len(lengths)], [block])
        return builder

    builder = Builder()
    raw = semantic.join_strings([b"a", b"b", b"c"])[:16]
    append_tensor(builder, "s", "bytes", [3], [builder.encode(raw, 0)])
    one("bytes-raw-length-below-table", "A bytes tensor of 3 elements whose raw length is 16, "
        "less than its 24-byte length table.", builder, ["R-DTYPE-003"])
    one("bytes-lengths-exceed-payload", "A bytes tensor whose lengths 5 and 5 add up to more "
        "than its 8 payload bytes.", strings("s", [5, 5], b"abcdefgh"), ["R-DTYPE-003"])
    one("bytes-lengths-short-of-payload", "A bytes tensor whose lengths 1 and 1 add up to less "
        "than its 3 payload bytes.", strings("s", [1, 1], b"abc"), ["R-DTYPE-003"])
    one("bytes-lengths-wrap", "A bytes tensor whose lengths 2^64-1 and 3 add up to its 2 "
        "payload bytes only in 64-bit wrapping arithmetic.",
        strings("s", [(1 << 64) - 1, 3], b"ab"), ["R-DTYPE-003", "R-LIMIT-002"])
    one("bytes-first-length-huge", "A bytes tensor whose first length is 2^63 and whose "
        "payload is empty.", strings("s", [1 << 63, 0], b""), ["R-DTYPE-003"])
    one("bytes-lengths-exceed-payload-compressed", "A zstd-compressed bytes tensor whose "
        "lengths add up to more than its payload.",
        strings("s", [4, 9], b"abcdefgh", codec=CODEC_ZSTD), ["R-DTYPE-003"])
    builder = Builder()
    good = semantic.join_strings([b"ab", b"c"])
    bad = struct.pack("<2Q", 1, 7) + b"de"
    append_tensor(builder, "s", "bytes", [2, 2],
                  [Block(**{**vars(builder.encode(good, 0)), "start": [0, 0], "extent": [1, 2]}),
                   Block(**{**vars(builder.encode(bad, 0)), "start": [1, 0], "extent": [1, 2]})],
                  sliced=True)
    one("bytes-lengths-wrong-in-slice", "A bytes tensor in two slices whose second slice's "
        "lengths do not add up to its payload.", builder, ["R-DTYPE-003", "R-SLICE-003"])
    builder = Builder()
    builder.add("s", "bytes", [2], semantic.join_strings([b"ab", b"cd"]), codec=CODEC_ZSTD)

    def shuffled(index: index_pb2.Index) -> None:
        index.blocks.byte_shuffles[0] = True

    r.index("dtype.bytes-byte-shuffle", ["R-CODEC-002"], "INVALID",
            "A zstd bytes tensor whose block is marked byte_shuffle, which needs a fixed-size "
            "dtype.", shuffled, builder=builder)


# -- chunks and codecs ----------


def chunks(r: Rejects) -> None:
    def chunk_size(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.chunk_sizes[0] = value
        return mutate

    for name, value in {"5000": 5000, "64": 64, "4032": 4032, "2-30-plus-64": (1 << 30) + 64,
                        "max-u64": (1 << 64) - 64}.items():
        r.index(f"chunk.size-{name}", ["R-CHUNK-001"], "INVALID",
                f"A valid file whose first block's chunk_size is {value}, not 0 or a multiple "
                "of 64 in [4096, 2^30].", chunk_size(value))

    def many_chunks(count: int) -> bytes:
        builder = Builder()
        stored = b"\x00" * 64
        offset = builder.put(0, stored)
        raw = 4096 * count
        append_tensor(builder, "big", "uint8", [raw],
                      [Block(0, offset, 64, raw, CODEC_ZSTD, False, 4096, [], [64])])
        return builder.single()

    r.blob("chunk.count-over-2-24", ["R-CHUNK-001", "R-LIMIT-002"], "LIMIT_EXCEEDED",
           "A zstd block of 4096 x (2^24 + 1) raw bytes in chunks of 4096: 2^24 + 1 chunks, one "
           "above the limit, checked before the count of chunk_crcs.",
           many_chunks((1 << 24) + 1))
    r.blob("chunk.count-2-24-crcs-missing", ["R-CHUNK-001", "R-CHUNK-002"], "INVALID",
           "A zstd block of exactly 2^24 chunks (the limit, allowed) whose chunk_crcs is "
           "empty.", many_chunks(1 << 24))

    def codec(value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.codecs[0] = value
        return mutate

    for name, value in {"unspecified": 0, "3": 3, "minus-1": -1}.items():
        r.index(f"chunk.codec-{name}", ["R-CHUNK-003"], "INVALID",
                f"A valid file whose first block's codec is {value}.", codec(value))

    def stored_length(index: index_pb2.Index) -> None:
        index.blocks.stored_lengths[0] = 28

    r.index("chunk.none-stored-not-raw", ["R-CHUNK-003"], "INVALID",
            "A valid file whose first CODEC_NONE block claims 28 stored bytes for its 24 raw "
            "bytes.", stored_length)

    def shuffle_none(index: index_pb2.Index) -> None:
        index.blocks.byte_shuffles[0] = True

    r.index("chunk.none-with-shuffle", ["R-CHUNK-003"], "INVALID",
            "A valid file whose first CODEC_NONE block is marked byte_shuffle.", shuffle_none)

    def lengths(values: list[int], stored: int | None = None) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            del index.blocks.chunk_stored_lengths[:]
            index.blocks.chunk_stored_lengths.extend(values)
            if stored is not None:
                index.blocks.stored_lengths[0] = stored
        return mutate

    zb = zstd_base()
    t = zb.tensors[0].blocks[0].chunk_stored_lengths
    r.index("chunk.zstd-length-zero", ["R-CHUNK-004"], "INVALID",
            "A valid file whose 2-chunk zstd block's chunk stored lengths become 0 and the "
            "block's whole stored length.", lengths([0, t[0] + t[1]]), builder=zstd_base())
    r.index("chunk.zstd-lengths-sum-short", ["R-CHUNK-004"], "INVALID",
            "A valid file whose zstd block's chunk stored lengths add up to one byte less "
            "than its stored length.", lengths([t[0], t[1] - 1]), builder=zstd_base())
    r.index("chunk.zstd-lengths-sum-wraps", ["R-CHUNK-004", "R-LIMIT-002"], "INVALID",
            "A zstd block of stored length 0 whose two chunk stored lengths are 2^63 each, "
            "adding up to 0 only in 64-bit wrapping arithmetic.",
            lengths([1 << 63, 1 << 63], stored=0), builder=zstd_base())
    builder = Builder()
    offset = builder.put(0, bytes(8))
    append_tensor(builder, "empty", "float32", [0], [Block(0, offset, 8, 0, CODEC_ZSTD)])
    r.blob("chunk.zstd-empty-block-stores-bytes", ["R-CHUNK-004"], "INVALID",
           "A zstd block of raw length 0 (no chunk) that claims the 8 stored bytes at its "
           "offset.", builder.single())

    def ratio(raw: int) -> bytes:
        builder = Builder()
        offset = builder.put(0, b"\x28")
        append_tensor(builder, "dense", "uint8", [raw],
                      [Block(0, offset, 1, raw, CODEC_ZSTD, False, 0, [crc32c(b"\x28")], [1])])
        return builder.single()

    r.blob("chunk.zstd-ratio-over-limit", ["R-CHUNK-004"], "LIMIT_EXCEEDED",
           "A zstd chunk of 1 stored byte claiming 32769 raw bytes, more than 32768 per "
           "stored byte.", ratio(32769))
    r.blob("chunk.zstd-ratio-at-limit", ["R-CHUNK-004", "R-CODEC-001"], "MALFORMED",
           "A zstd chunk of 1 stored byte (28, checksum correct) claiming 32768 raw bytes: "
           "within the limit, so the frame is decoded, and it is not a frame.", ratio(32768))


def checksums(r: Rejects) -> None:
    def crc(position: int, change: Callable[[int], int]) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.blocks.chunk_crcs[position] = change(index.blocks.chunk_crcs[position])
        return mutate

    r.index("crc.chunk-crc-changed", ["R-CRC-001"], "INTEGRITY",
            "A valid file whose first chunk CRC-32C has its lowest bit flipped.",
            crc(0, lambda v: v ^ 1))
    blob = base_builder().single()
    r.blob("crc.data-byte-changed", ["R-CRC-001"], "INTEGRITY",
           "A valid file with one bit of the first tensor's stored bytes flipped.",
           patch(blob, 66, bytes([blob[66] ^ 0x10])))

    def masked(value: int) -> int:
        return ((((value >> 15) | (value << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    r.index("crc.masked", ["R-CRC-001"], "INTEGRITY",
            "A valid file whose first chunk CRC is stored masked as TensorFlow does; OCF stores "
            "it unmasked.", crc(0, masked))
    r.index("crc.crc32-not-crc32c", ["R-CRC-001"], "INTEGRITY",
            "A valid file whose first chunk checksum is the CRC-32 (zlib polynomial) of its "
            "bytes instead of the CRC-32C.",
            crc(0, lambda v: _crc32_of_first_block()))
    builder = Builder()
    builder.add("u16", "uint16", [5000], samples.ramp("uint16", [5000], step=13),
                chunk_size=4096)
    r.index("crc.second-chunk", ["R-CRC-001", "R-CHUNK-002"], "INTEGRITY",
            "A valid 3-chunk block whose second chunk CRC is changed.",
            crc(1, lambda v: v ^ 0x80000000), builder=builder)

    def crc_of_raw(index: index_pb2.Index) -> None:
        index.blocks.chunk_crcs[0] = crc32c(samples.ramp("float64", [1024])[:4096])

    r.index("crc.zstd-crc-of-raw-bytes", ["R-CRC-001"], "INTEGRITY",
            "A valid zstd block whose first chunk CRC is computed over the decoded bytes, not "
            "the stored frame.", crc_of_raw, builder=zstd_base())
    r.index("crc.slice", ["R-CRC-001", "R-SLICE-003"], "INTEGRITY",
            "A valid file whose tensor in two slices has a wrong CRC for its second slice.",
            crc(1, lambda v: v ^ 4), builder=sliced_base())

    def flip_shard(files: dict[str, bytes]) -> None:
        files["data-0.ocfd"] = patch(files["data-0.ocfd"], 64, b"\x99")

    r.directory("crc.external-shard", ["R-CRC-001"], "INTEGRITY",
                "A valid directory checkpoint whose shard file has its first data byte "
                "changed.", change=flip_shard)
    builder = Builder()
    builder.add("flags", "bool", [3], b"\x01\x00\x02")
    r.index("crc.checked-before-bool-bytes", ["R-CRC-001", "R-DTYPE-002", "R-ERR-002"],
            "INTEGRITY",
            "A bool tensor holding 02 whose chunk CRC is also wrong: checksums come before "
            "element values.", crc(0, lambda v: v ^ 1), builder=builder)
    builder = Builder()
    append_tensor(builder, "s", "bytes", [1], [builder.encode(struct.pack("<Q", 9) + b"ab", 0)])
    r.index("crc.checked-before-byte-string-table", ["R-CRC-001", "R-DTYPE-003", "R-ERR-002"],
            "INTEGRITY",
            "A bytes tensor whose length table does not add up and whose chunk CRC is also "
            "wrong: checksums come first.", crc(0, lambda v: v ^ 1), builder=builder)


def _crc32_of_first_block() -> int:
    import zlib

    return zlib.crc32(samples.ramp("float32", [2, 3]))


def frames(r: Rejects) -> None:
    content = bytes(range(200))

    def case(name: str, description: str, stored: bytes, raw: bytes = content,
             requirements: list[str] | None = None) -> None:
        builder = Builder()
        offset = builder.put(0, stored)
        append_tensor(builder, "u8", "uint8", [len(raw)],
                      [Block(0, offset, len(stored), len(raw), CODEC_ZSTD, False, 0,
                             [crc32c(stored)], [len(stored)])])
        r.blob(f"codec.{name}", requirements or ["R-CODEC-001"], "MALFORMED",
               description + " (its chunk CRC matches).", builder.single())

    good = raw_frame(content)
    case("not-a-frame", "A zstd chunk whose stored bytes are ASCII text, not a frame",
         b"this is not a zstd frame")
    reserved = bytearray(good)
    reserved[6] |= 0b110  # Block_Type 3, reserved
    case("reserved-block-type", "A frame whose block header says Block_Type 3 (reserved)",
         bytes(reserved))
    case("truncated", "A frame missing its last byte", good[:-1])
    case("trailing-bytes", "A valid frame followed by one zero byte", good + b"\x00")
    case("two-frames", "Two frames of 100 bytes each where one frame of 200 is required",
         raw_frame(content[:100]) + raw_frame(content[100:]))
    skippable = struct.pack("<II", 0x184D2A50, 4) + b"skip"
    case("skippable-frame-before", "A skippable frame followed by a valid frame",
         skippable + good)
    case("skippable-frame-after", "A valid frame followed by a skippable frame",
         good + skippable)
    case("content-size-larger", "A frame of 200 bytes whose Frame_Content_Size says 201",
         raw_frame(content, declared_size=201))
    case("content-size-smaller", "A frame of 199 bytes, its Frame_Content_Size 199, for a "
         "chunk of 200 raw bytes", raw_frame(content[:199]))
    case("decodes-short-without-size", "A frame without Frame_Content_Size that decodes to 199 "
         "bytes for a chunk of 200", raw_frame(content[:199], content_size=False,
                                              window_log=10))
    case("decodes-long-without-size", "A frame without Frame_Content_Size that decodes to 201 "
         "bytes for a chunk of 200",
         raw_frame(content + b"!", content_size=False, window_log=10))
    case("dictionary", "A frame that needs dictionary 7", raw_frame(content, dictionary_id=7))
    checked = bytearray(zstd(content, checksum=True))
    checked[-1] ^= 0xFF
    case("content-checksum-mismatch", "A frame whose Content_Checksum does not match its "
         "content", bytes(checked))
    r.index("codec.chunk-crc-before-decoding", ["R-CRC-001", "R-CODEC-001", "R-ERR-002"],
            "INTEGRITY",
            "A 3-chunk zstd block whose first chunk has a wrong CRC and whose second chunk is "
            "not a frame: chunks are checked in order, checksum before decoding.",
            _bad_second_chunk, builder=_three_chunk_zstd())


def _three_chunk_zstd(junk_chunk: int = 1) -> Builder:
    builder = Builder()
    raw = samples.ramp("int32", [3000])
    builder.add("i", "int32", [3000], raw, codec=CODEC_ZSTD, chunk_size=4096)
    block = builder.tensors[0].blocks[0]
    # Overwrite a chunk with text of the same length; its CRC then matches the text.
    start = block.offset - 64 + sum(block.chunk_stored_lengths[:junk_chunk])
    length = block.chunk_stored_lengths[junk_chunk]
    junk = (b"not a frame " * (length // 12 + 1))[:length]
    builder.regions[0][start:start + length] = junk
    block.chunk_crcs[junk_chunk] = crc32c(junk)
    return builder


def _bad_second_chunk(index: index_pb2.Index) -> None:
    index.blocks.chunk_crcs[0] ^= 1


def decode_failures(r: Rejects) -> None:
    r.blob("codec.second-chunk-not-a-frame", ["R-CODEC-001"], "MALFORMED",
           "A 3-chunk zstd block whose second chunk is text of the right length, its CRC "
           "matching, so decoding it fails.", _three_chunk_zstd().single())


# -- slices ----------


def slice_cases(r: Rejects) -> None:
    def boxes(values: list[tuple[list[int], list[int]]]) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            del index.blocks.slice_starts[:]
            del index.blocks.slice_extents[:]
            for start, extent in values:
                index.blocks.slice_starts.extend(start)
                index.blocks.slice_extents.extend(extent)
        return mutate

    # sliced_base(): int16 [4, 3] in boxes ([0, 0], [2, 3]) and ([2, 0], [2, 3]).
    cases = {
        "extent-zero": ("R-SLICE-001", [([0, 0], [2, 3]), ([2, 0], [2, 0])],
                        "the second box's extent is [2, 0]"),
        "outside-shape": ("R-SLICE-001", [([0, 0], [2, 3]), ([3, 0], [2, 3])],
                          "the second box starts at row 3 with 2 rows, past row 4"),
        "start-plus-extent-wraps": ("R-SLICE-001", [([0, 0], [2, 3]),
                                                    ([(1 << 64) - 1, 0], [3, 3])],
                                    "the second box starts at 2^64-1 with extent 3, which "
                                    "ends at row 2 in 64-bit wrapping arithmetic"),
        "overlap": ("R-SLICE-002", [([0, 0], [2, 3]), ([1, 0], [2, 3])],
                    "the second box starts at row 1, overlapping the first and leaving row 3 "
                    "uncovered"),
        "duplicate-box": ("R-SLICE-002", [([0, 0], [2, 3]), ([0, 0], [2, 3])],
                          "both boxes are rows 0-1"),
    }
    for name, (requirement, values, what) in cases.items():
        r.index(f"slice.{name}", [requirement], "INVALID",
                f"A valid file with an int16 [4, 3] tensor in two [2, 3] slices, changed so "
                f"that {what}.", boxes(values), builder=sliced_base())

    builder = Builder()
    builder.add("m", "int16", [4, 3], samples.ramp("int16", [4, 3]),
                slices=[([0, 0], [2, 3]), ([2, 0], [1, 3])])
    r.blob("slice.gap", ["R-SLICE-002"], "INVALID",
           "An int16 tensor of shape [4, 3] whose two slices cover rows 0 to 2 only.",
           builder.single())
    builder = Builder()
    builder.add("m", "uint8", [2, 2], bytes(4), slices=[([0, 0], [1, 2]), ([0, 0], [2, 1])])
    r.blob("slice.overlap-volume-matches", ["R-SLICE-002"], "INVALID",
           "A uint8 [2, 2] tensor in slices of 2 and 2 elements (the right total) that overlap "
           "at [0, 0] and leave [1, 1] uncovered.", builder.single())
    builder = Builder()
    boxes = rows_over_columns(8)
    del boxes[0]  # no row 0 (8 elements) ...
    boxes[-2] = ([8, 6], [8, 2])  # ... but column 6 twice as wide (8 more): 128 in all
    builder.add("m", "uint8", [16, 8], bytes(128), slices=boxes)
    r.blob("slice.rows-over-columns-overlap", ["R-SLICE-002"], "INVALID",
           "A uint8 [16, 8] matrix in 15 slices: rows 1 to 7 whole, then columns 0 to 7 of "
           "the bottom half, column 6 two wide, so that it overlaps column 7 while the "
           "element counts still add up to 128 (row 0 is uncovered); not the cells of one "
           "grid.", builder.single())
    builder = Builder()
    h = LARGE_CROSS
    boxes = rows_over_columns(h)
    del boxes[0]
    boxes[-2] = ([h, h - 2], [h, 2])
    builder.add("m", "uint8", [2 * h, h], large_cross(), slices=boxes, codec=CODEC_ZSTD)
    r.blob("slice.rows-over-columns-4096-overlap", ["R-SLICE-002"], "INVALID",
           "read.slice.rows-over-columns-4096 (a uint8 [4096, 2048] matrix, 2048 whole rows "
           "over 2048 whole columns) less row 0, with column 2046 two wide, so that it "
           "overlaps column 2047 while the element counts still add up: 4095 slices, about "
           "2 million pairs overlapping along each dimension, one pair overlapping.",
           builder.single())
    builder = Builder()
    builder.add("s", "float32", [], struct.pack("<f", 1.0), slices=[([], []), ([], [])])
    r.blob("slice.scalar-twice", ["R-SLICE-002"], "INVALID",
           "A float32 scalar stored as two slices, each the whole scalar.", builder.single())
    builder = Builder()
    append_tensor(builder, "e", "float32", [0, 3],
                  [Block(0, 64, 0, 0, start=[0, 0], extent=[1, 3])], sliced=True)
    r.blob("slice.empty-tensor-sliced", ["R-SLICE-002"], "INVALID",
           "A float32 tensor of shape [0, 3] (no elements) stored as one slice.",
           builder.single())


# -- metadata ----------


def metadata(r: Rejects) -> None:
    builder = base_builder()
    builder.metadata = {"ok": i(1), "deep": nested(33, "list", i(33))}
    r.blob("meta.depth-33-lists", ["R-META-002"], "LIMIT_EXCEEDED",
           "A metadata value at level 33 inside lists, one above the limit (protobuf nesting "
           "68, which parses).", builder.single())
    builder = base_builder()
    builder.metadata = {"deep": nested(49, "list", i(49))}
    r.blob("meta.depth-49-lists", ["R-META-002"], "LIMIT_EXCEEDED",
           "A metadata value at level 49 inside lists: protobuf nesting level 100, which "
           "parses, and far above the metadata limit.", builder.single())
    builder = base_builder()
    value = nested(3, "map", nested(30, "list", i(33)))
    builder.metadata = {"deep": value}
    r.blob("meta.depth-33-mixed", ["R-META-002"], "LIMIT_EXCEEDED",
           "A metadata value at level 33 inside 3 maps and 30 lists.", builder.single())
    builder = base_builder()
    builder.metadata = {"deep": nested(33, "list", None)}
    r.blob("meta.depth-33-null", ["R-META-002"], "LIMIT_EXCEEDED",
           "A null metadata value at level 33 inside lists.", builder.single())
    builder = directory_base()
    builder.metadata = {"deep": nested(33, "list", i(1))}
    r.directory("meta.depth-before-shard-files", ["R-META-002", "R-ERR-002"], "LIMIT_EXCEEDED",
                "A metadata value at level 33 in a directory checkpoint whose shard file is "
                "missing: metadata is checked before shard files.", builder=builder,
                change=lambda files: files.pop("data-0.ocfd"))
    builder = base_builder()
    builder.metadata = {"deep": nested(33, "list", i(1))}
    r.blob("meta.tables-before-depth", ["R-DATA-001", "R-META-002", "R-ERR-002"], "INVALID",
           "A misaligned block and a metadata value at level 33: the tables are checked before "
           "metadata.", builder.single(_misaligned(builder.index())))


def _misaligned(index: index_pb2.Index) -> index_pb2.Index:
    index.blocks.offsets[0] += 8
    return index


# -- object graphs ----------


def graph_cases(r: Rejects) -> None:
    def case(name: str, requirements: list[str], description: str,
             nodes: list[dict[str, Any]], keys: list[str] | None = None,
             category: str = "INVALID", **options: Any) -> None:
        builder = Builder()
        for key in keys if keys is not None else [k for n in nodes
                                                  for _, k in n.get("attributes", [])]:
            builder.add(key, "float32", [], struct.pack("<f", 1.0))
        builder.graph = nodes
        r.blob(f"graph.{name}", requirements, category, description,
               builder.single(**options))

    def example(change: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
        nodes = example_graph()
        change(nodes)
        return nodes

    case("no-nodes", ["R-GRAPH-001"], "An object graph that is present but has no node.", [])
    case("no-nodes-format-1.0", ["R-GRAPH-001", "R-VER-002"],
         "An object graph with no node in a file of format 1.0: presence decides, not the "
         "version.", [], minor=0)
    case("child-id-out-of-range", ["R-GRAPH-002"],
         "The example graph with the root's edge 'model' leading to node 7 of 7.",
         example(lambda n: n[0]["children"].__setitem__(0, ["model", 7])))
    for name, bad in {"empty": "", "slash": "a/b", "leading-dot": ".model", "dot": ".",
                      "dot-dot": "..", "nul": "mo\u0000del"}.items():
        case(f"edge-name-{name}", ["R-GRAPH-003"],
             f"The example graph with the root's edge 'model' renamed {bad!r}.",
             example(lambda n, bad=bad: n[0]["children"].__setitem__(0, [bad, 1])))
        case(f"attribute-name-{name}", ["R-GRAPH-003"],
             f"The example graph with node 3's attribute 'value' renamed {bad!r}.",
             example(lambda n, bad=bad: n[3]["attributes"].__setitem__(
                 0, [bad, "save_counter/.value"])))
    case("edge-name-repeated", ["R-GRAPH-003"],
         "The example graph with the root's edge 'optimizer' renamed 'model', repeating a "
         "name.", example(lambda n: n[0]["children"].__setitem__(1, ["model", 2])))
    case("attribute-name-repeated", ["R-GRAPH-003"],
         "The example graph with a second attribute 'value' on node 3 naming another tensor.",
         example(lambda n: n[3]["attributes"].append(["value", "extra"])),
         keys=["save_counter/.value", "model/dense/kernel/.value",
               "optimizer/.slot/model/dense/kernel/m/.value", "extra"])
    case("attribute-key-missing", ["R-GRAPH-004"],
         "The example graph with node 3's attribute naming 'save_counter/.valu', which is not "
         "a key of the tensor table.",
         example(lambda n: n[3]["attributes"].__setitem__(0, ["value", "save_counter/.valu"])),
         keys=["save_counter/.value", "model/dense/kernel/.value",
               "optimizer/.slot/model/dense/kernel/m/.value"])
    case("attribute-key-of-two-nodes", ["R-GRAPH-004"],
         "The example graph with node 5's attribute naming the tensor of node 3.",
         example(lambda n: n[5]["attributes"].__setitem__(0, ["value", "save_counter/.value"])),
         keys=["save_counter/.value", "model/dense/kernel/.value",
               "optimizer/.slot/model/dense/kernel/m/.value"])
    case("attribute-key-twice-in-one-node", ["R-GRAPH-004"],
         "The example graph with node 3 holding its tensor under two attribute names.",
         example(lambda n: n[3]["attributes"].append(["copy", "save_counter/.value"])),
         keys=["save_counter/.value", "model/dense/kernel/.value",
               "optimizer/.slot/model/dense/kernel/m/.value"])
    case("unreachable-node", ["R-GRAPH-005"],
         "The example graph with an eighth node that no edge or slot reaches.",
         example(lambda n: n.append({"type_name": "Orphan"})))
    case("unreachable-cycle", ["R-GRAPH-005"],
         "The example graph with two more nodes that lead to each other and to the root, "
         "but that nothing reaches.",
         example(lambda n: n.extend([{"children": [["b", 8], ["root", 0]]},
                                     {"children": [["a", 7]]}])))
    # Deeper than a recursive walk survives on a usual thread stack (8 MiB) [R-LIMIT-003].
    depth = 100_000
    chain: list[dict[str, Any]] = [{"children": [["a", n + 1]]} for n in range(depth - 1)]
    case("deep-chain-then-unreachable", ["R-GRAPH-005", "R-LIMIT-003"],
         f"A chain of {depth} nodes (root, then each node's one edge 'a' to the next) and one "
         "more node that nothing reaches: only a walk that does not recurse gets to the end.",
         [*chain, {"type_name": "Last"}, {"type_name": "Orphan"}])
    case("slot-of-unreachable-owner", ["R-GRAPH-005"],
         "The example graph with the root's edge to the optimizer removed: the optimizer and "
         "its slot node are unreachable.",
         example(lambda n: n[0]["children"].pop(1)))
    case("slot-of-unreachable-variable", ["R-GRAPH-005"],
         "The example graph with the model's edge to the dense layer removed: the kernel, and "
         "so its slot node, are unreachable.",
         example(lambda n: n[1]["children"].pop(0)))

    def slot_of_slot(nodes: list[dict[str, Any]]) -> None:
        nodes[2]["slot_variables"].append([6, "v", 7])
        nodes.append({"type_name": "Variable"})

    case("slot-variable-reached-only-by-a-slot", ["R-GRAPH-005"],
         "The example graph with a slot of the optimizer whose variable is the slot node of "
         "another slot: a slot node is reached only when its variable is reached by child "
         "edges.", example(slot_of_slot))

    def slot_change(position: int, value: Any) -> Callable[[list[dict[str, Any]]], None]:
        def change(nodes: list[dict[str, Any]]) -> None:
            nodes[2]["slot_variables"][0][position] = value
        return change

    case("slot-variable-id-out-of-range", ["R-GRAPH-006"],
         "The example graph with the slot's variable node id 7 of 7.", example(slot_change(0, 7)))
    case("slot-node-id-out-of-range", ["R-GRAPH-006"],
         "The example graph with the slot's slot node id 9 of 7.", example(slot_change(2, 9)))
    for name, bad in {"empty": "", "slash": "m/v", "leading-dot": ".m"}.items():
        case(f"slot-name-{name}", ["R-GRAPH-006"],
             f"The example graph with the slot name 'm' changed to {bad!r}.",
             example(slot_change(1, bad)))

    def repeat_slot(nodes: list[dict[str, Any]]) -> None:
        nodes[2]["slot_variables"].append([5, "m", 7])
        nodes.append({"type_name": "Variable"})

    case("slot-repeated", ["R-GRAPH-006"],
         "The example graph with a second slot 'm' of the kernel on the optimizer, naming "
         "another slot node.", example(repeat_slot))

    def slot_with_child(nodes: list[dict[str, Any]]) -> None:
        nodes[6]["children"] = [["inner", 7]]
        nodes.append({"type_name": "Variable"})

    case("slot-node-with-child-edge", ["R-GRAPH-006"],
         "The example graph whose slot node has a child edge of its own (slot nodes may have "
         "none, so that canonical paths stay distinct).", example(slot_with_child))

    def slot_with_slot(nodes: list[dict[str, Any]]) -> None:
        nodes[6]["slot_variables"] = [[5, "s", 7]]
        nodes.append({"type_name": "Variable"})

    case("slot-node-with-slot-variable", ["R-GRAPH-006"],
         "The example graph whose slot node keeps a slot variable of its own.",
         example(slot_with_slot))

    def own_slot(nodes: list[dict[str, Any]]) -> None:
        nodes[2]["slot_variables"].append([5, "self", 2])

    case("slot-node-is-its-owner", ["R-GRAPH-006"],
         "The example graph with a slot of the optimizer whose slot node is the optimizer "
         "itself, a slot node with slot variables of its own.", example(own_slot))

    def deep_then_bad(nodes: list[dict[str, Any]]) -> None:
        nodes[0]["metadata"] = {"deep": nested(33, "list", i(1))}
        nodes[1]["children"] = [["dense", 40]]

    case("checks-node-by-node", ["R-META-002", "R-ERR-002"],
         "The example graph whose root has a metadata value at level 33 (LIMIT_EXCEEDED) and "
         "whose node 1 has an edge to node 40 (INVALID): all checks of one node run before the "
         "next node's.", example(deep_then_bad), category="LIMIT_EXCEEDED")

    def bad_edge_then_deep(nodes: list[dict[str, Any]]) -> None:
        nodes[0]["children"][2] = ["save_counter", 40]
        nodes[4]["metadata"] = {"deep": nested(33, "list", i(1))}

    case("checks-node-by-node-invalid-first", ["R-GRAPH-002", "R-ERR-002"],
         "The example graph whose root has an edge to node 40 (INVALID) and whose node 4 has a "
         "metadata value at level 33.", example(bad_edge_then_deep))
    def deep_and_slot_with_child(nodes: list[dict[str, Any]]) -> None:
        slot_with_child(nodes)
        nodes[7]["metadata"] = {"deep": nested(33, "list", i(1))}

    case("checks-metadata-before-slot-nodes", ["R-META-002", "R-GRAPH-006", "R-ERR-002"],
         "The example graph whose slot node (6) has a child edge to a new last node (7) with a "
         "metadata value at level 33: every node's own checks come before the rule on slot "
         "nodes.", example(deep_and_slot_with_child), category="LIMIT_EXCEEDED")
    case("node-metadata-depth-33", ["R-META-002"],
         "The example graph with a node metadata value at level 33 inside lists.",
         example(lambda n: n[4].__setitem__("metadata", {"deep": nested(33, "list", i(1))})),
         category="LIMIT_EXCEEDED")
    case("node-metadata-depth-33-maps", ["R-FILE-007", "R-META-002"],
         "The example graph with a node metadata value at level 33 inside maps: protobuf "
         "nesting 103, which does not parse.",
         example(lambda n: n[4].__setitem__("metadata", {"deep": nested(33, "map", i(1))})),
         category="MALFORMED")


# -- paths ----------


def paths(r: Rejects) -> None:
    builder = directory_base()
    files = builder.files()
    index = files.pop("index.ocf")
    files[".index.ocf.ocf-tmp-0123456789abcdef"] = index
    r.files("path.directory-without-index", ["R-FILE-008", "R-COMMIT-003"], "NOT_FOUND",
            "A directory holding a shard and a complete index under its temporary name, but no "
            "index.ocf: no checkpoint was committed.", in_directory(files))
    files = builder.files()
    files.pop("index.ocf")
    files["index.ocf/data"] = index
    r.files("path.index-is-a-directory", ["R-FILE-008"], "NOT_FOUND",
            "A directory whose index.ocf is itself a directory, not a regular file.",
            in_directory(files))
    files = builder.files()
    files.pop("index.ocf")
    r.suite.read("reject.path.index-is-a-dangling-symlink",
                 requirements=["R-FILE-008"], description="A directory whose index.ocf is a "
                 "symbolic link to 'gone.ocf', which does not exist: no regular file, so no "
                 "checkpoint.", files=in_directory(files), input=DIRECTORY,
                 expect=error("NOT_FOUND"), links={f"{DIRECTORY}/index.ocf": "gone.ocf"})


# -- order of checks ----------


def order(r: Rejects) -> None:
    r.blob("order.index-crc-before-parse", ["R-FILE-006", "R-ERR-002"], "INTEGRITY",
           "Index bytes that do not parse behind a footer whose checksum does not match them.",
           set_footer_field(base_builder().single(unparsable(b"\xff" * 6)), "index_crc32c", 1))

    def two(first: Callable[[index_pb2.Index], None],
            second: Callable[[index_pb2.Index], None]) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            first(index)
            second(index)
        return mutate

    def set_dtype(position: int, value: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.tensors.dtypes[position] = value
        return mutate

    def set_key(position: int, value: str) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            index.tensors.keys[position] = value
        return mutate

    def rank_40(position: int) -> Mutation:
        def mutate(index: index_pb2.Index) -> None:
            # Tensor 1 ("step") is the scalar; give it rank 40 with 40 dims of 1.
            index.tensors.ranks[position] = 40
            index.tensors.dims.extend([1] * 40)
        return mutate

    r.index("order.keys-before-dtypes", ["R-TENSOR-001", "R-TENSOR-002", "R-FILE-009",
                                         "R-ERR-002"],
            "LIMIT_EXCEEDED",
            "The first tensor has an undefined dtype and the second a key of 5000 bytes: every "
            "key is checked before any dtype. Dtype is an open enum: the value 99 stays in its "
            "column (a runtime that drops it sees a short column, INVALID, instead).",
            two(set_dtype(0, 99), set_key(1, "k" * 5000)))
    r.index("order.dtype-before-rank-one-tensor", ["R-TENSOR-002", "R-TENSOR-003",
                                                   "R-ERR-002"], "INVALID",
            "A tensor with dtype 0 and rank 40: the dtype is checked before the rank.",
            two(set_dtype(1, 0), rank_40(1)))
    r.index("order.dtypes-before-ranks", ["R-TENSOR-002", "R-TENSOR-003", "R-ERR-002"],
            "INVALID",
            "The first tensor has rank 40 and the second an undefined dtype: every dtype is "
            "checked before any rank.", two(_rank_40_first, set_dtype(1, 99)))

    def drop_dtype(index: index_pb2.Index) -> None:
        del index.tensors.dtypes[-1]

    r.index("order.column-lengths-before-keys", ["R-TABLE-001", "R-TENSOR-001", "R-ERR-002"],
            "INVALID",
            "dtypes holds one value fewer than keys, and a key is 5000 bytes: column lengths "
            "come first.", two(drop_dtype, set_key(0, "k" * 5000)))

    def dims_huge(index: index_pb2.Index) -> None:
        index.tensors.dims[0] = 1 << 61
        index.tensors.dims[1] = 4
        del index.blocks.offsets[-1]

    r.index("order.element-limit-before-block-columns", ["R-TENSOR-003", "R-TABLE-002",
                                                         "R-ERR-002"], "LIMIT_EXCEEDED",
            "A shape of 2^63 elements and a block column one value short: the tensor table is "
            "checked before the block table.", dims_huge)

    def overlap(index: index_pb2.Index) -> None:
        index.blocks.offsets[1] = index.blocks.offsets[0]

    builder = Builder(["", "data-0.ocfd"])
    builder.add("a", "float32", [4], samples.ramp("float32", [4]))
    builder.add("b", "float32", [4], samples.ramp("float32", [4], step=2))
    builder.add("c", "float32", [4], samples.ramp("float32", [4], step=3), shard=1)
    r.directory("order.overlap-before-missing-shard", ["R-DATA-003", "R-SHARD-002",
                                                       "R-ERR-002"], "INVALID",
                "Two overlapping blocks and a missing shard file: index checks come before "
                "shard files.", overlap, builder=builder,
                change=lambda files: files.pop("data-0.ocfd"))

    def ratio_and_overlap(index: index_pb2.Index) -> None:
        index.blocks.offsets[1] = index.blocks.offsets[0]

    builder = Builder()
    offset = builder.put(0, b"\x28" * 64)
    append_tensor(builder, "dense", "uint8", [32769 * 64],
                  [Block(0, offset, 64, 32769 * 64, CODEC_ZSTD, False, 0,
                         [crc32c(b"\x28" * 64)], [64])])
    builder.add("w", "float32", [16], samples.ramp("float32", [16]))
    r.index("order.zstd-ratio-before-overlap", ["R-CHUNK-004", "R-DATA-003", "R-ERR-002"],
            "LIMIT_EXCEEDED",
            "A zstd chunk claiming more than 32768 raw bytes per stored byte, and a block "
            "overlapping it: the ratio (T27) is checked before overlaps (T28).",
            ratio_and_overlap, builder=builder)

    builder = Builder()
    builder.add("z_flags", "bool", [2], b"\x01\x05")
    builder.add("a_values", "float32", [2], samples.ramp("float32", [2]))

    def bad_crc_second(index: index_pb2.Index) -> None:
        index.blocks.chunk_crcs[1] ^= 1

    r.index("order.tensors-in-table-order", ["R-DTYPE-002", "R-CRC-001", "R-ERR-002"],
            "INVALID",
            "Tensor 0 ('z_flags') holds the bool byte 05 and tensor 1 ('a_values') has a wrong "
            "chunk CRC: a full verification reads tensors in table order, not key order.",
            bad_crc_second, builder=builder)


def full_verification_order(r: Rejects) -> None:
    """The cases of spec/format.md, "Full verification" [R-VERIFY-001]: each breaks two
    rules that a reader checking in another order reports differently."""
    bad_graph = [{"type_name": "Root", "children": [["x", 5]], "attributes": [["a", "a"]]}]

    builder = Builder(["", "data-0.ocfd"])
    builder.add("a", "float32", [2], samples.ramp("float32", [2]), shard=0)
    builder.add("b", "int32", [3], samples.ramp("int32", [3]), shard=1)
    builder.graph = bad_graph
    r.directory("order.missing-shard-before-graph", ["R-VERIFY-001", "R-SHARD-002",
                                                     "R-GRAPH-002", "R-ERR-002"], "NOT_FOUND",
                "The object graph has an edge to node 5 of 1 and the shard file data-0.ocfd "
                "is missing: shard files (step 16) are checked before the graph.",
                builder=builder, change=lambda files: files.pop("data-0.ocfd"))

    builder = Builder()
    builder.add("a", "float32", [2], samples.ramp("float32", [2]))
    builder.graph = bad_graph

    def bad_crc_first(index: index_pb2.Index) -> None:
        index.blocks.chunk_crcs[0] ^= 1

    r.index("order.graph-before-crc", ["R-VERIFY-001", "R-GRAPH-002", "R-CRC-001",
                                       "R-ERR-002"], "INVALID",
            "The object graph has an edge to node 5 of 1 and the only tensor's chunk CRC is "
            "wrong: the graph is checked before any tensor byte is read.",
            bad_crc_first, builder=builder)

    builder = Builder()
    builder.add("flags", "bool", [4], b"\x02\x01\x01\x00", slices=[([0], [2]), ([2], [2])])

    def bad_crc_second(index: index_pb2.Index) -> None:
        index.blocks.chunk_crcs[1] ^= 1

    r.index("order.slice-bytes-before-next-slice-crc", ["R-VERIFY-001", "R-DTYPE-002",
                                                        "R-CRC-001", "R-ERR-002"], "INVALID",
            "A bool tensor in two slices: slice 0 holds the byte 02 (its CRC matches), slice "
            "1 has a wrong CRC: steps 17 and 18 run block by block.",
            bad_crc_second, builder=builder)
    r.index("order.chunk-decode-before-next-chunk-crc", ["R-VERIFY-001", "R-CODEC-001",
                                                         "R-CRC-001", "R-ERR-002"],
            "MALFORMED",
            "A 3-chunk zstd block: chunk 0 is text of the right length whose CRC matches (it "
            "does not decode), chunk 1 has a wrong CRC: each chunk is verified and decoded "
            "before the next is read.", bad_crc_second, builder=_three_chunk_zstd(0))

    builder = Builder(["", "data-0.ocfd", "data-1.ocfd"])
    builder.add("a", "float32", [2], samples.ramp("float32", [2]), shard=0)
    builder.add("b", "int32", [3], samples.ramp("int32", [3]), shard=1)
    r.directory("order.unused-missing-shard-before-crc", ["R-VERIFY-001", "R-SHARD-002",
                                                          "R-CRC-001", "R-ERR-002"],
                "NOT_FOUND",
                "Tensor 0 has a wrong chunk CRC and data-1.ocfd, listed but used by no block, "
                "is missing: a full verification checks every listed shard file at open.",
                bad_crc_first, builder=builder, change=lambda files: files.pop("data-1.ocfd"))


def _rank_40_first(index: index_pb2.Index) -> None:
    # Tensor 0 ("w", [2, 3]) gets rank 40: its dims become 2, 3 and 38 ones.
    index.tensors.ranks[0] = 40
    for _ in range(38):
        index.tensors.dims.insert(2, 1)


def generate(suite: Suite) -> None:
    r = Rejects(suite)
    file_structure(r)
    versions(r)
    limits(r)
    features(r)
    shards(r)
    tables(r)
    tensors(r)
    data(r)
    element_bytes(r)
    chunks(r)
    checksums(r)
    frames(r)
    decode_failures(r)
    slice_cases(r)
    metadata(r)
    graph_cases(r)
    paths(r)
    order(r)
    full_verification_order(r)
