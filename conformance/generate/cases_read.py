"""Positive read cases: checkpoints every conforming reader reads, with their meaning.

Most are built byte by byte (ocfbytes.Builder); the ``read.writer.*`` cases
are written by the reference writer (ocf.Writer) with a fixed write id, so
that its output is part of the suite too. Expectations come from the
generators' inputs in every case, never from reading the files back.
"""

from __future__ import annotations

import math
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from ocf.v1 import index_pb2

import sample_data as samples
import semantic
from case_dirs import Suite
from ocfbytes import (
    CODEC_ZSTD,
    PREAMBLE,
    Block,
    Builder,
    Tensor,
    crc32c,
    field_bytes,
    field_fixed32,
    field_fixed64,
    field_varint,
    index_of,
    raw_frame,
    read_layout,
    replace_index,
    unpacked,
    zstd,
)
from semantic import b, f, flag, i, lst, mp, nested, s

REPO = Path(__file__).resolve().parents[2]
FILE = "checkpoint.ocf"
DIRECTORY = "checkpoint"


def single(suite: Suite, case_id: str, builder: Builder, requirements: list[str],
           description: str, blob: bytes | None = None, **options: Any) -> None:
    suite.read(case_id, requirements=requirements, description=description,
               files={FILE: builder.single(**options) if blob is None else blob}, input=FILE,
               expect=builder.expect())


def in_directory(files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"{DIRECTORY}/{name}": data for name, data in files.items()}


# -- the spec's own examples ----------


def spec_examples(suite: Suite) -> None:
    # spec/format.md, Appendix A: a format 1.0 file without a header.
    builder = Builder(writer="")
    builder.add("w", "float32", [2], struct.pack("<2f", 1.0, -2.0))
    builder.metadata = {"step": i(7)}
    blob = builder.single(minor=0)
    assert blob == (REPO / "spec/examples/minimal.ocf").read_bytes(), "Appendix A differs"
    single(suite, "read.spec.appendix-a", builder,
           ["R-FILE-001", "R-FILE-002", "R-FILE-004", "R-FILE-005", "R-FILE-006", "R-FILE-007",
            "R-VER-003", "R-DATA-005", "R-CRC-001"],
           "The 220-byte format 1.0 checkpoint of spec/format.md Appendix A, built byte by "
           "byte: one float32 tensor and an integer metadata value.", blob)

    # spec/format.md, "Example: three tensors".
    builder = Builder()
    builder.add("count", "int64", [], struct.pack("<q", 42))
    w = builder.add("w", "float32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6),
                    codec=CODEC_ZSTD)
    e = builder.add("e", "int32", [4, 2], struct.pack("<8i", *range(8)),
                    slices=[([0, 0], [3, 2]), ([3, 0], [1, 2])])
    crcs = [block.chunk_crcs[0] for t in builder.tensors for block in t.blocks]
    assert crcs == [0x516B2987, 0xB2399DB4, 0x86A41328, 0x264D7263], crcs
    assert [blk.offset for blk in (*w.blocks, *e.blocks)] == [128, 192, 256]
    single(suite, "read.spec.three-tensors", builder,
           ["R-TENSOR-004", "R-TABLE-002", "R-SLICE-003", "R-CHUNK-004", "R-CODEC-001"],
           "The three tensors of spec/format.md 'Example: three tensors': an int64 scalar, a "
           "zstd float32 matrix and an int32 matrix stored as two slices.")


# -- data types and shapes ----------


def dtypes(suite: Suite) -> None:
    for name, (shape, raw) in samples.dtype_samples().items():
        builder = Builder()
        builder.add(name, name, shape, raw)
        requirements = ["R-DTYPE-001", "R-DATA-005", "R-FILE-001"]
        if name == "bool":
            requirements.append("R-DTYPE-002")
        if name == "bytes":
            requirements.append("R-DTYPE-003")
        single(suite, f"read.dtype.{name.replace('_', '-')}", builder, requirements,
               f"One {name} tensor of shape {shape} holding edge values (extremes, special "
               "floats with NaN payloads, every code of 8-bit types), stored uncompressed.")

    builder = Builder()
    for name, (shape, raw) in samples.dtype_samples().items():
        first = semantic.elements(raw, name, semantic.count(shape))[0]
        scalar = semantic.join_strings([first]) if name == "bytes" else first
        builder.add(f"scalar/{name}", name, [], scalar)
    single(suite, "read.shape.scalars", builder,
           ["R-TABLE-001", "R-TENSOR-003", "R-TENSOR-005", "R-DTYPE-001"],
           "A rank-0 tensor of every dtype: scalars take no value of dims and hold one "
           "element.")

    builder = Builder()
    builder.add("f32", "float32", [0], b"")
    builder.add("i16", "int16", [3, 0, 2], b"")
    builder.add("strings", "bytes", [0], b"")
    builder.add("flags", "bool", [2, 0], b"")
    builder.add("c128", "complex128", [0, 0], b"")
    builder.add("zstd", "float64", [0, 5], b"", codec=CODEC_ZSTD)
    builder.add("zstd_shuffled", "int32", [4, 0], b"", codec=CODEC_ZSTD, shuffle_bytes=True)
    builder.add("after", "uint8", [3], b"\x01\x02\x03")
    single(suite, "read.shape.zero-size", builder,
           ["R-TENSOR-005", "R-CHUNK-001", "R-CHUNK-004", "R-DATA-001", "R-DATA-002",
            "R-DTYPE-003"],
           "Tensors with no elements of several dtypes and codecs: empty blocks with no "
           "chunks and no checksums.")

    builder = Builder()
    builder.add("u8", "uint8", [0, 1 << 29, 1 << 29], b"")
    single(suite, "read.shape.zero-size-max-dims", builder, ["R-TENSOR-003"],
           "A uint8 tensor of shape [0, 2^29, 2^29]: the product of its non-zero dimensions "
           "is exactly 2^58, the limit, so it is valid and empty.")

    builder = Builder()
    builder.add("f64", "float64", [1 << 40, 0, 1 << 18], b"")
    single(suite, "read.shape.zero-size-max-dims-float64", builder, ["R-TENSOR-003"],
           "A float64 tensor of shape [2^40, 0, 2^18]: non-zero dimensions multiply to 2^58, "
           "the limit, so it is valid and holds no element.")

    builder = Builder()
    builder.add("c128", "complex128", [1 << 29, 1 << 29, 0], b"")
    single(suite, "read.shape.zero-size-max-dims-complex128", builder, ["R-TENSOR-003"],
           "A complex128 tensor (16-byte items, the largest) of shape [2^29, 2^29, 0]: "
           "non-zero dimensions multiply to 2^58, the limit, so it is valid and holds no "
           "element (2^58 x 16 bytes = 2^62, which a 64-bit implementation can represent).")

    builder = Builder()
    builder.add("deep", "float32", [1] * 31 + [2], struct.pack("<2f", 0.5, -0.5))
    builder.add("deep_sliced", "int8", [1] * 31 + [2], b"\x07\x08",
                slices=[([0] * 32, [1] * 31 + [1]), ([0] * 31 + [1], [1] * 32)])
    single(suite, "read.shape.rank-32", builder, ["R-TENSOR-003", "R-SLICE-001"],
           "Tensors of rank 32, the largest rank allowed, one of them stored in slices.")


