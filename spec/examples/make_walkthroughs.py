"""Build the byte-level walkthroughs of spec/examples/walkthroughs.md.

Three checkpoints' worth of files, built by hand from the rules of
spec/format.md and spec/parts.md with only the generated protobuf classes,
struct and crc32c (no OCF reader, writer or merger is involved), and a
Markdown file that shows every byte of them:

- ``directory/``: a multi-file checkpoint, ``index.ocf`` (no data of its own)
  and one shard file holding two tensors;
- ``merge/``: the two part indexes and shard files of a multi-writer save
  (a matrix cut in two row slices, a whole vector and the metadata in part
  0), and ``index.ocf``, the merged index that [R-PART-006] defines for them,
  which references the parts' shard files where they are.

Run from the repository root (``--out DIR`` writes elsewhere):

    PYTHONPATH=python/src .venv/bin/python spec/examples/make_walkthroughs.py

The output is byte-for-byte reproducible; python/tests/format/test_spec_example.py
checks that the committed files are what this script writes, that the
reference reader reads them, and that the reference merge of the parts gives
the tables of the merged index built here.
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from ocf.v1 import index_pb2, tensor_pb2

HERE = Path(__file__).resolve().parent
PREAMBLE = b"\x89OCF\r\n\x1a\n" + bytes(56)
FOOTER_MAGIC = b"\x89OCFEND\n"
ALIGN = 64
SAVE_ID = "00112233445566aa"
WRITE_IDS = ("5f0c1e9a2b7d4c36", "00112233000a0b0c", "00112233000d0e0f")


# -- tensors and blocks ---------------------------------------------------------------------


@dataclass
class Tensor:
    """A tensor row: key, dtype, shape, and its blocks (one, or one per slice)."""

    key: str
    dtype: int
    shape: list[int]
    blocks: list[Block]
    sliced: bool = False


@dataclass
class Block:
    """A stored block of CODEC_NONE, one chunk: where it is and what it holds."""

    shard: int
    offset: int
    raw: bytes
    start: list[int] = field(default_factory=list)  # the box of a slice
    extent: list[int] = field(default_factory=list)


class Shard:
    """A shard file being filled: the preamble, then blocks at multiples of 64."""

    def __init__(self) -> None:
        self.data = bytearray(PREAMBLE)

    def put(self, raw: bytes) -> int:
        self.data += bytes(-len(self.data) % ALIGN)  # zero padding [R-DATA-004]
        offset = len(self.data)
        self.data += raw
        return offset


def fill_tables(index: index_pb2.Index, tensors: list[Tensor]) -> None:
    """The tensor and block tables, column by column, in tensor order."""
    for t in tensors:
        index.tensors.keys.append(t.key)
        index.tensors.dtypes.append(t.dtype)
        index.tensors.ranks.append(len(t.shape))
        index.tensors.dims.extend(t.shape)
        index.tensors.slice_counts.append(len(t.blocks) if t.sliced else 0)
        for b in t.blocks:
            index.blocks.shards.append(b.shard)
            index.blocks.offsets.append(b.offset)
            index.blocks.stored_lengths.append(len(b.raw))
            index.blocks.raw_lengths.append(len(b.raw))
            index.blocks.codecs.append(tensor_pb2.CODEC_NONE)
            index.blocks.byte_shuffles.append(False)
            index.blocks.chunk_sizes.append(0)
            index.blocks.chunk_crcs.append(crc32c.crc32c(b.raw))
            index.blocks.slice_starts.extend(b.start)
            index.blocks.slice_extents.extend(b.extent)


def index_file(index: index_pb2.Index) -> bytes:
    """An index file with an empty data region: preamble, index bytes, footer (1.1)."""
    data = index.SerializeToString(deterministic=True)
    footer = struct.pack("<QQIHH8s", len(PREAMBLE), len(data), crc32c.crc32c(data), 1, 1,
                         FOOTER_MAGIC)
    return PREAMBLE + data + footer


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


KERNEL = f32(1.0, 2.0, 3.0, 4.0)  # float32 [2, 2]: [[1, 2], [3, 4]]
BIAS = f32(0.5, -0.5)  # float32 [2]


def shard_name(write_id: str) -> str:
    return f"data-{write_id}-00000.ocfd"


# -- the checkpoints --------------------------------------------------------------------------


def directory_checkpoint() -> dict[str, bytes]:
    """index.ocf and one shard: 'kernel' and 'bias', and the metadata epoch = 3."""
    shard = Shard()
    tensors = [Tensor("kernel", tensor_pb2.DTYPE_FLOAT32, [2, 2], [Block(0, shard.put(KERNEL),
                                                                        KERNEL)]),
               Tensor("bias", tensor_pb2.DTYPE_FLOAT32, [2], [Block(0, shard.put(BIAS), BIAS)])]
    index = index_pb2.Index()
    index.shards.add(path=shard_name(WRITE_IDS[0]), length=len(shard.data))
    fill_tables(index, tensors)
    index.metadata["epoch"].int_value = 3
    return {"index.ocf": index_file(index), shard_name(WRITE_IDS[0]): bytes(shard.data)}


def parts() -> tuple[list[list[Tensor]], list[Shard]]:
    """What each part writes: part 0 row 0 of 'kernel' and 'bias', part 1 row 1."""
    shards = [Shard(), Shard()]
    row = len(KERNEL) // 2
    part0 = [Tensor("kernel", tensor_pb2.DTYPE_FLOAT32, [2, 2],
                    [Block(0, shards[0].put(KERNEL[:row]), KERNEL[:row], [0, 0], [1, 2])],
                    sliced=True),
             Tensor("bias", tensor_pb2.DTYPE_FLOAT32, [2], [Block(0, shards[0].put(BIAS), BIAS)])]
    part1 = [Tensor("kernel", tensor_pb2.DTYPE_FLOAT32, [2, 2],
                    [Block(0, shards[1].put(KERNEL[row:]), KERNEL[row:], [1, 0], [1, 2])],
                    sliced=True)]
    return [part0, part1], shards


def merge_directory() -> dict[str, bytes]:
    """The parts of save SAVE_ID, and the merged index of [R-PART-006]."""
    tables, shards = parts()
    files: dict[str, bytes] = {}
    for number, (tensors, shard) in enumerate(zip(tables, shards)):
        name = shard_name(WRITE_IDS[number + 1])
        index = index_pb2.Index()
        index.header.required_features.append("part")  # [R-PART-001]
        index.shards.add(path=name, length=len(shard.data))
        fill_tables(index, tensors)
        if number == 0:
            index.metadata["epoch"].int_value = 3  # only part 0 has metadata
        index.part.save_id, index.part.number, index.part.count = SAVE_ID, number, len(tables)
        files[f"part-{SAVE_ID}-{number:05d}.ocfpart"] = index_file(index)
        files[name] = bytes(shard.data)
    merged = index_pb2.Index()
    for number, shard in enumerate(shards):  # part 0's shards, then part 1's
        merged.shards.add(path=shard_name(WRITE_IDS[number + 1]), length=len(shard.data))
    kernel0, bias = tables[0]
    [kernel1] = tables[1]
    rebased = Block(1, kernel1.blocks[0].offset, kernel1.blocks[0].raw, [1, 0], [1, 2])
    # Keys in order of first appearance; the slices of all parts, parts in order; only
    # the shard number of a block changes (part 1's shard 0 is merged shard 1).
    fill_tables(merged, [Tensor("kernel", tensor_pb2.DTYPE_FLOAT32, [2, 2],
                                [kernel0.blocks[0], rebased], sliced=True), bias])
    merged.metadata["epoch"].int_value = 3
    files["index.ocf"] = index_file(merged)
    return files


# -- the walkthrough: every byte, annotated --------------------------------------------------


def hexdump(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        row = data[at:at + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}: {' '.join(f'{b:02x}' for b in row):<47}  {text}")
    return "\n".join(lines)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if byte < 0x80:
            return value, at


_SCALAR_WIDTH = {FieldDescriptor.TYPE_FIXED32: 4, FieldDescriptor.TYPE_FIXED64: 8,
                 FieldDescriptor.TYPE_DOUBLE: 8, FieldDescriptor.TYPE_FLOAT: 4}


def _scalar(fd: FieldDescriptor, data: bytes, at: int) -> tuple[str, int]:
    """One value of field ``fd`` at ``at``: its text and the position after it."""
    if fd.type in _SCALAR_WIDTH:
        width = _SCALAR_WIDTH[fd.type]
        raw = int.from_bytes(data[at:at + width], "little")
        return (f"0x{raw:08X}" if fd.type == FieldDescriptor.TYPE_FIXED32 else str(raw)), \
            at + width
    value, end = _varint(data, at)
    if fd.type == FieldDescriptor.TYPE_SINT64:
        return f"{(value >> 1) ^ -(value & 1)} (zigzag {value})", end
    if fd.type == FieldDescriptor.TYPE_ENUM:
        name = fd.enum_type.values_by_number.get(value)
        return (name.name if name else str(value)), end
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return ("true" if value else "false"), end
    return str(value), end


def annotate(data: bytes, descriptor: Descriptor, base: int, prefix: str
             ) -> Iterator[tuple[int, bytes, str, str]]:
    """(offset, bytes, field, value) for every field of a serialized message."""
    at = 0
    while at < len(data):
        start = at
        tag, at = _varint(data, at)
        fd = descriptor.fields_by_number[tag >> 3]
        name = f"{prefix}{fd.name} ({fd.number})"
        if tag & 7 != 2:  # a varint or fixed-width scalar, not packed
            text, at = _scalar(fd, data, at)
            yield base + start, data[start:at], name, text
            continue
        length, body = _varint(data, at)
        at = body + length
        head = data[start:body]
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            kind = "map entry" if fd.message_type.GetOptions().map_entry else fd.message_type.name
            yield base + start, head, name, f"{kind}, {length} bytes:"
            yield from annotate(data[body:at], fd.message_type, base + body, f"{prefix}  ")
        elif fd.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
            yield base + start, data[start:at], name, repr(data[body:at].decode())
        else:  # a packed repeated column
            values, inside = [], body
            while inside < at:
                text, inside = _scalar(fd, data, inside)
                values.append(text)
            yield base + start, data[start:at], f"{name}, packed", f"[{', '.join(values)}]"


def _show(raw: bytes) -> str:
    shown = " ".join(f"{b:02x}" for b in raw[:12])
    return f"`{shown}{' …' if len(raw) > 12 else ''}`"


def index_walk(blob: bytes) -> list[str]:
    """Markdown tables of the index bytes and the footer of an index file."""
    offset, length, crc, major, minor = struct.unpack_from("<QQIHH", blob, len(blob) - 32)
    rows = ["| Offset | Bytes | Field | Value |", "|---|---|---|---|"]
    for at, raw, name, value in annotate(blob[offset:offset + length],
                                         index_pb2.Index.DESCRIPTOR, offset, ""):
        indent = len(name) - len(name.lstrip())
        rows.append(f"| `0x{at:x}` | {_show(raw)} | {'&nbsp;' * 2 * indent}`{name.strip()}` "
                    f"| {value} |")
    end = len(blob) - 32
    fields = [(0, 8, "`index_offset`", str(offset)),
              (8, 16, "`index_length`", f"{length} ({offset} + {length} = {end} = F − 32)"),
              (16, 20, "`index_crc32c`", f"`0x{crc:08X}`"),
              (20, 24, "`format_major`, `format_minor`", f"{major}.{minor}"),
              (24, 32, "footer magic", "`\"\\x89OCFEND\\n\"`")]
    footer = ["| Offset | Bytes | Field | Value |", "|---|---|---|---|",
              *(f"| `0x{end + a:x}` | {_show(blob[end + a:end + b])} | {name} | {value} |"
                for a, b, name, value in fields)]
    return ["Index bytes:", "", *rows, "", "Footer:", "", *footer, ""]


def shard_walk(name: str, blob: bytes, index: index_pb2.Index) -> list[str]:
    """Which block of which tensor lies where in a shard file."""
    number = [s.path for s in index.shards].index(name)
    rows = ["| Range | Content |", "|---|---|", "| `[0, 64)` | preamble |"]
    block = 0
    for key, count in zip(index.tensors.keys, index.tensors.slice_counts):
        for piece in range(max(1, count)):
            if index.blocks.shards[block] == number:
                start = index.blocks.offsets[block]
                end = start + index.blocks.stored_lengths[block]
                what = f"slice {piece} of `{key}`" if count else f"`{key}`"
                rows.append(f"| `[{start}, {end})` | block {block}: {what}, "
                            f"CRC-32C `0x{index.blocks.chunk_crcs[block]:08X}` |")
            block += 1
    return [f"`{name}`, {len(blob)} bytes:", "", "```", hexdump(blob), "```", "", *rows, ""]


def file_section(title: str, files: dict[str, bytes], name: str, shards_of: str) -> list[str]:
    """One index file byte by byte, then its shard files."""
    blob = files[name]
    index = index_pb2.Index()
    offset, length = struct.unpack_from("<QQ", blob, len(blob) - 32)
    index.ParseFromString(blob[offset:offset + length])
    lines = [f"### {title}", "", f"`{name}`, {len(blob)} bytes:", "", "```", hexdump(blob),
             "```", "", *index_walk(blob)]
    if shards_of == name:
        for shard in index.shards:
            lines += shard_walk(shard.path, files[shard.path], index)
    return lines


INTRO = """# Walkthroughs: a directory checkpoint, a part index and a merge, byte by byte

