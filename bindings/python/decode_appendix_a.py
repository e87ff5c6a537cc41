"""Decode an OCF index file with the Python classes protoc generates from
proto/ (python/src/ocf/v1/*_pb2.py) and print the summary of
bindings/appendix_a.expected. A binding example, not a reader: it runs none
of the checks of spec/format.md, and uses nothing of the ocf package but
its generated modules.

    python bindings/python/decode_appendix_a.py spec/examples/minimal.ocf
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from ocf.v1 import index_pb2, metadata_pb2, tensor_pb2


def tensor_lines(tensors: tensor_pb2.TensorTable) -> list[str]:
    lines = [f"tensors count={len(tensors.keys)}"]
    dim = 0
    for i, key in enumerate(tensors.keys):
        shape = ", ".join(str(d) for d in tensors.dims[dim : dim + tensors.ranks[i]])
        dim += tensors.ranks[i]
        dtype = tensor_pb2.Dtype.Name(tensors.dtypes[i])
        lines.append(
            f'tensor {i} key="{key}" dtype={dtype} shape=[{shape}] '
            f"slice_count={tensors.slice_counts[i]}"
        )
    return lines


def block_lines(blocks: tensor_pb2.BlockTable) -> list[str]:
    lines = [f"blocks count={len(blocks.offsets)}"]
    for j, offset in enumerate(blocks.offsets):
        codec = tensor_pb2.Codec.Name(blocks.codecs[j])
        shuffle = str(blocks.byte_shuffles[j]).lower()
        lines.append(
            f"block {j} shard={blocks.shards[j]} offset={offset} "
            f"stored_length={blocks.stored_lengths[j]} raw_length={blocks.raw_lengths[j]} "
            f"codec={codec} byte_shuffle={shuffle} chunk_size={blocks.chunk_sizes[j]}"
        )
    crcs = ", ".join(f"0x{crc:08x}" for crc in blocks.chunk_crcs)
    return [*lines, f"chunk_crcs [{crcs}]"]


def metadata_line(key: str, value: metadata_pb2.Value) -> str:
    kind = value.WhichOneof("kind")
    if kind == "int_value":
        return f"metadata {key} int_value={value.int_value}"
    return f"metadata {key} kind={kind}"


def summary(data: bytes) -> list[str]:
    offset, length, crc, major, minor = struct.unpack_from("<QQIHH", data, len(data) - 32)
    index = index_pb2.Index.FromString(data[offset : offset + length])
    header = index.header
    lines = [
        f"footer index_offset={offset} index_length={length} "
        f"index_crc32c=0x{crc:08x} format={major}.{minor}",
        f'header required_features={len(header.required_features)} writer="{header.writer}"',
        f"shards count={len(index.shards)}",
    ]
    lines += [f'shard {s} path="{x.path}" length={x.length}' for s, x in enumerate(index.shards)]
    lines += tensor_lines(index.tensors) + block_lines(index.blocks)
    # The first tensor's values, read as little-endian float32 from its first
    # block (the example's tensor is float32, stored whole with CODEC_NONE).
    blocks = index.blocks
    values = struct.unpack_from(f"<{blocks.raw_lengths[0] // 4}f", data, blocks.offsets[0])
    lines.append(f"data {index.tensors.keys[0]}=[{', '.join(f'{v:.1f}' for v in values)}]")
    lines += [metadata_line(key, value) for key, value in index.metadata.items()]
    graph = "present" if index.HasField("object_graph") else "absent"
    return [*lines, f"object_graph {graph}"]


if __name__ == "__main__":
    print("\n".join(summary(Path(sys.argv[1]).read_bytes())))
