"""Building OCF files by hand, from the byte layout of spec/format.md, for tests.

Nothing here uses ocf's writer or reader. The byte layout itself (preamble,
footer, index placement, patching) comes from the one byte-level builder the
conformance generators use, ``conformance/generate/ocfbytes.py``; this
module adds what tests need on top: a fast CRC-32C (the C library, for big
data), an ``Index`` message from tensor specs (:func:`make_index`), and
ready-made small checkpoints. Tests can so make files a writer would refuse
to produce.

Layout of an index file (spec/format.md, "Files"):

    preamble (64 bytes) | data region | index bytes | footer (32 bytes)

A shard file is the preamble followed by its data region.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import numpy as np

from ocf.v1 import index_pb2, metadata_pb2, tensor_pb2

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance" / "generate"))

from ocfbytes import (
    ALIGN,
    FOOTER,
    FOOTER_FIELDS,
    PREAMBLE,
    Layout,
    index_bytes_of,
    index_file,
    index_of,
    patch,
    read_layout,
    replace_index,
    set_footer_field,
)

__all__ = ["FOOTER_FIELDS", "Layout", "index_bytes_of", "index_of", "patch", "read_layout",
           "replace_index", "set_footer_field"]

PREAMBLE_SIZE = len(PREAMBLE)
FOOTER_SIZE = FOOTER.size
INDEX_FILE_NAME = "index.ocf"


def crc(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli, not masked) as spec/format.md, Appendix B defines it."""
    return int(crc32c.crc32c(bytes(data)))


def pad64(data: bytes, start: int = PREAMBLE_SIZE) -> bytes:
    """``data`` and zeros up to the next multiple of 64, for data placed at ``start``."""
    return data + bytes(-(start + len(data)) % ALIGN)


def build_file(
    index: index_pb2.Index | bytes, data: bytes = b"", *, major: int = 1, minor: int = 0,
) -> bytes:
    """A complete index file: preamble, ``data`` as the data region, the index, the footer.

    The data region starts at offset 64, so a block at byte ``k`` of ``data``
    has ``offset`` 64 + k. ``index`` may be bytes (for instance deliberately
    unparsable ones); the footer's CRC always matches the index bytes.
    """
    return index_file(data, index, major=major, minor=minor, pad_index=False)


def write_file(
    path: Path, index: index_pb2.Index | bytes, data: bytes = b"", *, major: int = 1,
    minor: int = 0,
) -> Path:
    """Write :func:`build_file`'s bytes to ``path``; returns ``path``."""
    path.write_bytes(build_file(index, data, major=major, minor=minor))
    return path


def shard_file(data: bytes) -> bytes:
    """A shard file of the directory form: the preamble, then its data region."""
    return PREAMBLE + data


def flip_bit(blob: bytes, bit: int) -> bytes:
    """``blob`` with bit ``bit`` (counting from bit 0 of byte 0) inverted."""
    byte, shift = divmod(bit, 8)
    return patch(blob, byte, bytes([blob[byte] ^ (1 << shift)]))


def corrupt_tensor(path: Path, key: str) -> None:
    """Flip one stored byte of tensor ``key`` in the file at ``path`` (in its first chunk,
    where an OCF reader found it), so that its checksum fails."""
    # Here only: nothing else in this module uses ocf's reader.
    from ocf.testing.adapters import flip_a_stored_byte

    flip_a_stored_byte(path, key)


# -- building an index ----------------------------------------------------------


@dataclass(frozen=True)
class BlockSpec:
    """One stored block (the bytes of a whole tensor or of one slice)."""

    offset: int
    stored_length: int
    raw_length: int
    chunk_crcs: tuple[int, ...]
    shard: int = 0
    codec: int = tensor_pb2.CODEC_NONE
    byte_shuffle: bool = False
    chunk_size: int = 0
    chunk_stored_lengths: tuple[int, ...] = ()