def keys(suite: Suite) -> None:
    builder = Builder()
    long_key = "\U0001f600" * 1024  # 4 bytes each in UTF-8: 4096 bytes
    assert len(long_key.encode()) == 4096
    builder.add(long_key, "uint8", [1], b"\x2a")
    single(suite, "read.tensor.key-4096-bytes", builder, ["R-TENSOR-001"],
           "A tensor key of exactly 4096 UTF-8 bytes (1024 four-byte characters), the "
           "longest allowed.")

    builder = Builder()
    names = ["\u00e9", "e\u0301", "a", "A", "a/b", ".x", " ", "../x", "index.ocf", "k\u00a0"]
    for n, key in enumerate(names):
        builder.add(key, "uint8", [], bytes([n]))
    single(suite, "read.tensor.keys-compared-as-bytes", builder, ["R-TENSOR-001"],
           "Keys that differ only by Unicode normalization or case are distinct, and keys "
           "that look like paths are plain text.")


# -- forms of a checkpoint ----------


def directory_builder() -> Builder:
    builder = Builder(["data-a.ocfd", "", "data-b.ocfd"])
    builder.add("in_a", "float32", [4], samples.ramp("float32", [4]), shard=0)
    builder.add("in_index", "int16", [2, 2], samples.ramp("int16", [2, 2]), shard=1)
    builder.add("in_b", "bytes", [2], semantic.join_strings([b"x", b"yz"]), shard=2)
    builder.add("also_a", "uint64", [3], samples.ramp("uint64", [3], step=7), shard=0)
    builder.add("split", "int32", [4], samples.ramp("int32", [4]),
                slices=[([0], [2]), ([2], [2])], slice_shards=[2, 0])
    builder.metadata = {"form": s("directory")}
    return builder


def forms(suite: Suite) -> None:
    requirements = ["R-FILE-008", "R-SHARD-001", "R-SHARD-002", "R-SHARD-004"]
    builder = directory_builder()
    files = in_directory(builder.files())
    suite.read("read.layout.directory", requirements=requirements,
               description="A directory checkpoint: index.ocf with a data region of its own "
               "(listed second) and two external shards, one tensor sliced across them.",
               files=files, input=DIRECTORY, expect=builder.expect())
    suite.read("read.layout.directory-index-path", requirements=["R-FILE-008"],
               description="The same directory checkpoint opened through the path of its "
               "index.ocf, which resolves shards in the same directory.",
               files=files, input=f"{DIRECTORY}/index.ocf", expect=builder.expect())
    leftovers = dict(files)
    leftovers[f"{DIRECTORY}/.index.ocf.ocf-tmp-0123456789abcdef"] = PREAMBLE + b"partial"
    leftovers[f"{DIRECTORY}/data-0123456789abcdef-00000.ocfd"] = b"stale shard of a crash"
    leftovers[f"{DIRECTORY}/notes.txt"] = b"not part of the checkpoint\n"
    suite.read("read.layout.directory-leftovers", requirements=["R-COMMIT-003"],
               description="A directory checkpoint next to unreferenced files (a temporary "
               "index and a stale shard of a crashed write, a text file), which readers ignore.",
               files=leftovers, input=DIRECTORY, expect=builder.expect())

    names = ["0", "A.b-c_d", "x" * 255, "COM10.ocfd", "nul-data.ocfd", "a..b", "LPT0"]
    builder = Builder(names)
    for n in range(len(names)):
        builder.add(f"t{n}", "uint8", [1], bytes([n]), shard=n)
    suite.read("read.layout.shard-names", requirements=["R-SHARD-001", "R-SHARD-005"],
               description="Shard names at the edges of the allowed syntax: one character, "
               "255 characters, dots and dashes, and names that only resemble device names.",
               files=in_directory(builder.files()), input=DIRECTORY, expect=builder.expect())

    builder = Builder(["", "unused.ocfd"])
    builder.add("w", "float32", [2], struct.pack("<2f", 3.0, 4.0))
    suite.read("read.layout.shard-without-blocks", requirements=["R-SHARD-002", "R-SHARD-004"],
               description="An external shard of 64 bytes (preamble only, empty data region) "
               "that no block uses.",
               files=in_directory(builder.files()), input=DIRECTORY, expect=builder.expect())

    builder = Builder([""])
    builder.add("w", "float32", [2], struct.pack("<2f", 5.0, 6.0))
    suite.read("read.layout.directory-own-data", requirements=["R-FILE-008", "R-SHARD-004"],
               description="A directory whose index.ocf holds every tensor in its own data "
               "region, with no external shard.",
               files=in_directory(builder.files()), input=DIRECTORY, expect=builder.expect())

    builder = Builder([])
    builder.metadata = {"note": s("no tensors")}
    single(suite, "read.file.no-tensors", builder, ["R-SHARD-004", "R-TABLE-001"],
           "A checkpoint with no shard, no tensor and one metadata value.")

    builder = Builder([], writer="")
    blob = builder.single()
    assert len(blob) == 96
    single(suite, "read.file.empty-index", builder,
           ["R-FILE-004", "R-FILE-005", "R-FILE-006", "R-FILE-007"],
           "The smallest checkpoint: 96 bytes, preamble and footer around an index of length 0 "
           "whose CRC-32C is 0.", blob)