Informative. Generated by [`make_walkthroughs.py`](make_walkthroughs.py),
which builds the files of [`directory/`](directory/) and [`merge/`](merge/)
from the rules of [format.md](../format.md) and [parts.md](../parts.md)
with the generated protobuf classes, `struct` and `crc32c` only; do not edit
by hand. [format.md, Appendix A](../format.md#appendix-a-a-minimal-checkpoint-byte-by-byte)
explains the encoding of the index (tags, packed columns); the tables below
list every field of every index in the order of its bytes, nested messages
indented. Every value is CODEC_NONE, one chunk, float32 little-endian:
`kernel` is `[[1, 2], [3, 4]]`, `bias` is `[0.5, -0.5]`.
"""


DIRECTORY_TEXT = (
    "`directory/` holds `index.ocf` and one shard file, `{shard}`. The index lists only "
    "that shard (no shard with the empty path: `index.ocf` holds no tensor bytes), two "
    "tensors stored whole, and the metadata `epoch` = 3.")
PART_TEXT = (
    "`merge/` holds the two parts of save `{save}` ([parts.md](../parts.md)). Part 0 "
    "stores row 0 of `kernel` as a slice (box start `[0, 0]`, extent `[1, 2]`: its boxes "
    "need not cover the shape, [R-PART-001]) and `bias` whole, and carries the metadata; "
    "it lists the required feature `part`, so that no reader takes it for a checkpoint "
    "([R-PART-003]), and `Index.part` (field 7) says which part of which save it is.")
PART_1_TEXT = (
    "Part 1 stores row 1 of `kernel` (start `[1, 0]`, extent `[1, 2]`) and no metadata.")
MERGED_TEXT = (
    "The merged `index.ocf` ([R-PART-006]) lists part 0's shard, then part 1's; holds each "
    "key once, in order of first appearance (`kernel`, then `bias`); gives `kernel` its two "
    "slices, part 0's then part 1's, copied unchanged but for the shard number of part 1's "
    "block (0 in the part, 1 in the merged index); keeps part 0's metadata; and has no "
    "required feature and no `Index.part`. No tensor byte was read, copied or moved.")


def walkthrough(directory: dict[str, bytes], merge: dict[str, bytes]) -> str:
    part0 = f"part-{SAVE_ID}-00000.ocfpart"
    part1 = f"part-{SAVE_ID}-00001.ocfpart"
    lines = [INTRO, "## A directory checkpoint", "",
             DIRECTORY_TEXT.format(shard=shard_name(WRITE_IDS[0])), "",
             *file_section("index.ocf", directory, "index.ocf", "index.ocf"),
             "## A part index", "", PART_TEXT.format(save=SAVE_ID), "",
             *file_section(part0, merge, part0, part0),
             "## A merge: the other input and the merged index", "", PART_1_TEXT, "",
             *file_section(part1, merge, part1, part1), MERGED_TEXT, "",
             *file_section("index.ocf (merged)", merge, "index.ocf", "")]
    return "\n".join(lines).rstrip() + "\n"


def write_all(out: Path) -> None:
    directory, merge = directory_checkpoint(), merge_directory()
    for sub, files in (("directory", directory), ("merge", merge)):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (out / sub / name).write_bytes(data)
    (out / "walkthroughs.md").write_text(walkthrough(directory, merge), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="default: spec/examples")
    write_all(parser.parse_args().out)


if __name__ == "__main__":
    main()