def plain_block(raw: bytes, offset: int, *, shard: int = 0, chunk_size: int = 0) -> BlockSpec:
    """An uncompressed block holding ``raw`` at ``offset`` of ``shard``, with right CRCs."""
    if chunk_size and len(raw) > chunk_size:
        crcs = tuple(crc(raw[i:i + chunk_size]) for i in range(0, len(raw), chunk_size))
    else:
        chunk_size = 0
        crcs = (crc(raw),) if raw else ()
    return BlockSpec(offset, len(raw), len(raw), crcs, shard=shard, chunk_size=chunk_size)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: stored whole in ``block``, or in ``slices`` (start, extent, block)."""

    key: str
    dtype: int
    shape: tuple[int, ...]
    block: BlockSpec | None = None
    slices: tuple[tuple[tuple[int, ...], tuple[int, ...], BlockSpec], ...] = field(
        default=())


def make_index(
    tensors: Sequence[TensorSpec],
    *,
    shards: Sequence[tuple[str, int]] = (("", 0),),
    required_features: Sequence[str] = (),
    metadata: Mapping[str, metadata_pb2.Value] | None = None,
) -> index_pb2.Index:
    """The ``Index`` message of the given shards (path, length) and tensors, in order."""
    index = index_pb2.Index()
    index.header.writer = "python/tests/helpers.py"
    index.header.required_features.extend(required_features)
    for path, length in shards:
        index.shards.add(path=path, length=length)
    table, columns = index.tensors, index.blocks
    for tensor in tensors:
        table.keys.append(tensor.key)
        table.dtypes.append(tensor.dtype)
        table.ranks.append(len(tensor.shape))
        table.dims.extend(tensor.shape)
        table.slice_counts.append(len(tensor.slices))
        if tensor.slices:
            blocks = []
            for start, extent, block in tensor.slices:
                columns.slice_starts.extend(start)
                columns.slice_extents.extend(extent)
                blocks.append(block)
        else:
            assert tensor.block is not None, "a tensor needs a block or slices"
            blocks = [tensor.block]
        for block in blocks:
            columns.shards.append(block.shard)
            columns.offsets.append(block.offset)
            columns.stored_lengths.append(block.stored_length)
            columns.raw_lengths.append(block.raw_length)
            columns.codecs.append(block.codec)
            columns.byte_shuffles.append(block.byte_shuffle)
            columns.chunk_sizes.append(block.chunk_size)
            columns.chunk_crcs.extend(block.chunk_crcs)
            columns.chunk_stored_lengths.extend(block.chunk_stored_lengths)
    for key, value in (metadata or {}).items():
        index.metadata[key].CopyFrom(value)
    return index


def minimal_checkpoint(
    values: bytes = struct.pack("<2f", 1.0, -2.0), key: str = "w",
) -> tuple[index_pb2.Index, bytes]:
    """Index and data region of a one-tensor file: float32 ``key`` holding ``values``."""
    spec = TensorSpec(key, tensor_pb2.DTYPE_FLOAT32, (len(values) // 4,),
                      plain_block(values, PREAMBLE_SIZE))
    return make_index([spec]), pad64(values)


def big_values(seed: int, count: int = 13, elements: int = 4 << 20) -> dict[str, np.ndarray]:
    """``count`` uint32 tensors of ``elements`` values (16 MiB each by default).

    Cheap to make (no random generator), different for every ``seed``, and the
    same in every process: the crash tests build them in a child process that
    writes them and in the parent that checks what was written.
    """
    out = {}
    for i in range(count):
        values = np.arange(elements, dtype=np.uint32)
        values *= np.uint32(2654435761)
        values += np.uint32((seed * 7919 + i) % (1 << 32))
        out[f"t{i:02d}"] = values
    return out


def scalar_checkpoint(keys: Sequence[str]) -> tuple[index_pb2.Index, bytes]:
    """Index and data region of float32 scalars, one per key, holding 0.0, 1.0, 2.0, ...

    Each scalar is stored whole with CODEC_NONE at the next multiple of 64, so
    the result is a valid name-based checkpoint to which a test can add an
    object graph (``index.object_graph``) before :func:`build_file`.
    """
    specs, data = [], b""
    for i, key in enumerate(keys):
        raw = struct.pack("<f", float(i))
        specs.append(TensorSpec(key, tensor_pb2.DTYPE_FLOAT32, (),
                                plain_block(raw, PREAMBLE_SIZE + len(data))))
        data += pad64(raw)
    return make_index(specs), data
