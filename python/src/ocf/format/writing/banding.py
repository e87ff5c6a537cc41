"""How an incremental write lays out a large tensor: as bands of rows, or whole
with a chunk per band (spec/pool.md; spec/format.md, "Chunks" and "Slices").

A large tensor is cut into bands of whole rows: the unit a later save reuses
or rewrites. A tensor of which every band changed (pretraining: every
weight, every step) is written whole instead, as a full save writes it, in
chunks of one band each: one block, one index row and one write, not one
per band. So is a tensor of which no byte changed when the base stores it
whole (a frozen weight): it references the base's block, one index row that
a reader reads in one piece, not one per band. The bands stay reusable: band
``k`` of such a block is its bytes ``[k * band, (k + 1) * band)``, its chunks
``k * band / chunk`` onwards, which a later save references as a block of its
own ([R-DATA-001]: the band's bytes are a multiple of 64, so is its offset)
with those chunks' CRCs.

Whether every band changed is told by their first bytes, which differ from
the stored ones when the band changed (a changed weight changes everywhere):
a band whose first bytes are equal is compared whole later, as any band is.
Writing a tensor whole never reuses a byte, so this test cannot save wrong
bytes; it only decides how the new bytes are laid out [R-COMMIT-007].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from ocf.format.container import ALIGNMENT
from ocf.format.index.model import Block
from ocf.format.limits import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from ocf.format.slicing import Box
from ocf.format.writing.items import Item, Tensors

# Tensors above this many bytes are stored as bands of rows of about this size: the
# unit a later save reuses or rewrites. One default chunk: a changed byte rewrites
# 1 MiB.
BAND_BYTES = 1 << 20
# Tensors above this many bytes, such as embedding tables, whose updates touch runs
# of rows at scattered places, are stored as bands of FINE_BAND_BYTES (within
# _MAX_BANDS): a run of changed rows then rewrites little more than itself (2% of a
# table in 8 runs: 1.4x the changed bytes at 256 MiB, against 2.5x with 1 MiB bands).
LARGE_TABLE_BYTES = 64 << 20
FINE_BAND_BYTES = 256 << 10
# Bands per tensor at most, well inside the slices-per-tensor limit [R-SLICE-004].
_MAX_BANDS = 4096

# Whether the tensor ``key`` (its raw bytes), cut into the bands ``boxes``, is written
# whole, and why: every band changed since the base (False), or none did and the base
# stores it whole (True); None: in bands. The question :func:`banded_items` asks of an
# incremental write's reuse.
WritesWhole = Callable[[str, np.ndarray, list[Box]], bool | None]


def bands(shape: tuple[int, ...], itemsize: int, band_bytes: int | None = None
          ) -> list[Box] | None:
    """Boxes of whole rows (along the first dimension) of about ``band_bytes`` each
    that tile ``shape``; None when the tensor is small enough to stay whole."""
    total = math.prod(shape) * itemsize
    band_bytes = band_bytes_for(total) if band_bytes is None else band_bytes
    if not shape or total <= band_bytes or shape[0] < 2:
        return None
    row_bytes = total // shape[0]
    rows = max(1, band_bytes // max(row_bytes, 1), -(-shape[0] // _MAX_BANDS))
    rest = tuple(shape[1:])
    return [((start,) + (0,) * len(rest), (min(rows, shape[0] - start), *rest))
            for start in range(0, shape[0], rows)]


def band_bytes_for(total: int) -> int:
    """The size of the bands of a tensor of ``total`` bytes (before _MAX_BANDS)."""
    return FINE_BAND_BYTES if total > LARGE_TABLE_BYTES else BAND_BYTES


def banded_items(tensors: Tensors, key: str, value: object, chunk_size: int,
                 writes_whole: WritesWhole) -> Iterator[Item]:
    """The items that store ``value`` under ``key``: whole, or as bands of rows. A
    tensor ``writes_whole`` says so of is one item, stored (when not reused) in chunks
    of a band or a divisor of it (at most ``chunk_size``, the writer's)."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    boxes = bands(tuple(array.shape), array.dtype.itemsize) \
        if array.dtype.kind not in "OUS" else None
    if boxes is None:
        yield tensors.whole(key, array)
        return
    chunk = _band_chunk(boxes[0][1][0] * (array.nbytes // array.shape[0]), chunk_size)
    # Its bytes in memory are its raw bytes (C order, little-endian [R-DATA-005]) here.
    same_as_base = writes_whole(key, array.reshape(-1).view(np.uint8), boxes) \
        if chunk and array.flags.c_contiguous and np.little_endian and array.dtype.isnative \
        else None
    if same_as_base is not None:
        whole = tensors.whole(key, array)
        # On the item, not by key: an item refused by tensors.whole leaves nothing behind.
        whole.chunk_size, whole.same_as_base = chunk, same_as_base
        yield whole
        return
    yield from tensors.slices(key, array, (0,) * array.ndim, array.shape, boxes)


def _band_chunk(band: int, chunk_size: int) -> int:
    """The chunk size of a tensor of bands of ``band`` bytes written whole: the band,
    or the writer's ``chunk_size`` when that is smaller and divides it; 0 when no
    chunk size keeps each band a run of whole chunks at a 64-byte boundary."""
    chunk = min(band, chunk_size)
    # A chunk is also a band's offset step inside the block: a multiple of the alignment
    # keeps each band's block aligned [R-DATA-001].
    if band % chunk or chunk % ALIGNMENT or not MIN_CHUNK_SIZE <= chunk <= MAX_CHUNK_SIZE:
        return 0
    return chunk


def part_of(block: Block, start: int, length: int) -> Block | None:
    """The raw bytes ``[start, start + length)`` of the uncompressed ``block`` as a block
    of their own, with the CRCs of its chunks; None unless they are a run of whole
    chunks of it (the last may be the block's short last chunk)."""
    size = block.raw_chunk_size
    end = start + length
    if length <= 0 or end > block.raw_length or start % size or (
            end % size and end != block.raw_length):
        return None
    first, last = start // size, -(-end // size)
    return Block(block.shard, block.offset + start, length, length, block.compression, False,
                 size if last - first > 1 else 0, block.chunk_crcs[first:last], [])
