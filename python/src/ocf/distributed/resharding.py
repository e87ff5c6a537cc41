"""Defaults of multi-writer saves that later loads read on another partitioning."""

from __future__ import annotations

# Chunk size of distributed saves unless the caller chooses one: a reader that
# wants another partitioning than the writers' reads whole chunks (each is
# checksummed), and 64 KiB chunks keep that within a few percent of the
# bytes it needs (python/benchmarks/bench_distributed.py), at 4 bytes of
# index per chunk.
RESHARD_CHUNK_SIZE = 64 << 10
# Tile size of distributed saves unless the caller chooses one (tile_bytes=None
# stores each box as one slice): every box of a tensor of rank 2 or more is
# stored as a grid of tiles of about this many bytes, each a slice of its own
# (ocf.distributed.parts.tiling), so that a reader that partitions the tensor along
# another dimension than the writers (columns of a tensor saved by rows) reads
# the tiles its region overlaps, not every chunk of every box. The grid splits
# each dimension into about as many tiles, at most 1024 tiles per tensor
# (larger tensors get larger tiles). The cost is one slice record per tile in
# the index, a few tens of bytes.
RESHARD_TILE_BYTES = 16 << 10

__all__ = ["RESHARD_CHUNK_SIZE", "RESHARD_TILE_BYTES"]
