"""Encoding a checkpoint index: tensors and their blocks as the index's columns.

The one encoder of the tensor table and the block table (spec/format.md,
"The index"), used by the writer for the tensors it stored and by the merge
of parts for the tensors the parts stored (spec/parts.md). Both describe
their tensors with the types the decoder produces (:class:`TensorInfo`,
:class:`Block`, :class:`Slice`), so what is encoded is what a reader gets
back. Nothing is checked here: callers encode only what they checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Protocol

from ocf.format import dtypes
from ocf.format.index.model import Block, Slice
from ocf.v1 import index_pb2


class TensorRow(Protocol):
    """A tensor to encode: stored whole (``block``) or in slices (``slices``)."""

    @property
    def key(self) -> str: ...

    @property
    def dtype(self) -> dtypes.Dtype: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def block(self) -> Block | None: ...

    @property
    def slices(self) -> Sequence[Slice]: ...


def fill_tables(index: index_pb2.Index, tensors: Iterable[TensorRow]) -> None:
    """Append ``tensors`` in order to the tensor and block tables of ``index``."""
    keys: list[str] = []
    dtype_codes: list[int] = []
    ranks: list[int] = []
    dims: list[int] = []
    slice_counts: list[int] = []
    blocks: list[Block] = []
    starts: list[int] = []
    extents: list[int] = []
    for tensor in tensors:
        keys.append(tensor.key)
        dtype_codes.append(tensor.dtype.code)
        ranks.append(len(tensor.shape))
        dims.extend(tensor.shape)
        slice_counts.append(len(tensor.slices))
        if tensor.block is not None:
            blocks.append(tensor.block)
            continue
        for piece in tensor.slices:
            starts.extend(piece.start)
            extents.extend(piece.extent)
            blocks.append(piece.block)
    table = index.tensors
    table.keys.extend(keys)
    table.dtypes.extend(dtype_codes)  # type: ignore[arg-type]
    table.ranks.extend(ranks)
    table.dims.extend(dims)
    table.slice_counts.extend(slice_counts)
    _fill_blocks(index, blocks)
    index.blocks.slice_starts.extend(starts)
    index.blocks.slice_extents.extend(extents)


def _fill_blocks(index: index_pb2.Index, blocks: list[Block]) -> None:
    columns = index.blocks
    columns.shards.extend(b.shard for b in blocks)
    columns.offsets.extend(b.offset for b in blocks)
    columns.stored_lengths.extend(b.stored_length for b in blocks)
    columns.raw_lengths.extend(b.raw_length for b in blocks)
    columns.codecs.extend(b.compression.value for b in blocks)
    columns.byte_shuffles.extend(b.byte_shuffle for b in blocks)
    columns.chunk_sizes.extend(b.chunk_size for b in blocks)
    columns.chunk_crcs.extend(crc for b in blocks for crc in b.chunk_crcs)
    # zstd blocks: where each chunk starts, then the block's end; none: no starts.
    columns.chunk_stored_lengths.extend(
        end - start for b in blocks for start, end in pairwise(b.chunk_starts))
