"""Checks of a written checkpoint's bytes beyond its meaning, for write cases that
test a writer's SHOULD (conformance/protocol.md, "Cases": ``checks``).

Each check reads the index file (and the shards) an adapter wrote and returns
None when the bytes do what the spec recommends, else why not. They run after
the reference reader has read the checkpoint, so the files are valid.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from ocf.format.container import FOOTER_SIZE, INDEX_FILE_NAME, PREAMBLE_SIZE
from ocf.format.index import canonical
from ocf.v1 import index_pb2

ALIGNMENT = 64
CODEC_ZSTD = 2


def _index_file(output: Path) -> Path:
    return output / INDEX_FILE_NAME if output.is_dir() else output


def _index(output: Path) -> tuple[bytes, int]:
    """The index bytes of the checkpoint at ``output`` and its index offset."""
    data = _index_file(output).read_bytes()
    offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
    return data[offset:offset + length], offset


def deterministic_index(output: Path) -> str | None:
    """[R-FILE-007]: the index bytes are the deterministic serialization of the index."""
    data, _ = _index(output)
    index = index_pb2.Index.FromString(data)
    index.DiscardUnknownFields()
    expected = canonical.serialize(index)
    if data == expected:
        return None
    at = next((k for k, (a, b) in enumerate(zip(data, expected)) if a != b),
              min(len(data), len(expected)))
    return (f"the index bytes ({len(data)}) differ from their deterministic serialization "
            f"({len(expected)}) from byte {at} on [R-FILE-007]")


def no_gaps(output: Path) -> str | None:
    """[R-DATA-004]: no bytes of a data region lie outside blocks but the padding that
    aligns the next block (or the index) to 64."""
    data, index_offset = _index(output)
    index = index_pb2.Index.FromString(data)
    blocks = index.blocks
    for number, shard in enumerate(index.shards):
        end = index_offset if not shard.path else shard.length
        ranges = sorted((blocks.offsets[j], blocks.stored_lengths[j])
                        for j in range(len(blocks.offsets))
                        if blocks.shards[j] == number and blocks.stored_lengths[j])
        position = PREAMBLE_SIZE
        for offset, length in ranges:
            if offset != _aligned(position):
                return (f"shard {shard.path or '(the index file)'}: a gap of "
                        f"{offset - position} bytes before the block at {offset} [R-DATA-004]")
            position = offset + length
        if end > _aligned(position):
            return (f"shard {shard.path or '(the index file)'}: {end - position} bytes after "
                    f"its last block [R-DATA-004]")
    return None


def _aligned(position: int) -> int:
    return -(-position // ALIGNMENT) * ALIGNMENT


def zstd_content_size(output: Path) -> str | None:
    """[R-CODEC-001]: every zstd frame records Frame_Content_Size."""
    data, _ = _index(output)
    index = index_pb2.Index.FromString(data)
    blocks = index.blocks
    stored_at = 0
    for j, codec in enumerate(blocks.codecs):
        chunks = _chunk_count(blocks.raw_lengths[j], blocks.chunk_sizes[j])
        if codec != CODEC_ZSTD:
            continue
        shard = index.shards[blocks.shards[j]]
        content = _index_file(output) if not shard.path else \
            _index_file(output).parent / shard.path
        with content.open("rb") as stream:
            start = blocks.offsets[j]
            for length in blocks.chunk_stored_lengths[stored_at:stored_at + chunks]:
                stream.seek(start)
                descriptor = stream.read(5)[4]
                if descriptor >> 6 == 0 and not descriptor & 0x20:
                    return (f"block {j}: a zstd frame at offset {start} without "
                            "Frame_Content_Size [R-CODEC-001]")
                start += length
        stored_at += chunks
    return None


def _chunk_count(raw_length: int, chunk_size: int) -> int:
    if raw_length == 0:
        return 0
    return 1 if chunk_size == 0 else -(-raw_length // chunk_size)


CHECKS: dict[str, Callable[[Path], str | None]] = {
    "deterministic-index": deterministic_index,
    "no-gaps": no_gaps,
    "zstd-content-size": zstd_content_size,
}
