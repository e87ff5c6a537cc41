"""OCF files built byte by byte from spec/format.md, for the conformance generators.

Nothing here uses the reference implementation's reader or writer: the only
import from the ``ocf`` package is the protobuf classes generated from
proto/ocf/v1 (the normative schema). CRC-32C is computed by the bitwise
algorithm of spec/format.md, Appendix B (table-driven), and checked against
the spec's check values when this module is imported.

Layout of an index file (spec/format.md, "Files"):

    preamble (64) | data region | index bytes | footer (32)

A :class:`Builder` collects tensors (their canonical raw bytes), places their
blocks at 64-byte aligned offsets of the data regions of its shards, and
produces the ``Index`` message and the files. Generators of negative cases
take the message, damage it, and assemble the files with :func:`index_file`.
It also records, from its inputs alone, what the checkpoint means (the
semantic JSON of ``ocf.conformance.semantics``), so expectations never come
from the reader under test.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zstandard
from ocf.v1 import index_pb2, metadata_pb2, object_graph_pb2

import semantic

PREAMBLE_MAGIC = b"\x89OCF\r\n\x1a\n"
FOOTER_MAGIC = b"\x89OCFEND\n"
PREAMBLE = PREAMBLE_MAGIC + bytes(56)
FOOTER = struct.Struct("<QQIHH8s")
ALIGN = 64
CODEC_NONE, CODEC_ZSTD = 1, 2

# -- CRC-32C (spec/format.md, Appendix B) ----------


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C, unmasked [R-CRC-001]; ``crc`` continues an earlier result."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"") == 0
assert crc32c(b"123456789") == 0xE3069283
assert crc32c(struct.pack("<2f", 1.0, -2.0)) == 0xAA36F2C9


def pad(position: int) -> int:
    """Zero bytes from ``position`` to the next multiple of 64."""
    return -position % ALIGN


def footer(index_offset: int, index_length: int, index_crc: int, major: int = 1,
           minor: int = 1, magic: bytes = FOOTER_MAGIC) -> bytes:
    return FOOTER.pack(index_offset, index_length, index_crc, major, minor, magic)


def index_file(region: bytes, index: index_pb2.Index | bytes, *, major: int = 1,
               minor: int = 1, pad_index: bool = True) -> bytes:
    """Preamble, data ``region`` (its first byte at offset 64), index, footer."""
    data = bytes(region) + (bytes(pad(ALIGN + len(region))) if pad_index else b"")
    index_bytes = serialize(index)
    offset = ALIGN + len(data)
    return (PREAMBLE + data + index_bytes
            + footer(offset, len(index_bytes), crc32c(index_bytes), major, minor))


def serialize(index: index_pb2.Index | bytes) -> bytes:
    if isinstance(index, (bytes, bytearray)):
        return bytes(index)
    return index.SerializeToString(deterministic=True)


@dataclass(frozen=True)
class Layout:
    """The parts of a well-formed index file, from its footer."""

    size: int
    index_offset: int
    index_length: int
    index_crc: int
    major: int
    minor: int

    @property
    def index_end(self) -> int:
        return self.index_offset + self.index_length

    @property
    def footer_offset(self) -> int:
        return self.size - FOOTER.size


def read_layout(blob: bytes) -> Layout:
    """Decode the footer of a well-formed index file (ValueError for any other bytes)."""
    if len(blob) < FOOTER.size:
        raise ValueError("not a well-formed OCF index file: shorter than a footer")
    offset, length, crc, major, minor, magic = FOOTER.unpack(blob[-FOOTER.size:])
    if magic != FOOTER_MAGIC or offset + length != len(blob) - FOOTER.size:
        raise ValueError("not a well-formed OCF index file")
    return Layout(len(blob), offset, length, crc, major, minor)


def index_bytes_of(blob: bytes) -> bytes:
    """The index bytes of a well-formed index file."""
    at = read_layout(blob)
    return blob[at.index_offset:at.index_end]


def index_of(blob: bytes) -> index_pb2.Index:
    """The parsed index of a well-formed index file."""
    message = index_pb2.Index()
    message.ParseFromString(index_bytes_of(blob))
    return message


def replace_index(blob: bytes, index: index_pb2.Index | bytes) -> bytes:
    """``blob`` with a new index (and a footer that matches it); same data and version."""
    at = read_layout(blob)
    index_bytes = serialize(index)
    return (blob[:at.index_offset] + index_bytes
            + footer(at.index_offset, len(index_bytes), crc32c(index_bytes), at.major,
                     at.minor))


def patch(blob: bytes, offset: int, new: bytes) -> bytes:
    """``blob`` with the bytes at ``offset`` overwritten by ``new`` (same length)."""
    if not 0 <= offset <= offset + len(new) <= len(blob):
        raise ValueError(f"patch [{offset}, {offset + len(new)}) outside {len(blob)} bytes")
    return blob[:offset] + new + blob[offset + len(new):]


FOOTER_FIELDS = {"index_offset": (0, "<Q"), "index_length": (8, "<Q"),
                 "index_crc32c": (16, "<I"), "format_major": (20, "<H"),
                 "format_minor": (22, "<H")}


def set_footer_field(blob: bytes, name: str, value: int) -> bytes:
    """``blob`` with one footer field (see FOOTER_FIELDS) set to ``value``."""
    at, fmt = FOOTER_FIELDS[name]
    return patch(blob, len(blob) - FOOTER.size + at, struct.pack(fmt, value))


# -- protobuf wire pieces, for unknown fields ----------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def field_fixed64(number: int, value: int) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<Q", value)


def field_fixed32(number: int, value: int) -> bytes:
    return varint(number << 3 | 5) + struct.pack("<I", value)


# -- Zstandard ----------


class FrameCache:
    """Zstandard frames by input, kept in a JSON file so that every run of the
    generators writes the same bytes whatever libzstd version compresses.

    A frame missing from the cache is compressed with the ``zstandard``
    package and remembered; :meth:`save` writes the cache back (only when the
    generator is asked to), :attr:`missing` tells whether it was complete.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.frames: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        self.used: set[str] = set()
        self.missing: list[str] = []

    def compress(self, data: bytes, *, level: int = 3, checksum: bool = False) -> bytes:
        key = f"{hashlib.sha256(data).hexdigest()}:{len(data)}:{level}:{int(checksum)}"
        self.used.add(key)
        if key not in self.frames:
            frame = zstandard.ZstdCompressor(level=level, write_content_size=True,
                                             write_checksum=checksum).compress(data)
            self.frames[key] = frame.hex()
            self.missing.append(key)
        frame = bytes.fromhex(self.frames[key])
        assert zstandard.ZstdDecompressor().decompress(frame) == data
        return frame

    def save(self) -> None:
        kept = {k: v for k, v in sorted(self.frames.items()) if k in self.used}
        self.path.write_text(json.dumps(kept, indent=1) + "\n")