# -- codecs and chunks ----------


def codecs(suite: Suite) -> None:
    builder = Builder()
    builder.add("f32", "float32", [8, 8], samples.ramp("float32", [8, 8]), codec=CODEC_ZSTD)
    builder.add("strings", "bytes", [4], semantic.join_strings([b"abc"] * 4), codec=CODEC_ZSTD)
    builder.add("flags", "bool", [100], samples.ramp("bool", [100]), codec=CODEC_ZSTD)
    single(suite, "read.codec.zstd", builder,
           ["R-CHUNK-004", "R-CODEC-001", "R-CRC-001"],
           "Tensors stored with CODEC_ZSTD in one chunk each, checksummed over the stored "
           "frame.")

    builder = Builder()
    for name in ("float32", "int64", "complex128", "bfloat16", "uint8", "float8_e5m2"):
        shape = [3, 4]
        raw = samples.ramp(name, shape) if name in ("float32", "int64", "uint8") else \
            bytes(range(semantic.DTYPES[name][1] * 12))
        builder.add(name, name, shape, raw, codec=CODEC_ZSTD, shuffle_bytes=True)
    single(suite, "read.codec.zstd-shuffle", builder, ["R-CODEC-002", "R-CODEC-001"],
           "Byte-shuffled zstd tensors of item sizes 1, 2, 4, 8 and 16 (the shuffle is the "
           "identity for 1-byte types).")

    builder = Builder()
    builder.add("f64", "float64", [1250], samples.ramp("float64", [1250]), codec=CODEC_ZSTD,
                shuffle_bytes=True, chunk_size=4096)
    builder.add("i32", "int32", [3000], samples.ramp("int32", [3000], step=3),
                codec=CODEC_ZSTD, chunk_size=4096)
    builder.add("strings", "bytes", [600], samples.ramp("bytes", [600]), codec=CODEC_ZSTD,
                chunk_size=4096)
    single(suite, "read.codec.zstd-multichunk", builder,
           ["R-CHUNK-001", "R-CHUNK-002", "R-CHUNK-004", "R-CODEC-002"],
           "Tensors of 10000 and more raw bytes in 4096-byte chunks, each chunk its own zstd "
           "frame with its own checksum, one of them byte-shuffled per chunk.")

    builder = Builder()
    builder.add("u16", "uint16", [5000], samples.ramp("uint16", [5000], step=13),
                chunk_size=4096)
    builder.add("exact", "uint8", [4096], bytes(k % 251 for k in range(4096)), chunk_size=4096)
    builder.add("odd_size", "uint8", [8320], bytes(k % 241 for k in range(8320)),
                chunk_size=4160)
    builder.add("huge_chunk", "float32", [3], samples.ramp("float32", [3]), chunk_size=1 << 30)
    single(suite, "read.codec.none-multichunk", builder,
           ["R-CHUNK-001", "R-CHUNK-002", "R-CHUNK-003"],
           "Uncompressed tensors in chunks of 4096, 4160 and 2^30 bytes: several chunks, "
           "exactly one full chunk, and one chunk smaller than the chunk size.")

    data = bytes(range(200))
    rle_data = bytes([7]) * 100 + bytes(range(100))
    frames = {
        "no-content-size": ("a frame that does not record Frame_Content_Size", data,
                            raw_frame(data, content_size=False, window_log=10)),
        "window-128mib": ("a frame whose Window_Size is 2^27 bytes, the largest every reader "
                          "accepts", data, raw_frame(data, window_log=27)),
        "dictionary-id-zero": ("a frame whose header carries a Dictionary_ID field of 0 (no "
                               "dictionary)", data, raw_frame(data, dictionary_id=0)),
        "content-checksum": ("a frame with a Content_Checksum", data,
                             zstd(data, checksum=True)),
        "rle-and-raw-blocks": ("a frame of an RLE block followed by a raw block", rle_data,
                               rle_then_raw(rle_data)),
    }
    for name, (what, content, frame) in frames.items():
        builder = Builder()
        offset = builder.put(0, frame)
        block = Block(0, offset, len(frame), len(content), CODEC_ZSTD, False, 0,
                      [crc32c(frame)], [len(frame)])
        builder.tensors.append(Tensor("u8", semantic.DTYPES["uint8"][0], [200], [block]))
        builder.expected_tensors["u8"] = semantic.tensor("uint8", [200], content)
        single(suite, f"read.codec.zstd-{name}", builder, ["R-CODEC-001"],
               f"A uint8 tensor stored as {what}, built by hand.")


def rle_then_raw(data: bytes) -> bytes:
    """A single-segment frame: data[:100] (one repeated byte) as an RLE block, then the
    rest as a raw block."""
    assert data[:100] == bytes([data[0]]) * 100 and len(data) < 256
    head = bytes([0x28, 0xB5, 0x2F, 0xFD, 0x20, len(data)])  # single segment, 1-byte FCS
    rle = struct.pack("<I", 100 << 3 | 1 << 1)[:3] + data[:1]
    raw = struct.pack("<I", (len(data) - 100) << 3 | 1)[:3] + data[100:]
    return head + rle + raw


# -- slices ----------


def rows_over_columns(h: int) -> list[tuple[list[int], list[int]]]:
    """The boxes of a [2h, h] matrix: h whole rows on top, h whole columns below."""
    return ([([i, 0], [1, h]) for i in range(h)] + [([h, j], [h, 1]) for j in range(h)])


LARGE_CROSS = 2048  # rows_over_columns(2048): 4096 slices, the limit [R-SLICE-004]


