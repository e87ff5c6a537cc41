"""Hard limits of spec/format.md, "Limits" [R-LIMIT-001] [R-LIMIT-002].

A reader refuses anything beyond them with LIMIT_EXCEEDED, before it
allocates memory for it; a writer refuses to produce it.
"""

from __future__ import annotations

# Format 1.2 raised the index limit from 256 MiB, which the index of a 405B-parameter
# model saved by 8,192 ranks (one slice per rank and tensor) exceeds at any chunk size;
# 1 GiB stays well below the 2 GiB that protobuf runtimes parse.
MAX_INDEX_BYTES = 1 << 30
MAX_TENSORS = 1 << 24
MAX_SHARDS = 65536
MAX_KEY_BYTES = 4096
MAX_RANK = 32
# Format 1.2 raised the slices of a tensor from 4096 to the most parts a save may have
# [R-PART-004], so that one box per writer always merges, for tensors of rank 4 or less:
# their boxes have at most 16 corners each, and the tiling check that counts corners is
# O(r k log k). Above rank 4 that check can fall back to a sweep that compares pairs of
# boxes, so the 1.1 limit stays [R-SLICE-004].
MAX_SLICES_PER_TENSOR = 65536
MAX_SLICES_ABOVE_RANK_4 = 4096
MAX_CHUNKS_PER_BLOCK = 1 << 24
MAX_METADATA_DEPTH = 32
# Protobuf nesting of the index below Index (level 0) that readers parse [R-FILE-007].
MAX_PROTOBUF_NESTING = 100
# Nodes of an object graph [R-LIMIT-002].
MAX_NODES = 1 << 24
# The product of a tensor's non-zero dimensions [R-TENSOR-003]: with item sizes
# of at most 16 bytes every valid tensor fits in 2**62 bytes, so NumPy (or any
# 64-bit array library) can represent its shape, empty ones included.
MAX_ELEMENTS = 1 << 58
MIN_CHUNK_SIZE = 4096
MAX_CHUNK_SIZE = 1 << 30
# No Zstandard frame decodes to more than 32768 bytes per stored byte: its
# densest block (RLE) takes 4 bytes for 131072 bytes of output.
MAX_ZSTD_RATIO = 32768
# Offsets and lengths are uint64 on disk; anything at or above 2**63 is
# refused so that every sum of two such values stays exact in any language.
MAX_FILE_OFFSET = (1 << 63) - 1


def nonzero_product(shape: tuple[int, ...]) -> int:
    """The product of the non-zero dimensions, which MAX_ELEMENTS bounds [R-TENSOR-003].

    Zero dimensions are left out so the limit does not depend on their order.
    """
    product = 1
    for dim in shape:
        product *= dim or 1
    return product


def max_slices(rank: int) -> int:
    """The most slices a tensor of ``rank`` may be stored in [R-SLICE-004]."""
    return MAX_SLICES_PER_TENSOR if rank <= 4 else MAX_SLICES_ABOVE_RANK_4


# The same, by rank from 0 to MAX_RANK: a table for checking many tensors at once.
MAX_SLICES_BY_RANK = tuple(max_slices(rank) for rank in range(MAX_RANK + 1))