FRAMES: FrameCache | None = None  # set by generate_all before any case is built


def zstd(data: bytes, *, checksum: bool = False) -> bytes:
    assert FRAMES is not None, "generate_all sets the frame cache"
    return FRAMES.compress(data, checksum=checksum)


def raw_frame(data: bytes, *, content_size: bool = True, window_log: int | None = None,
              dictionary_id: int | None = None, checksum: bytes | None = None,
              declared_size: int | None = None) -> bytes:
    """One Zstandard frame (RFC 8878) holding ``data`` in a single raw block.

    ``window_log`` sets a Window_Descriptor (else the frame is single-segment,
    which needs the content size); ``dictionary_id`` adds a 1-byte
    Dictionary_ID; ``checksum`` appends those 4 bytes as Content_Checksum;
    ``declared_size`` overrides the Frame_Content_Size written.
    """
    size = len(data) if declared_size is None else declared_size
    descriptor = 0
    tail = b""
    if window_log is None:
        assert content_size
        descriptor |= 1 << 5  # Single_Segment_flag: no Window_Descriptor
    if content_size:
        if window_log is None and size < 256:
            tail = struct.pack("<B", size)  # flag 0 with single segment: 1 byte
        elif 256 <= size < 65536 + 256:
            descriptor |= 1 << 6
            tail = struct.pack("<H", size - 256)
        else:
            descriptor |= 2 << 6
            tail = struct.pack("<I", size)
    if checksum is not None:
        descriptor |= 1 << 2
    header = b"\x28\xb5\x2f\xfd" + bytes([descriptor])
    if window_log is not None:
        assert window_log >= 10
        header += bytes([(window_log - 10) << 3])  # exponent, mantissa 0
    if dictionary_id is not None:
        header = patch(header, 4, bytes([descriptor | 1]))
        header += bytes([dictionary_id])
    block = struct.pack("<I", len(data) << 3 | 1)[:3] + data  # Last_Block, Raw_Block
    return header + tail + block + (checksum or b"")