def large_cross() -> bytes:
    """The canonical bytes of the [2h, h] uint8 matrix of rows_over_columns(LARGE_CROSS)
    whose every slice holds the bytes 0, 1, ..., 15, 0, ...: rows on top hold their
    column number, columns below their row number (from h), modulo 16. Every slice
    has the same bytes, so the case needs one Zstandard frame, of a few bytes."""
    h = LARGE_CROSS
    ramp = (np.arange(h) % 16).astype(np.uint8)
    top = np.broadcast_to(ramp, (h, h))
    return np.concatenate([top, top.T]).tobytes()


def slices(suite: Suite) -> None:
    builder = Builder()
    builder.add("grid", "float32", [4, 6], samples.ramp("float32", [4, 6]),
                slices=[([2, 3], [2, 3]), ([0, 0], [2, 3]), ([0, 3], [2, 3]), ([2, 0], [2, 3])])
    builder.add("uneven", "int8", [5], samples.ramp("int8", [5]),
                slices=[([3], [2]), ([0], [3])])
    builder.add("scalar", "float64", [], struct.pack("<d", math.pi), slices=[([], [])])
    builder.add("one_box", "uint16", [2, 2], samples.ramp("uint16", [2, 2]),
                slices=[([0, 0], [2, 2])])
    builder.add("strings", "bytes", [2, 3], samples.ramp("bytes", [2, 3]),
                slices=[([1, 0], [1, 3]), ([0, 0], [1, 3])])
    builder.add("compressed", "int64", [6, 2], samples.ramp("int64", [6, 2]),
                slices=[([0, 0], [3, 2]), ([3, 0], [3, 2])], codec=CODEC_ZSTD,
                shuffle_bytes=True)
    builder.add("cells", "uint8", [2, 2, 2], bytes(range(8)),
                slices=[([a, b_, c], [1, 1, 1]) for a in (1, 0) for b_ in (0, 1) for c in (1, 0)])
    # Store the (equally long) blocks of "grid" in the reverse of their table order.
    grid = builder.tensors[0].blocks
    region = builder.regions[0]
    payloads = [bytes(region[blk.offset - 64:blk.offset - 64 + blk.stored_length])
                for blk in grid]
    offsets = [blk.offset for blk in grid][::-1]
    for blk, offset, payload in zip(grid, offsets, payloads):
        region[offset - 64:offset - 64 + len(payload)] = payload
        blk.offset = offset
    single(suite, "read.slice.boxes", builder,
           ["R-SLICE-001", "R-SLICE-002", "R-SLICE-003", "R-TENSOR-004", "R-TABLE-002"],
           "Tensors stored in slices: boxes listed out of order and stored in the file in yet "
           "another order, a sliced scalar, a single box, byte strings, zstd slices, and "
           "1-element boxes.")

    builder = Builder()
    builder.add("cross", "uint8", [16, 8], samples.ramp("uint8", [16, 8]),
                slices=rows_over_columns(8))
    single(suite, "read.slice.rows-over-columns", builder, ["R-SLICE-002"],
           "A uint8 [16, 8] matrix whose top half is 8 slices of one whole row and whose "
           "bottom half is 8 slices of one whole column: boxes that tile the shape without "
           "being the cells of one grid, and that overlap pairwise along each dimension "
           "(the costly input for a sweep, spec/format.md, Slices).")

    builder = Builder()
    builder.add("cross", "uint8", [2 * LARGE_CROSS, LARGE_CROSS], large_cross(),
                slices=rows_over_columns(LARGE_CROSS), codec=CODEC_ZSTD)
    single(suite, "read.slice.rows-over-columns-4096", builder, ["R-SLICE-002", "R-SLICE-004"],
           "A uint8 [4096, 2048] matrix in 4096 slices (the limit): 2048 slices of one whole "
           "row on top, 2048 of one whole column below, each of its 2048 bytes 0, 1, ..., "
           "15, 0, ... (so element [r, c] is c % 16 in the top half, r % 16 below), "
           "zstd-compressed. About 2 million pairs of boxes overlap along each "
           "dimension: a reader that compares pairs is slow here (spec/format.md, Slices).")

    many_slices(suite)

    builder = directory_builder()
    builder.add("spread", "float64", [3, 2], samples.ramp("float64", [3, 2]),
                slices=[([0, 0], [1, 2]), ([1, 0], [1, 2]), ([2, 0], [1, 2])],
                slice_shards=[2, 1, 0])
    suite.read("read.slice.across-shards", requirements=["R-SLICE-003", "R-SHARD-004"],
               description="A directory checkpoint whose tensors are sliced across the "
               "index file and two shards.",
               files=in_directory(builder.files()), input=DIRECTORY, expect=builder.expect())


MANY = 4097  # slices: one above the limit of formats 1.0 and 1.1 [R-SLICE-004]


def many_slices(suite: Suite) -> None:
    """A rank-4 tensor in more slices than format 1.1 allowed. (That the limit applies
    to a file stamped 1.1 too is reject.tensor.slice-count-4097-rank-4, which costs a
    few bytes where this case costs 64 per slice.)"""
    shape = [MANY, 1, 1, 16]
    builder = Builder()
    builder.add("rows", "uint8", shape, samples.ramp("uint8", shape),
                slices=[([k, 0, 0, 0], [1, 1, 1, 16]) for k in range(MANY)][::-1])
    single(suite, "read.slice.count-4097-rank-4", builder, ["R-SLICE-004", "R-VER-003"],
           f"A file of format 1.2 whose uint8 [{MANY}, 1, 1, 16] tensor is in {MANY} slices "
           "of one row each, listed last row first: above the 4096 slices of formats 1.0 "
           "and 1.1, within the 65536 that format 1.2 allows up to rank 4.", minor=2)


# -- metadata ----------


