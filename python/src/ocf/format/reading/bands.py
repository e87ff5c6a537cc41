"""Reading a whole tensor stored as bands of rows (spec/format.md, "Slices").

An incremental save (spec/pool.md) stores a large tensor as bands of whole
rows, each an uncompressed block (in the checkpoint's file or a pool object).
Read whole, each band is one contiguous range of the new array's bytes: it
is read straight there, as a tensor stored whole is, the bands of local
files taken in turn by the caller and the worker threads of idle cores, each
chunk checked as it arrives [R-CRC-001], with no copy from a memory map in
between.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ocf.format.index.model import Block, BlockColumns, SliceBoxes, TensorInfo
from ocf.format.reading.blocks import BlockReader, GroupRead


def read_row_bands(reader: BlockReader, columns: BlockColumns, block_of: Callable[[int], Block],
                   info: TensorInfo, boxes: SliceBoxes, out: np.ndarray) -> np.ndarray:
    """Read the slices of ``info`` (``boxes``) that are uncompressed bands of whole rows
    into ``out``, the whole tensor (C-contiguous, of fixed-size elements); the
    numbers of the slices read. ``block_of`` gives a block of the table by number."""
    if out.ndim == 0 or not out.size or not out.flags.c_contiguous:
        return np.empty(0, dtype=np.int64)
    rest = np.asarray(out.shape[1:], dtype=np.int64)
    whole_rows = (boxes.lo[:, 1:] == 0).all(axis=1) & (boxes.hi[:, 1:] == rest).all(axis=1)
    row_bytes = out.nbytes // out.shape[0]
    rows = boxes.hi[:, 0] - boxes.lo[:, 0]
    # A raw length other than the band's bytes is the general path's to report.
    fits = columns.raw_lengths[boxes.blocks].astype(np.int64) == rows * row_bytes
    bands = np.flatnonzero(whole_rows & columns.stores_raw[boxes.blocks] & fits)
    flat = out.reshape(-1).view(np.uint8).data
    targets = []
    for i in bands.tolist():
        block = block_of(int(boxes.blocks[i]))
        start = int(boxes.lo[i, 0]) * row_bytes
        targets.append((block, flat[start:start + block.raw_length]))
    if all(reader.shards[block.shard].mappable for block, _ in targets):
        reader.read_local_blocks(info, targets)  # the bands in turn, on idle cores too
        return bands
    reads: list[GroupRead] = []  # an object's: ranged reads, all at once
    for block, target in targets:
        reads += reader.start_raw_read(info, block, target, batch=True)
    reader.finish_reads(reads)
    return bands

