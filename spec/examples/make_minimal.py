"""Build spec/examples/minimal.ocf, the worked example of spec/format.md, Appendix A.

The file is a complete single-file OCF 1.0 checkpoint holding one float32
tensor "w" of shape [2] with values [1.0, -2.0] (codec NONE, chunk_size 0)
and the metadata {"step": 7}. It is built by hand from the layout rules of
spec/format.md, using only the generated protobuf classes, struct and
crc32c: no OCF reader or writer is involved.

The index is column-oriented: a TensorTable with one row (N = 1) and a
BlockTable with one row (M = 1). Every column is filled explicitly, zeros
included, because a reader checks the length of every column
[R-TABLE-001] [R-TABLE-002].

Run from the repository root:

    PYTHONPATH=python/src .venv/bin/python spec/examples/make_minimal.py

The output is byte-for-byte reproducible.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
from ocf.v1 import index_pb2, tensor_pb2

PREAMBLE_MAGIC = b"\x89OCF\r\n\x1a\n"
FOOTER_MAGIC = b"\x89OCFEND\n"
PREAMBLE_SIZE = 64
ALIGNMENT = 64
FORMAT_MAJOR, FORMAT_MINOR = 1, 0


def build() -> bytes:
    # Preamble: magic, then 56 reserved zero bytes.
    preamble = PREAMBLE_MAGIC + bytes(PREAMBLE_SIZE - len(PREAMBLE_MAGIC))

    # Data region: the raw bytes of "w", little-endian float32, C order.
    raw = struct.pack("<2f", 1.0, -2.0)
    offset = PREAMBLE_SIZE  # the first 64-aligned offset of the data region
    data = raw + bytes(-(offset + len(raw)) % ALIGNMENT)  # zero padding to 64

    index = index_pb2.Index()
    # One shard: the index file itself (empty path, length 0).
    index.shards.add(path="")

    # Tensor table, one row: "w", float32, rank 1, shape [2], stored whole.
    tensors = index.tensors
    tensors.keys.append("w")
    tensors.dtypes.append(tensor_pb2.DTYPE_FLOAT32)
    tensors.ranks.append(1)
    tensors.dims.extend([2])  # the shapes of all tensors, concatenated
    tensors.slice_counts.append(0)  # 0: stored whole, in one block

    # Block table, one row (M = max(1, 0) = 1): the block holding "w".
    blocks = index.blocks
    blocks.shards.append(0)
    blocks.offsets.append(offset)
    blocks.stored_lengths.append(len(raw))
    blocks.raw_lengths.append(len(raw))
    blocks.codecs.append(tensor_pb2.CODEC_NONE)
    blocks.byte_shuffles.append(False)
    blocks.chunk_sizes.append(0)  # one chunk
    blocks.chunk_crcs.append(crc32c.crc32c(raw))  # one value per chunk
    # chunk_stored_lengths: nothing (CODEC_NONE block).
    # slice_starts, slice_extents: nothing (no sliced tensor).

    index.metadata["step"].int_value = 7
    index_bytes = index.SerializeToString(deterministic=True)

    index_offset = len(preamble) + len(data)
    footer = struct.pack(
        "<QQIHH8s",
        index_offset,
        len(index_bytes),
        crc32c.crc32c(index_bytes),
        FORMAT_MAJOR,
        FORMAT_MINOR,
        FOOTER_MAGIC,
    )
    assert len(footer) == 32
    return preamble + data + index_bytes + footer


def main() -> None:
    out = Path(__file__).resolve().parent / "minimal.ocf"
    content = build()
    out.write_bytes(content)
    print(f"wrote {out} ({len(content)} bytes)")


if __name__ == "__main__":
    main()