def every_kind() -> dict[str, Any]:
    inf = float("inf")
    return {
        "": s("the empty key"),
        "nul\u0000key": s("a key holding U+0000"),
        "null": None,
        "bool_true": flag(True),
        "bool_false": flag(False),
        "int_zero": i(0),
        "int_min": i(-(1 << 63)),
        "int_max": i((1 << 63) - 1),
        "int_negative": i(-1),
        "float_zero": f(0.0),
        "float_negative_zero": f(-0.0),
        "float_nan": f(float("nan")),
        "float_inf": f(inf),
        "float_negative_inf": f(-inf),
        "float_subnormal": f(5e-324),
        "float_third": f(1 / 3),
        "float_integral": f(2.0),
        "string": s("text"),
        "string_empty": s(""),
        "string_unicode": s("\u65e5\u672c\u8a9e \u2713 \U0001f600"),
        "bytes": b(b"\x00\x01\xff"),
        "bytes_empty": b(b""),
        "bytes_utf8": b(b"text"),
        "one_of_each": lst(i(1), f(1.0), s("1"), b(b"1"), flag(True), None),
        "list_empty": lst(),
        "list_order": lst(i(3), i(1), i(2), i(1)),
        "map_empty": mp(),
        "map": {"map": {"b": i(2), "a": i(1), "": None, "\u00e9": lst(mp(x=f(0.5)))}},
        "nested": lst(mp(layers=lst(mp(units=i(64), activation=s("relu")), None)), lst(lst())),
    }


def metadata(suite: Suite) -> None:
    builder = Builder()
    builder.metadata = every_kind()
    builder.add("w", "float32", [1], struct.pack("<f", 1.0))
    single(suite, "read.meta.every-kind", builder, ["R-META-001"],
           "Metadata of every value kind kept apart (1, 1.0, '1', b'1', true), null, NaN, "
           "infinities, -0.0, int64 extremes, empty keys, lists in order and nested maps.")

    for kind in ("list", "map"):
        builder = Builder()
        builder.metadata = {"deep": nested(32, kind, i(32)), "shallow": i(0),
                            "empty_at_32": nested(32, kind, {kind: {} if kind == "map" else []})}
        single(suite, f"read.meta.depth-32-{kind}s", builder, ["R-META-002", "R-FILE-007"],
               f"Metadata values at level 32, the deepest allowed, inside {kind}s: an integer, "
               f"and an empty {kind} (which holds nothing at level 33).")

    builder = Builder()
    builder.add(".v", "float32", [], struct.pack("<f", 2.0))
    builder.graph = [{"type_name": "Root", "attributes": [["v", ".v"]],
                      "metadata": {"deep": nested(32, "map", s("level 32"))}}]
    single(suite, "read.meta.node-depth-32-maps", builder, ["R-META-002", "R-FILE-007"],
           "A node metadata value at level 32 inside maps, which sits at protobuf nesting "
           "level 100, the deepest every reader parses.")


# -- object graphs ----------


def example_graph() -> list[dict[str, Any]]:
    """The graph of spec/objects.md, "Example"."""
    return [
        {"type_name": "Checkpoint", "children": [["model", 1], ["optimizer", 2],
                                                 ["save_counter", 3]]},
        {"type_name": "Model", "children": [["dense", 4]]},
        {"type_name": "Adam", "slot_variables": [[5, "m", 6]],
         "metadata": {"learning_rate": f(0.001)}},
        {"type_name": "Variable", "attributes": [["value", "save_counter/.value"]]},
        {"type_name": "Dense", "children": [["kernel", 5]]},
        {"type_name": "Variable", "attributes": [["value", "model/dense/kernel/.value"]]},
        {"type_name": "Variable",
         "attributes": [["value", "optimizer/.slot/model/dense/kernel/m/.value"]]},
    ]


def check_derived(nodes: list[dict[str, Any]]) -> None:
    derived = semantic.derived_keys(nodes)
    for n, node in enumerate(nodes):
        for name, key in node.get("attributes", []):
            assert derived[(n, name)] == key, (n, name, key, derived[(n, name)])


def shared_graph() -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = [
        {"type_name": "Root", "children": [["model", 1], ["layers", 2], ["self", 0]],
         "attributes": [["step", ".step"]], "metadata": {"epoch": i(3)}},
        {"type_name": "Model", "children": [["dense", 3], ["parent", 0]]},
        {"type_name": "List", "children": [["0", 3], ["1", 4]],
         "metadata": {"length": i(2)}},
        {"type_name": "Dense", "children": [["kernel", 5], ["bias", 6], ["a.b", 7]],
         "attributes": [["kernel", "model/dense/.kernel"]]},
        {"type_name": "", "attributes": [["two words", "layers/1/.two words"]]},
        {"type_name": "Variable", "attributes": [["value", "model/dense/kernel/.value"]]},
        {"type_name": "Variable"},
        {"type_name": "\u00fcn\u00efcode", "children": [["back", 3]],
         "attributes": [["\u00e9", "model/dense/a.b/.\u00e9"]]},
    ]
    check_derived(nodes)
    return nodes


def slot_graph() -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = [
        {"type_name": "Root", "children": [["model", 1], ["opt", 2], ["shortcut", 7]],
         "slot_variables": [[3, "ema", 8]]},
        {"type_name": "Model", "children": [["w", 3], ["b", 4]]},
        {"type_name": "Adam", "slot_variables": [[3, "m", 5], [3, "v", 6], [4, "m", 7],
                                                  [4, "v", 7], [0, "global", 9],
                                                  [2, "own", 10], [3, "itself", 3],
                                                  [5, "of_slot", 7]]},
        {"attributes": [["value", "model/w/.value"]]},
        {"attributes": [["value", "model/b/.value"]]},
        {"attributes": [["value", "opt/.slot/model/w/m/.value"]]},
        {"attributes": [["value", "opt/.slot/model/w/v/.value"]]},
        {"attributes": [["value", "shortcut/.value"]]},
        {"attributes": [["value", ".slot/model/w/ema/.value"]]},
        {"attributes": [["value", "opt/.slot/global/.value"]]},
        {"attributes": [["value", "opt/.slot/opt/own/.value"]]},
    ]
    check_derived(nodes)
    return nodes


def add_graph_tensors(builder: Builder, nodes: list[dict[str, Any]]) -> None:
    for n, node in enumerate(nodes):
        for m, (_, key) in enumerate(node.get("attributes", [])):
            builder.add(key, "float32", [2], struct.pack("<2f", n, m))
    builder.graph = nodes


