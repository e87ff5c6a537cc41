"""Hard limits of spec/format.md, "Limits" [R-LIMIT-001] [R-LIMIT-002].

A reader refuses anything beyond them with LIMIT_EXCEEDED, before it
allocates memory for it; a writer refuses to produce it.
"""

from __future__ import annotations

MAX_INDEX_BYTES = 256 << 20
MAX_TENSORS = 1 << 24
MAX_SHARDS = 65536
MAX_KEY_BYTES = 4096
MAX_RANK = 32
MAX_SLICES_PER_TENSOR = 4096
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