def shuffle(raw: bytes, itemsize: int) -> bytes:
    """shuffled[j*m + i] = raw[i*s + j] [R-CODEC-002]."""
    if itemsize <= 1 or not raw:
        return raw
    return np.frombuffer(raw, np.uint8).reshape(-1, itemsize).T.tobytes()


# -- blocks, tensors, files ----------


@dataclass
class Block:
    """One row of the block table, with its variable-length values."""

    shard: int
    offset: int
    stored_length: int
    raw_length: int
    codec: int = CODEC_NONE
    byte_shuffle: bool = False
    chunk_size: int = 0
    chunk_crcs: list[int] = field(default_factory=list)
    chunk_stored_lengths: list[int] = field(default_factory=list)
    start: list[int] | None = None  # the box of a slice
    extent: list[int] | None = None


@dataclass
class Tensor:
    """One row of the tensor table and its blocks."""

    key: str
    dtype: int
    shape: list[int]
    blocks: list[Block]
    sliced: bool = False


class Builder:
    """A checkpoint assembled from the byte layout of spec/format.md.

    ``shards`` names the files holding data: "" is the index file itself,
    any other name an external shard of a directory checkpoint.
    """

    def __init__(self, shards: Sequence[str] = ("",), *, writer: str = "conformance/generate"
                 ) -> None:
        self.shard_names = list(shards)
        self.regions = [bytearray() for _ in shards]
        self.tensors: list[Tensor] = []
        self.writer = writer
        self.required_features: list[str] = []
        self.metadata: dict[str, Any] = {}  # typed JSON (semantic.value form)
        self.graph: list[dict[str, Any]] | None = None  # nodes in source.json form
        self.expected_tensors: dict[str, Any] = {}

    # -- data ---------------------------------------------------------------

    def put(self, shard: int, stored: bytes, *, gap: int = 0, fill: int = 0) -> int:
        """Append ``stored`` at the next multiple of 64 (after ``gap`` more bytes)."""
        region = self.regions[shard]
        region += bytes([fill]) * (pad(ALIGN + len(region)) + gap)
        offset = ALIGN + len(region)
        region += stored
        return offset

    def encode(self, raw: bytes, itemsize: int, *, codec: int = CODEC_NONE,
               shuffle_bytes: bool = False, chunk_size: int = 0, shard: int = 0,
               gap: int = 0) -> Block:
        """Encode ``raw`` as one block: chunks, shuffle, zstd, CRCs; place it."""
        if not raw:
            chunks: list[bytes] = []
        elif chunk_size:
            chunks = [raw[i:i + chunk_size] for i in range(0, len(raw), chunk_size)]
        else:
            chunks = [raw]
        stored = []
        for chunk in chunks:
            data = shuffle(chunk, itemsize) if shuffle_bytes else chunk
            stored.append(zstd(data) if codec == CODEC_ZSTD else data)
        blob = b"".join(stored)
        offset = self.put(shard, blob, gap=gap)
        return Block(shard, offset, len(blob), len(raw), codec, shuffle_bytes, chunk_size,
                     [crc32c(s) for s in stored],
                     [len(s) for s in stored] if codec == CODEC_ZSTD else [])

    def add(self, key: str, dtype: str, shape: Sequence[int], raw: bytes, *,
            codec: int = CODEC_NONE, shuffle_bytes: bool = False, chunk_size: int = 0,
            shard: int = 0, slices: Sequence[tuple[Sequence[int], Sequence[int]]] | None = None,
            slice_shards: Sequence[int] | None = None, gap: int = 0) -> Tensor:
        """Add tensor ``key`` holding the canonical ``raw`` bytes, whole or in ``slices``."""
        code, itemsize = semantic.DTYPES[dtype]
        shape = [int(d) for d in shape]
        if slices is None:
            blocks = [self.encode(raw, itemsize, codec=codec, shuffle_bytes=shuffle_bytes,
                                  chunk_size=chunk_size, shard=shard, gap=gap)]
        else:
            blocks = []
            for s, (start, extent) in enumerate(slices):
                box_raw = semantic.box_bytes(raw, dtype, shape, start, extent)
                block = self.encode(box_raw, itemsize, codec=codec, shuffle_bytes=shuffle_bytes,
                                    chunk_size=chunk_size,
                                    shard=slice_shards[s] if slice_shards else shard, gap=gap)
                block.start, block.extent = list(start), list(extent)
                blocks.append(block)
        tensor = Tensor(key, code, shape, blocks, slices is not None)
        self.tensors.append(tensor)
        self.expected_tensors[key] = semantic.tensor(dtype, shape, raw)
        return tensor

    # -- index ----------------------------------------------------------------

    def index(self) -> index_pb2.Index:
        index = index_pb2.Index()
        if self.writer:
            index.header.writer = self.writer
        if self.required_features:
            index.header.required_features.extend(self.required_features)
        for name, region in zip(self.shard_names, self.regions):
            index.shards.add(path=name, length=ALIGN + len(region) if name else 0)
        table, columns = index.tensors, index.blocks
        for t in self.tensors:
            table.keys.append(t.key)
            table.dtypes.append(t.dtype)
            table.ranks.append(len(t.shape))
            table.dims.extend(t.shape)
            table.slice_counts.append(len(t.blocks) if t.sliced else 0)
            for b in t.blocks:
                columns.shards.append(b.shard)
                columns.offsets.append(b.offset)
                columns.stored_lengths.append(b.stored_length)
                columns.raw_lengths.append(b.raw_length)
                columns.codecs.append(b.codec)
                columns.byte_shuffles.append(b.byte_shuffle)
                columns.chunk_sizes.append(b.chunk_size)
                columns.chunk_crcs.extend(b.chunk_crcs)
                columns.chunk_stored_lengths.extend(b.chunk_stored_lengths)
                if t.sliced:
                    assert b.start is not None and b.extent is not None
                    columns.slice_starts.extend(b.start)
                    columns.slice_extents.extend(b.extent)
        for key, value in self.metadata.items():
            to_value(value, index.metadata[key])
        if self.graph is not None:
            index.object_graph.SetInParent()
            graph_message(self.graph, index.object_graph)
        return index

    def files(self, index: index_pb2.Index | bytes | None = None, *, major: int = 1,
              minor: int = 1, pad_index: bool = True, index_name: str = "index.ocf"
              ) -> dict[str, bytes]:
        """Every file of the checkpoint by name; the index file is ``index_name``."""
        own = self.shard_names.index("") if "" in self.shard_names else None
        region = bytes(self.regions[own]) if own is not None else b""
        out = {index_name: index_file(region, self.index() if index is None else index,
                                      major=major, minor=minor, pad_index=pad_index)}
        for name, data in zip(self.shard_names, self.regions):
            if name:
                out[name] = PREAMBLE + bytes(data)
        return out

    def single(self, index: index_pb2.Index | bytes | None = None, **options: Any) -> bytes:
        """The bytes of a single-file checkpoint."""
        assert self.shard_names in ([""], [])
        return self.files(index, **options)["index.ocf"]

    def expect(self) -> dict[str, Any]:
        """What the checkpoint means, from the builder's inputs."""
        return {"result": "ok", "tensors": self.expected_tensors,
                "metadata": dict(self.metadata),
                "object_graph": None if self.graph is None else semantic.graph(self.graph)}