def graphs(suite: Suite) -> None:
    requirements = ["R-GRAPH-001", "R-GRAPH-002", "R-GRAPH-003", "R-GRAPH-004", "R-GRAPH-005",
                    "R-GRAPH-006", "R-GRAPH-007"]
    nodes = example_graph()
    check_derived(nodes)
    builder = Builder()
    add_graph_tensors(builder, nodes)
    single(suite, "read.graph.example", builder, requirements,
           "The object graph of spec/objects.md 'Example': 7 nodes, a slot variable, keys "
           "derived from canonical paths.")

    builder = Builder()
    add_graph_tensors(builder, shared_graph())
    builder.add("extra", "int32", [], struct.pack("<i", -5))
    single(suite, "read.graph.shared-and-cycles", builder,
           ["R-GRAPH-003", "R-GRAPH-004", "R-GRAPH-005", "R-GRAPH-007"],
           "A graph with a node shared by two parents, cycles back to the root and to a "
           "parent, an edge and an attribute of one name, and a tensor no node names.")

    builder = Builder()
    add_graph_tensors(builder, slot_graph())
    single(suite, "read.graph.slot-variables", builder,
           ["R-GRAPH-005", "R-GRAPH-006", "R-GRAPH-007"],
           "Slot variables: the root as owner and as variable, the owner as its own variable, a "
           "variable as its own slot, a slot of a slot, slot nodes shared and reached by edges.")

    nodes = [
        {"type_name": "Root", "children": [["z", 1], ["a", 2], ["opt", 3]]},
        {"children": [["deep", 4], ["s", 5]]},
        {"children": [["s", 5], ["t", 6]]},
        {"slot_variables": [[5, "m", 7], [6, "m", 8]]},
        {"children": [["deeper", 8]]},
        {"attributes": [["value", "z/s/.value"]]},
        {"attributes": [["value", "a/t/.value"]]},
        {"attributes": [["value", "opt/.slot/z/s/m/.value"]]},
        {"attributes": [["value", "z/deep/deeper/.value"]]},
    ]
    check_derived(nodes)
    builder = Builder()
    add_graph_tensors(builder, nodes)
    single(suite, "read.graph.breadth-first-paths", builder, ["R-GRAPH-005", "R-GRAPH-007"],
           "Canonical paths that only a breadth-first walk in stored (not alphabetical) edge "
           "order gives, and a slot node that a deep child edge reaches before any slot round.")

    nodes = example_graph()
    for node in nodes:
        node["attributes"] = [[name, "stored/" + key.replace("/.", "_")]
                              for name, key in node.get("attributes", [])]
    builder = Builder()
    add_graph_tensors(builder, nodes)
    single(suite, "read.graph.stored-keys-not-derived", builder, ["R-GRAPH-007"],
           "The example graph with attribute keys that differ from the derived ones: readers "
           "use the stored keys and report no error.")

    builder = Builder()
    builder.add(".step", "int64", [], struct.pack("<q", 1000))
    builder.graph = [{"type_name": "Root", "attributes": [["step", ".step"]],
                      "metadata": {"note": s("root only")}}]
    single(suite, "read.graph.root-only", builder, ["R-GRAPH-001", "R-GRAPH-007"],
           "A graph of one node, the root, with one attribute whose key is '.step'.")

    builder = Builder()
    builder.graph = [{}]
    single(suite, "read.graph.empty-root", builder, ["R-GRAPH-001"],
           "A graph of one empty node and a checkpoint without tensors.")

    builder = Builder()
    add_graph_tensors(builder, example_graph())
    single(suite, "read.graph.in-format-1.0-file", builder, ["R-GRAPH-001", "R-VER-002"],
           "The example graph in a file whose footer says format 1.0: whether the graph is "
           "used depends on its presence, not on format_minor.", minor=0)


# -- versions and ignorable content ----------


def base_builder() -> Builder:
    builder = Builder()
    builder.add("w", "float32", [2, 3], samples.ramp("float32", [2, 3]))
    builder.add("step", "int64", [], struct.pack("<q", 7))
    builder.metadata = {"epoch": i(3)}
    return builder


def versions(suite: Suite) -> None:
    for minor in (9, 65535):
        builder = base_builder()
        single(suite, f"read.version.minor-{minor}", builder, ["R-VER-002"],
               f"A file of format 1.{minor}: readers of major version 1 accept every minor "
               "version.", minor=minor)

    builder = base_builder()
    builder.graph = [{"attributes": [["w", "w"]]}]
    index = builder.index()
    extra = (field_varint(15, 1) + field_bytes(16, b"future") + field_fixed64(17, 1 << 60)
             + field_fixed32(18, 7))
    index.header.MergeFromString(field_bytes(9, b"unknown header field"))
    index.tensors.MergeFromString(field_varint(20, 3) + field_bytes(21, b"\x01\x02"))
    index.blocks.MergeFromString(field_bytes(30, b"block extension"))
    index.shards[0].MergeFromString(field_varint(7, 1))
    index.metadata["epoch"].MergeFromString(field_varint(99, 1))
    index.object_graph.MergeFromString(field_bytes(2, b"graph extension"))
    index.object_graph.nodes[0].MergeFromString(field_varint(40, 2))
    blob = builder.single(index.SerializeToString(deterministic=True) + extra)
    single(suite, "read.version.unknown-fields", builder, ["R-VER-002"],
           "Unknown protobuf fields of every wire type in Index, Header, Shard, TensorTable, "
           "BlockTable, Value, ObjectGraph and ObjectNode, which readers ignore.", blob)

    builder = encoding_builder()
    index = builder.index()
    data = unpacked(index)
    assert data != index.SerializeToString(deterministic=True)
    single(suite, "read.file.index-unpacked", builder, ["R-FILE-007"],
           "An index whose repeated numeric columns are written unpacked, one tag per value: "
           "a valid protobuf encoding every parser reads.", builder.single(data))
    single(suite, "read.file.index-fields-reversed", builder, ["R-FILE-007"],
           "An index whose fields are written in descending field-number order, with "
           "singular fields at their default value written out.",
           builder.single(unpacked(index, reverse=True, explicit_defaults=True)))
    first, second = index_pb2.Index(), index_pb2.Index()
    first.tensors.keys.extend(index.tensors.keys[:1])
    first.tensors.dtypes.extend(index.tensors.dtypes[:1])
    first.blocks.offsets.extend(index.blocks.offsets[:2])
    first.blocks.chunk_crcs.extend(index.blocks.chunk_crcs[:1])
    second.CopyFrom(index)
    del second.tensors.keys[:1], second.tensors.dtypes[:1]
    del second.blocks.offsets[:2], second.blocks.chunk_crcs[:1]
    split = (first.SerializeToString(deterministic=True)
             + second.SerializeToString(deterministic=True))
    check = index_pb2.Index()
    check.ParseFromString(split)
    assert check == index
    single(suite, "read.file.index-split-messages", builder, ["R-FILE-007"],
           "An index in which TensorTable and BlockTable occur twice, each occurrence holding "
           "part of the columns: protobuf parsers merge them into one table.",
           builder.single(split))

    builder = base_builder()
    builder.writer = "ocf-python 9.9 (format 2.0, treat tensors as bfloat16)"
    single(suite, "read.version.writer-text", builder, ["R-VER-002"],
           "Header.writer holds misleading text, which must not change how the file is read.")

    builder = base_builder()
    builder.add("sliced", "int16", [4], samples.ramp("int16", [4]),
                slices=[([0], [1]), ([1], [3])])
    single(suite, "read.version.format-1.0", builder, ["R-VER-003", "R-VER-002"],
           "A file of format 1.0 (format_minor 0) with several tensors, slices and metadata.",
           minor=0)


