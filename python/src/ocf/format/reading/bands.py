"""Reading a whole tensor stored as bands of rows (spec/format.md, "Slices").

An incremental save (spec/pool.md) stores a large tensor as bands of whole
rows, each an uncompressed block (in the checkpoint's file or a pool object).
Read whole, each band is one contiguous range of the new array's bytes: it
is read straight there, as a tensor stored whole is, the bands of local
files taken in turn by the caller and the worker threads of idle cores, each
chunk checksummed as it arrives and checked before the array is returned
[R-CRC-001], with no copy from a memory map in between. Bands of one chunk
each (an incremental save's usual ones) are read without a Block object per
band, their checksums compared as one array.
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
    blocks = boxes.blocks[bands]
    if bands.size and (columns.chunk_counts[blocks] == 1).all() and all(
            reader.shards[shard].mappable for shard in np.unique(columns.shards[blocks]).tolist()):
        _read_single_chunks(reader, columns, info, bands, boxes.lo[bands, 0] * row_bytes,
                            blocks, flat)
        return bands
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


def _read_single_chunks(reader: BlockReader, columns: BlockColumns, info: TensorInfo,
                        bands: np.ndarray, starts: np.ndarray, blocks: np.ndarray,
                        flat: memoryview) -> None:
    """Read the slices ``bands`` of ``info``, bands of one chunk each in local files
    (``blocks``), to ``flat`` from byte ``starts``: their places taken from the block
    columns as arrays, their checksums compared at once (the usual bands of an
    incremental save: 1 MiB, or 256 KiB in a table). An error names the slice."""
    lengths = columns.raw_lengths[blocks].tolist()
    reads = [(shard, offset, flat[start:start + length]) for shard, offset, start, length
             in zip(columns.shards[blocks].tolist(), columns.offsets[blocks].tolist(),
                    starts.tolist(), lengths)]
    expected = columns.crcs[columns.crc_start[blocks]].astype(np.int64)
    reader.read_local_chunks(info, reads, expected,
                             lambda at: info.slices[int(bands[at])].block)