# -- metadata and graphs as protobuf ----------


def to_value(value: Any, out: metadata_pb2.Value) -> None:
    """Fill ``out`` from typed JSON (``semantic.value`` form)."""
    if value is None:
        return
    ((kind, item),) = value.items()
    if kind == "bool":
        out.bool_value = item
    elif kind == "int":
        out.int_value = int(item)
    elif kind == "float":
        out.float_value = float.fromhex(item)
    elif kind == "string":
        out.string_value = item
    elif kind == "bytes":
        out.bytes_value = semantic.b64decode(item)
    elif kind == "list":
        out.list_value.SetInParent()
        for element in item:
            to_value(element, out.list_value.values.add())
    elif kind == "map":
        out.map_value.SetInParent()
        for key, element in item.items():
            to_value(element, out.map_value.entries[key])
    else:
        raise ValueError(f"unknown value kind {kind!r}")


def graph_message(nodes: list[dict[str, Any]], out: object_graph_pb2.ObjectGraph) -> None:
    """Fill ``out`` from nodes in source.json form."""
    for node in nodes:
        stored = out.nodes.add(type_name=node.get("type_name", ""))
        for name, child in node.get("children", []):
            stored.children.add(name=name, node_id=child)
        for name, key in node.get("attributes", []):
            stored.attributes.add(name=name, key=key)
        for variable, name, slot in node.get("slot_variables", []):
            stored.slot_variables.add(original_variable_node_id=variable, slot_name=name,
                                      slot_variable_node_id=slot)
        for key, value in node.get("metadata", {}).items():
            to_value(value, stored.metadata[key])