def encoding_builder() -> Builder:
    builder = Builder()
    builder.add("w", "float32", [2, 3], samples.ramp("float32", [2, 3]))
    builder.add("big", "uint64", [2], struct.pack("<2Q", 1 << 63, 300))
    builder.add("empty", "int8", [0], b"")
    builder.add("parts", "int16", [4], samples.ramp("int16", [4]),
                slices=[([2], [2]), ([0], [2])])
    builder.add("z", "float32", [64], samples.ramp("float32", [64]), codec=CODEC_ZSTD,
                shuffle_bytes=True)
    builder.metadata = {"n": i(-2), "x": f(-0.5), "l": lst(i(1), s("a"), None)}
    builder.graph = [{"type_name": "Root", "children": [["child", 1]],
                      "attributes": [["w", "w"]], "metadata": {"k": i(0)}},
                     {"attributes": [["big", "big"]]}]
    return builder


def ignored_bytes(suite: Suite) -> None:
    builder = base_builder()
    blob = bytearray(builder.single())
    blob[8:64] = bytes((0xA5 + k) % 256 for k in range(56))
    single(suite, "read.file.reserved-bytes-not-zero", builder, ["R-FILE-003"],
           "Preamble bytes 8 to 63 are not zero; readers ignore them.", bytes(blob))

    builder = Builder()
    builder.add("a", "uint8", [3], b"\x01\x02\x03")
    builder.add("b", "float32", [2], struct.pack("<2f", 1.5, 2.5), gap=128)
    builder.add("c", "int16", [1], struct.pack("<h", -3))
    blob = fill_gaps(builder.single(), 0xEE)
    single(suite, "read.data.gaps-not-zero", builder, ["R-DATA-004"],
           "Alignment padding, a 128-byte gap between blocks and the padding before the index "
           "hold non-zero bytes, which readers ignore.", blob)

    builder = Builder()
    builder.add("a", "uint8", [5], b"\x01\x02\x03\x04\x05")
    blob = builder.single(pad_index=False)
    assert read_layout(blob).index_offset == 69
    single(suite, "read.data.index-unaligned", builder, ["R-DATA-004"],
           "The index starts right after the last block, at offset 69, not at a multiple of "
           "64.", blob)

    builder = Builder()
    for n in range(3):
        builder.add(f"t{n}", "float32", [16], samples.ramp("float32", [16], step=n + 1))
    builder.tensors.reverse()
    single(suite, "read.data.blocks-in-reverse-order", builder,
           ["R-TENSOR-004", "R-DATA-003"],
           "Three 64-byte blocks back to back, stored in the file in the reverse of their "
           "order in the tables.")

    builder = Builder()
    builder.add("a", "float32", [16], samples.ramp("float32", [16]))
    empty_same = builder.add("empty_same", "float32", [0], b"")
    empty_same.blocks[0].offset = builder.tensors[0].blocks[0].offset
    builder.add("b", "float32", [16], samples.ramp("float32", [16], step=2))
    end = 64 + len(builder.regions[0])
    assert end % 64 == 0
    builder.add("empty_end", "bytes", [0], b"").blocks[0].offset = end
    single(suite, "read.data.empty-blocks", builder, ["R-DATA-001", "R-DATA-002", "R-DATA-003"],
           "Empty blocks at the offset of a non-empty block and at the very end of the data "
           "region: they overlap nothing.")


def fill_gaps(blob: bytes, value: int) -> bytes:
    """``blob`` with every byte of its data region that no block covers set to ``value``."""
    at = read_layout(blob)
    index = index_of(blob)
    covered = bytearray(at.index_offset)
    for offset, length in zip(index.blocks.offsets, index.blocks.stored_lengths):
        covered[offset:offset + length] = b"\x01" * length
    out = bytearray(blob)
    for k in range(64, at.index_offset):
        if not covered[k]:
            out[k] = value
    return bytes(out)


# -- written by the reference writer ----------


