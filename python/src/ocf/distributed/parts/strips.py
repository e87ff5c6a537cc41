"""Strips: the tiles and chunk size of a tensor that a resharded load reads least of.

A reader reads whole chunks (each is checksummed), and a chunk is a run of
a slice's bytes in C order: a run of its rows. So a region cut along the
first dimension reads, at each cut, at most a chunk's rows too many of
every slice it meets, and a region cut along another dimension at most a
slice's extent along it too many. A grid of square tiles in large chunks
(each tile one chunk) wastes a tile's height at a row cut and a tile's
width at a column cut: 1.13x for three loaders of a tensor in a 32 x 32
grid. Strips do better with fewer slices: each box of a tensor of rank 2
or more is cut only along the dimensions after the first, into strips the
box's full height, and chunked small, so that the chunk's rows are as fine
a cut of the first dimension as the strip's width is of the others.

The sizes come from the tensor (every writer of it chooses the same):

- its chunk size, :func:`strip_chunk_size`: the power of two that cuts it
  into about :data:`CHUNKS_PER_TENSOR` chunks, from 4 KiB (the smallest the
  format allows [R-CHUNK-001]) up to the writer's ``chunk_size``; the index
  pays 4 bytes per chunk, so at most 16 KiB for a tensor below 256 MiB,
  and no more than the writer's chunk size gives above it;
- its strips, :func:`strip_tile`: with ``n`` chunks, the first dimension
  counts as cut into chunk runs and every dimension is cut into about as many
  parts (``n`` in all), so that a cut anywhere wastes about the same fraction.
  A 1024 x 4096 float32 tensor (16 MiB) gets 4 KiB chunks and 64 strips of
  64 columns: a chunk is 16 rows of a strip.

A box then has a strip per grid column it meets (at most its share of
:data:`~ocf.distributed.parts.tiling.TILE_BUDGET`, as the grid's tiles), and
the format needs nothing new: slices may be any boxes that tile the tensor,
and every block records its own chunk size.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, prod

from ocf.distributed.parts.tiling import even_split, within_budget
from ocf.format.limits import MIN_CHUNK_SIZE
from ocf.format.slicing import Box

#: About how many chunks a tensor is stored in, when its size allows chunks of at
#: least 4 KiB and at most the writer's chunk size.
CHUNKS_PER_TENSOR = 4096


def strip_chunk_size(nbytes: int, largest: int) -> int:
    """The chunk size of a tensor of ``nbytes`` bytes: the smallest power of two that
    cuts it into at most :data:`CHUNKS_PER_TENSOR` chunks, at least 4 KiB and at most
    ``largest`` (the writer's chunk size, at least 4 KiB itself)."""
    wanted = -(-nbytes // CHUNKS_PER_TENSOR)
    size = MIN_CHUNK_SIZE
    while size < wanted and 2 * size <= largest:
        size *= 2
    return size


def strip_tile(shape: Sequence[int], itemsize: int, chunk_size: int) -> tuple[int, ...] | None:
    """The grid cell of the strips of a tensor of ``shape`` stored in chunks of
    ``chunk_size`` bytes: the tensor's full extent along the first dimension (a box
    cuts it at its own edges), about as fine along each other dimension as a chunk's
    rows are along the first. None for a tensor of rank 0 or 1 or without elements."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < 2 or 0 in shape:
        return None
    chunks = max(1, -(-prod(shape) * itemsize // chunk_size))
    counts = even_split(shape, chunks)
    return (shape[0], *(ceil(d / c) for d, c in zip(shape[1:], counts[1:])))


def box_strip(box: Box, shape: Sequence[int], itemsize: int, chunk_size: int
              ) -> tuple[int, ...] | None:
    """The grid cell that cuts ``box`` into strips: :func:`strip_tile`, widened while the
    box has more than its share of the tiles budget; None for no strips."""
    tile = strip_tile(shape, itemsize, chunk_size)
    return None if tile is None else within_budget(box, shape, tile)