# -- other valid encodings of one index --------------------------------------------------


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _scalar(field: Any, value: Any) -> bytes:
    """One field of a scalar type, as its own tag and value (unpacked)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    number = field.number
    if field.type in (F.TYPE_STRING, F.TYPE_BYTES):
        data = value.encode() if isinstance(value, str) else value
        return field_bytes(number, data)
    if field.type == F.TYPE_FIXED32:
        return field_fixed32(number, value)
    if field.type == F.TYPE_FIXED64 or field.type == F.TYPE_DOUBLE:
        raw = struct.pack("<d", value) if field.type == F.TYPE_DOUBLE else \
            struct.pack("<Q", value)
        return varint(number << 3 | 1) + raw
    if field.type == F.TYPE_SINT64:
        return field_varint(number, _zigzag(value))
    if field.type == F.TYPE_BOOL:
        return field_varint(number, int(value))
    return field_varint(number, value % (1 << 64))  # uint, int32/enum: two's complement


def unpacked(message: Any, *, reverse: bool = False, explicit_defaults: bool = False) -> bytes:
    """``message`` serialized with every repeated scalar unpacked (one tag per value),
    fields in descending field-number order when ``reverse``, and singular fields at their
    default value written out when ``explicit_defaults``: all valid encodings that every
    protobuf parser reads as the same message."""
    out = []
    fields = sorted(message.DESCRIPTOR.fields, key=lambda fd: fd.number, reverse=reverse)
    for fd in fields:
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry:
                for key in sorted(getattr(message, fd.name)):
                    entry = fd.message_type._concrete_class()
                    entry.key = key
                    entry.value.CopyFrom(getattr(message, fd.name)[key])
                    out.append(field_bytes(fd.number, entry.SerializeToString(
                        deterministic=True)))
            elif _is_repeated(fd):
                for item in getattr(message, fd.name):
                    out.append(field_bytes(fd.number, unpacked(
                        item, reverse=reverse, explicit_defaults=explicit_defaults)))
            elif message.HasField(fd.name):
                out.append(field_bytes(fd.number, unpacked(
                    getattr(message, fd.name), reverse=reverse,
                    explicit_defaults=explicit_defaults)))
        elif _is_repeated(fd):
            out.extend(_scalar(fd, v) for v in getattr(message, fd.name))
        elif fd.containing_oneof is not None:
            if message.WhichOneof(fd.containing_oneof.name) == fd.name:
                out.append(_scalar(fd, getattr(message, fd.name)))
        else:
            value = getattr(message, fd.name)
            if value or explicit_defaults:
                out.append(_scalar(fd, value))
    return b"".join(out)


def _is_repeated(fd: Any) -> bool:
    return bool(fd.is_repeated)