def writer_built(suite: Suite) -> None:
    """Cases whose files ocf.Writer writes; expectations still come from the inputs."""
    import ocf

    def arrays(entries: dict[str, tuple[str, list[int], bytes]]) -> dict[str, np.ndarray]:
        return {key: to_array(dtype, shape, raw) for key, (dtype, shape, raw) in
                entries.items()}

    def expect(entries: dict[str, tuple[str, list[int], bytes]], meta: dict[str, Any],
               nodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"result": "ok",
                "tensors": {k: semantic.tensor(*v) for k, v in entries.items()},
                "metadata": meta,
                "object_graph": None if nodes is None else semantic.graph(nodes)}

    entries = {name: (name, shape, raw) for name, (shape, raw) in
               samples.dtype_samples().items()}
    entries["scalar"] = ("float64", [], struct.pack("<d", -1.25))
    entries["empty"] = ("int32", [2, 0], b"")
    entries["empty_strings"] = ("bytes", [0], b"")
    meta = {"epoch": i(3), "name": s("every dtype"), "lr": f(0.01), "done": flag(False),
            "blob": b(b"\x00"), "shape": lst(i(2), i(3)), "nothing": None,
            "config": mp(depth=i(2))}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "written.ocf"
        with ocf.Writer(path, write_id="0000000000000000",
                        metadata=from_typed_map(meta)) as writer:
            for key, array in arrays(entries).items():
                writer.write(key, array)
        blob = neutral_writer(path.read_bytes())
    suite.read("read.writer.every-dtype", requirements=["R-DTYPE-001", "R-META-001",
                                                        "R-DATA-005"],
               description="A single file written by the reference writer: every dtype, a "
               "scalar, empty tensors and metadata of every kind.",
               files={FILE: blob}, input=FILE, expect=expect(entries, meta))

    entries = {f"layer{n}/w": ("float32", [8, 4], samples.ramp("float32", [8, 4], step=n + 1))
               for n in range(4)}
    entries["names"] = ("bytes", [3], semantic.join_strings([b"a", b"bb", b"ccc"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "written"
        with ocf.Writer(path, layout="directory", write_id="0000000000000001",
                        max_shard_size=300) as writer:
            for key, array in arrays(entries).items():
                writer.write(key, array)
        files = {p.name: p.read_bytes() for p in sorted(path.iterdir())}
    files["index.ocf"] = neutral_writer(files["index.ocf"])
    assert len(files) >= 4
    suite.read("read.writer.directory", requirements=["R-FILE-008", "R-SHARD-002",
                                                      "R-SHARD-004"],
               description="A directory checkpoint written by the reference writer with "
               "small shards: index.ocf and one shard file per tensor.",
               files=in_directory(files), input=DIRECTORY, expect=expect(entries, {}))

    from ocf.format.object_graph import Node, SlotRef
    nodes = example_graph()
    entries = {key: ("float32", [2], struct.pack("<2f", n, 0.5))
               for n, node in enumerate(nodes) for _, key in node.get("attributes", [])}
    graph_nodes = [Node(children=dict(node.get("children", [])),
                        attributes=dict(node.get("attributes", [])),
                        slots=[SlotRef(*slot) for slot in node.get("slot_variables", [])],
                        type_name=node.get("type_name", ""),
                        metadata=from_typed_map(node.get("metadata", {})))
                   for node in nodes]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "written.ocf"
        with ocf.Writer(path, write_id="0000000000000002") as writer:
            for key, array in arrays(entries).items():
                writer.write(key, array)
            writer.set_object_graph(graph_nodes)
        blob = neutral_writer(path.read_bytes())
    suite.read("read.writer.object-graph", requirements=["R-GRAPH-001", "R-GRAPH-006",
                                                         "R-GRAPH-007"],
               description="The example object graph of spec/objects.md written by the "
               "reference writer.",
               files={FILE: blob}, input=FILE, expect=expect(entries, {}, nodes))

    raw = samples.ramp("int32", [4, 4])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "written.ocf"
        with ocf.Writer(path, write_id="0000000000000003") as writer:
            full = to_array("int32", [4, 4], raw)
            for start in ((2, 0), (0, 0), (0, 2), (2, 2)):
                box = full[start[0]:start[0] + 2, start[1]:start[1] + 2]
                writer.write_slice("grid", box, start, (4, 4))
        blob = neutral_writer(path.read_bytes())
    suite.read("read.writer.slices", requirements=["R-SLICE-002", "R-SLICE-003"],
               description="A tensor written by the reference writer as four 2x2 slices.",
               files={FILE: blob}, input=FILE,
               expect=expect({"grid": ("int32", [4, 4], raw)}, {}))


def neutral_writer(blob: bytes) -> bytes:
    """``blob`` with Header.writer replaced, so the cases do not change with the reference
    implementation's version string."""
    index = index_of(blob)
    assert index.header.writer.startswith("ocf-python ")
    index.header.writer = "ocf-python (reference writer, conformance/generate)"
    return replace_index(blob, index)


def to_array(dtype: str, shape: list[int], raw: bytes) -> np.ndarray:
    """A NumPy array holding canonical ``raw`` bytes (object array of bytes for strings)."""
    import ml_dtypes

    if dtype == "bytes":
        out = np.empty(semantic.count(shape), dtype=object)
        for k, item in enumerate(semantic.split_strings(raw, semantic.count(shape))):
            out[k] = item
        return out.reshape(shape)
    numpy_dtype = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
                   "float8_e5m2": ml_dtypes.float8_e5m2}.get(dtype, dtype)
    return np.frombuffer(raw, dtype=np.dtype(numpy_dtype).newbyteorder("<")).reshape(
        shape).copy()


def from_typed(value: Any) -> Any:
    """A Python value (as ocf's metadata API takes it) from typed JSON."""
    if value is None:
        return None
    ((kind, item),) = value.items()
    if kind == "int":
        return int(item)
    if kind == "float":
        return float.fromhex(item)
    if kind == "bytes":
        return semantic.b64decode(item)
    if kind == "list":
        return [from_typed(v) for v in item]
    if kind == "map":
        return from_typed_map(item)
    return item


def from_typed_map(values: dict[str, Any]) -> dict[str, Any]:
    return {k: from_typed(v) for k, v in values.items()}


def generate(suite: Suite) -> None:
    spec_examples(suite)
    dtypes(suite)
    keys(suite)
    forms(suite)
    codecs(suite)
    slices(suite)
    metadata(suite)
    graphs(suite)
    versions(suite)
    ignored_bytes(suite)
    writer_built(suite)
