"""Defaults of multi-writer saves that later loads read on another partitioning."""

from __future__ import annotations

from typing import Literal

# Largest chunk of distributed saves unless the caller chooses one: a reader that
# wants another partitioning than the writers' reads whole chunks (each is
# checksummed). With the default strips (RESHARD_TILES) each tensor gets its
# own chunk size up to this one, about 4,096 chunks a tensor from 4 KiB up; with a
# grid (an int tile_bytes) every chunk is this size. 4 bytes of index per chunk.
RESHARD_CHUNK_SIZE = 64 << 10
# The tiles of distributed saves unless the caller chooses (tile_bytes): every box of
# a tensor of rank 2 or more stored as strips its full height, each tensor in chunks
# of its own size (ocf.distributed.parts.strips), so that a load partitioned along
# any dimension reads a few percent more than it needs, about as much along each
# (python/benchmarks/bench_tile_layout.py).
RESHARD_TILES: Literal["strips"] = "strips"
# Tile size of the grid layout, the default before strips (tile_bytes=None
# stores each box as one slice): every box of a tensor of rank 2 or more is
# stored as a grid of tiles of about this many bytes, each a slice of its own
# (ocf.distributed.parts.tiling), so that a reader that partitions the tensor along
# another dimension than the writers (columns of a tensor saved by rows) reads
# the tiles its region overlaps, not every chunk of every box. The grid splits
# each dimension into about as many tiles, at most 1024 tiles per tensor
# (larger tensors get larger tiles). The cost is one slice record per tile in
# the index, a few tens of bytes.
RESHARD_TILE_BYTES = 16 << 10

__all__ = ["RESHARD_CHUNK_SIZE", "RESHARD_TILES", "RESHARD_TILE_BYTES"]
