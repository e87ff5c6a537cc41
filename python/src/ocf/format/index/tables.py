"""The tensor and block tables of an index: checks and lazy per-tensor views.

spec/format.md, "Tensor table" and "Block table". The tables are columns,
so they are checked here with array operations over all tensors at once;
that is what keeps opening a checkpoint of 20,000 tensors fast. A
:class:`TensorInfo` is built only when a tensor is asked for.

Every size computation is done so that it cannot overflow: values are
bounded before they are added or multiplied, or compared by division.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import accumulate
from typing import Any, ClassVar, NoReturn

import numpy as np

from ocf.format import dtypes
from ocf.format.codecs.registry import BY_VALUE
from ocf.format.container import ALIGNMENT, PREAMBLE_SIZE
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.index.boxes import BoxFailure, TensorColumns, check_boxes
from ocf.format.index.code_tables import (
    CODEC_DEFINED,
    DTYPE_DEFINED,
    ITEMSIZE,
    MAX_RATIO,
    STORES_RAW,
    defined,
    numpy_dtypes,
)
from ocf.format.index.model import (
    Block,
    BlockColumns,
    PlainChunk,
    Shard,
    Slice,
    SliceBoxes,
    SmallPlain,
    TensorInfo,
)
from ocf.format.limits import (
    MAX_CHUNK_SIZE,
    MAX_CHUNKS_PER_BLOCK,
    MAX_ELEMENTS,
    MAX_FILE_OFFSET,
    MAX_KEY_BYTES,
    MAX_RANK,
    MAX_SLICES_BY_RANK,
    MAX_TENSORS,
    MIN_CHUNK_SIZE,
    nonzero_product,
)
from ocf.v1 import tensor_pb2

_U64 = np.uint64


def _u64(values: object) -> np.ndarray:
    # NumPy copies a protobuf repeated field of numbers at C speed; iterating it
    # (np.fromiter) costs a Python object per value.
    return np.array(values, dtype=_U64)


class Tables(Mapping[str, TensorInfo]):
    """The checked ``TensorTable`` and ``BlockTable`` of one index, joined into a
    mapping from key to TensorInfo.

    One class for both tables, not a ``TensorTable`` and a ``BlockTable``: most
    rules of spec/format.md cross them (slice counts select blocks, blocks name
    their tensor in messages, overlaps are judged per shard across tensors), so
    the two are checked together, column by column, in one pass.
    """

    def __init__(self, tensors: tensor_pb2.TensorTable, blocks: tensor_pb2.BlockTable,
                 shards: tuple[Shard, ...], path: str, *, partial: bool = False,
                 overlaps_later: bool = False) -> None:
        self.path = path
        # The tables of a part index (spec/parts.md): a sliced tensor's boxes are
        # disjoint but may leave gaps that other parts fill [R-PART-001]; a merge may
        # check that they are disjoint later, with every other part's boxes.
        self._partial, self._overlaps_later = partial, overlaps_later
        self._infos: dict[int, TensorInfo] = {}
        self._boxes: dict[int, SliceBoxes] = {}
        self._block_columns: BlockColumns | None = None
        self._column_lists: _ColumnLists | None = None
        self._view_dtypes: list[np.dtype[np.generic] | None] | None = None
        self._check_tensor_columns(tensors)
        self._check_keys()
        self._check_shapes()
        self._check_block_columns(blocks)
        self._check_slices()
        self._check_blocks(shards)
        self._check_chunks()
        self._check_overlaps()

    # -- mapping interface ----------------------------------------------------

    def __getitem__(self, key: str) -> TensorInfo:
        i = self._rows[key]
        info = self._infos.get(i)
        if info is None:
            info = self._infos[i] = self._build(i)
        return info

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    # -- failing --------------------------------------------------------------

    def _fail(self, cls: type[InvalidError] | type[LimitExceededError], message: str,
              requirement: str, row: int | None = None) -> NoReturn:
        key = None if row is None else self._keys[row]
        raise cls(message, path=self.path, key=key, requirement=requirement)

    def _fail_first(self, bad: np.ndarray, cls: type[InvalidError] | type[LimitExceededError],
                    message: str, requirement: str, *, by_block: bool = True) -> None:
        """Fail naming the first tensor where ``bad`` (per block or per tensor) is true."""
        if bad.any():  # the common case, and cheaper than flatnonzero
            first = int(np.flatnonzero(bad)[0])
            self._fail(cls, message, requirement,
                       int(self._block_tensor[first]) if by_block else first)

    # -- tensor table ---------------------------------------------------------

    def _check_tensor_columns(self, t: tensor_pb2.TensorTable) -> None:
        self._keys: list[str] = list(t.keys)
        n = len(self._keys)
        if n > MAX_TENSORS:
            self._fail(LimitExceededError, f"{n} tensors, above the limit of {MAX_TENSORS}",
                       "R-LIMIT-002")
        self._dtypes = np.array(t.dtypes, dtype=np.int64)
        self._ranks = np.array(t.ranks, dtype=np.int64)
        self._slice_counts = np.array(t.slice_counts, dtype=np.int64)
        if not len(self._dtypes) == len(self._ranks) == len(self._slice_counts) == n:
            self._fail(InvalidError, f"tensor table columns differ in length: {n} keys, "
                       f"{len(self._dtypes)} dtypes, {len(self._ranks)} ranks, "
                       f"{len(self._slice_counts)} slice counts", "R-TABLE-001")
        self._dims = _u64(t.dims)
        if int(self._ranks.sum()) != len(self._dims):
            self._fail(InvalidError, f"ranks add up to {int(self._ranks.sum())}, dims holds "
                       f"{len(self._dims)} values", "R-TABLE-001")

    def _check_keys(self) -> None:
        keys = self._keys
        # Whole-list tests first (C loops); the per-key loops only find the culprit.
        lengths = list(map(len, keys))
        if "\0" in "".join(keys) or (lengths and min(lengths) == 0):
            for i, key in enumerate(keys):
                if not key or "\0" in key:
                    self._fail(InvalidError, "tensor key is empty or contains NUL",
                               "R-TENSOR-001", i)
        # A character takes at most 4 bytes in UTF-8: encode only keys that may be long.
        for key in keys if lengths and max(lengths) * 4 > MAX_KEY_BYTES else ():
            if len(key) * 4 > MAX_KEY_BYTES and len(key.encode("utf-8")) > MAX_KEY_BYTES:
                raise LimitExceededError(
                    f"key is {len(key.encode('utf-8'))} bytes, above the limit of "
                    f"{MAX_KEY_BYTES}", path=self.path, key=key[:64] + "...",
                    requirement="R-TENSOR-001")
        self._rows = dict(zip(keys, range(len(keys))))
        if len(self._rows) != len(keys):
            seen: set[str] = set()
            for i, key in enumerate(keys):
                if key in seen:
                    self._fail(InvalidError, "key appears twice", "R-TENSOR-001", i)
                seen.add(key)

    def _check_shapes(self) -> None:
        self._fail_first(~defined(self._dtypes, DTYPE_DEFINED), InvalidError,
                         "dtype value is not defined", "R-TENSOR-002", by_block=False)
        self._fail_first(self._ranks > MAX_RANK, LimitExceededError,
                         f"rank is above the limit of {MAX_RANK}", "R-TENSOR-003",
                         by_block=False)
        self._dim_start = np.cumsum(self._ranks) - self._ranks
        self._counts = self._element_counts()

    def _element_counts(self) -> np.ndarray:
        """Element count of each tensor, after checking the limit on each."""
        counts = np.ones(len(self._keys), dtype=_U64)
        shaped = np.flatnonzero(self._ranks > 0)
        if not shaped.size:
            return counts
        starts = self._dim_start[shaped]
        # Zero dimensions are left out of the limit so it does not depend on
        # their order; a float estimate finds the rows worth an exact check
        # (0.5 under log2(MAX_ELEMENTS) = 58, far more than its rounding error).
        logs = np.log2(np.maximum(self._dims, 1).astype(np.float64))
        for row in shaped[np.add.reduceat(logs, starts) > 57.5].tolist():
            if nonzero_product(self.shape(row)) > MAX_ELEMENTS:
                self._fail(LimitExceededError, f"shape {list(self.shape(row))}: its non-zero "
                           "dimensions multiply to more than 2^58", "R-TENSOR-003", row)
        counts[shaped] = np.multiply.reduceat(self._dims, starts)
        return counts

    def shape(self, row: int) -> tuple[int, ...]:
        start = int(self._dim_start[row])
        return tuple(self._dims[start : start + int(self._ranks[row])].tolist())

    # -- block table ----------------------------------------------------------

    def _check_block_columns(self, b: tensor_pb2.BlockTable) -> None:
        counts = self._slice_counts
        over = counts > np.array(MAX_SLICES_BY_RANK)[self._ranks]  # ranks <= 32 by now
        self._fail_first(over, LimitExceededError, f"more than {MAX_SLICES_BY_RANK[0]} slices "
                         f"({MAX_SLICES_BY_RANK[-1]} above rank 4)", "R-SLICE-004", by_block=False)
        per_tensor = np.maximum(counts, 1)
        self._first_block = np.cumsum(per_tensor) - per_tensor
        self._block_tensor = np.repeat(np.arange(len(self._keys)), per_tensor)
        m = int(per_tensor.sum())
        self._shards = np.array(b.shards, dtype=np.int64)
        self._offsets = _u64(b.offsets)
        self._stored = _u64(b.stored_lengths)
        self._raw = _u64(b.raw_lengths)
        self._codecs = np.array(b.codecs, dtype=np.int64)
        self._shuffles = np.array(b.byte_shuffles, dtype=bool)
        self._chunk_sizes = _u64(b.chunk_sizes)
        lengths = [len(c) for c in (self._shards, self._offsets, self._stored, self._raw,
                                    self._codecs, self._shuffles, self._chunk_sizes)]
        if any(length != m for length in lengths):
            self._fail(InvalidError, f"the tensors need {m} blocks, the block table columns "
                       f"hold {lengths} values", "R-TABLE-002")
        self._crc_array = np.array(b.chunk_crcs, dtype=np.uint32)
        self._chunk_stored = _u64(b.chunk_stored_lengths)
        self._slice_starts = _u64(b.slice_starts)
        self._slice_extents = _u64(b.slice_extents)

    def _check_slices(self) -> None:
        """Check the boxes of sliced tensors; count the elements of every block."""
        self._block_counts = self._counts[self._block_tensor]
        sliced = np.flatnonzero(self._slice_counts > 0)
        box_values = int((self._ranks[sliced] * self._slice_counts[sliced]).sum())
        if not len(self._slice_starts) == len(self._slice_extents) == box_values:
            self._fail(InvalidError, f"sliced tensors need {box_values} slice_starts and "
                       f"slice_extents values, the table holds {len(self._slice_starts)} and "
                       f"{len(self._slice_extents)}", "R-TABLE-002")
        # Where each block's box starts in slice_starts and slice_extents (-1: stored whole).
        self._box_start = np.full(len(self._block_counts), -1, dtype=np.int64)
        if not sliced.size:
            return
        counts = self._slice_counts[sliced]
        checked = check_boxes(self._slice_starts, self._slice_extents, TensorColumns(
            self._ranks[sliced], counts, self._counts[sliced], self._dim_start[sliced],
            self._dims), partial=self._partial, overlaps=not self._overlaps_later)
        if isinstance(checked, BoxFailure):
            self._fail(InvalidError, checked.message, checked.requirement,
                       int(sliced[checked.tensor]))
        # The blocks of the sliced tensors, in table order.
        box_first = np.cumsum(counts) - counts
        blocks = np.repeat(self._first_block[sliced] - box_first, counts) + np.arange(
            int(counts.sum()))
        self._block_counts[blocks] = checked.elements
        self._box_start[blocks] = checked.value_start

    def _check_blocks(self, shards: tuple[Shard, ...]) -> None:
        self._fail_first((self._shards < 0) | (self._shards >= len(shards)), InvalidError,
                         f"block names a shard that does not exist ({len(shards)} listed)",
                         "R-SHARD-001")
        offsets, stored = self._offsets, self._stored
        self._fail_first(offsets % _U64(ALIGNMENT) != 0, InvalidError,
                         f"offset is not a multiple of {ALIGNMENT}", "R-DATA-001")
        region_end = np.array([s.region_end for s in shards], dtype=_U64)[self._shards]
        outside = (offsets < PREAMBLE_SIZE) | (offsets > MAX_FILE_OFFSET) | (
            stored > MAX_FILE_OFFSET)
        outside |= ~outside & (offsets + np.minimum(stored, MAX_FILE_OFFSET) > region_end)
        self._fail_first(outside, InvalidError, "stored bytes lie outside the data region "
                         "of their shard", "R-DATA-002")
        itemsize = ITEMSIZE[self._dtypes[self._block_tensor]].astype(_U64)
        counts, raw = self._block_counts, self._raw
        strings = itemsize == 0
        size = np.where(strings, 1, itemsize)
        wrong = ~strings & ((raw % size != 0) | (raw // size != counts))
        self._fail_first(wrong, InvalidError, "raw length is not element count x item size",
                         "R-TENSOR-005")
        self._fail_first(strings & (raw // _U64(8) < counts), InvalidError,
                         "raw length cannot hold the string length table", "R-DTYPE-003")
        self._fail_first(~defined(self._codecs, CODEC_DEFINED), InvalidError,
                         "codec value is not defined", "R-CHUNK-003")
        plain = STORES_RAW[self._codecs]
        self._fail_first(plain & (self._shuffles | (stored != raw)), InvalidError,
                         "uncompressed data must have stored length equal to raw length and no "
                         "byte shuffle", "R-CHUNK-003")
        self._fail_first(self._shuffles & strings, InvalidError,
                         "byte shuffle needs a fixed-size dtype", "R-CODEC-002")

    def _check_chunks(self) -> None:
        sizes, raw = self._chunk_sizes, self._raw
        bad_size = (sizes != 0) & ((sizes % _U64(64) != 0) | (sizes < MIN_CHUNK_SIZE)
                                   | (sizes > MAX_CHUNK_SIZE))
        self._fail_first(bad_size, InvalidError, "chunk size is not 0 or a multiple of 64 in "
                         f"[{MIN_CHUNK_SIZE}, {MAX_CHUNK_SIZE}]", "R-CHUNK-001")
        divisor = np.where(sizes == 0, np.maximum(raw, 1), sizes)
        chunks = np.where(raw == 0, 0, raw // divisor + (raw % divisor != 0)).astype(np.int64)
        self._fail_first(chunks > MAX_CHUNKS_PER_BLOCK, LimitExceededError,
                         f"more than {MAX_CHUNKS_PER_BLOCK} chunks", "R-LIMIT-002")
        self._chunk_counts = chunks
        self._crc_start = np.cumsum(chunks) - chunks
        if int(chunks.sum()) != self._crc_array.size:
            self._fail(InvalidError, f"the blocks have {int(chunks.sum())} chunks, "
                       f"chunk_crcs holds {self._crc_array.size} values", "R-CHUNK-002")
        coded = ~STORES_RAW[self._codecs]  # blocks owning chunk_stored_lengths (zstd)
        coded_chunks = np.where(coded, chunks, 0)
        self._stored_start = np.cumsum(coded_chunks) - coded_chunks
        if int(coded_chunks.sum()) != len(self._chunk_stored):
            self._fail(InvalidError, f"the zstd blocks have {int(coded_chunks.sum())} chunks, "
                       f"chunk_stored_lengths holds {len(self._chunk_stored)} values",
                       "R-CHUNK-004")
        self._fail_first(coded & (chunks == 0) & (self._stored != 0), InvalidError,
                         "a zstd block without chunks must store no bytes", "R-CHUNK-004")
        self._check_coded_chunks(np.flatnonzero(coded_chunks))

    def _check_coded_chunks(self, blocks: np.ndarray) -> None:
        """Stored chunk lengths: at least 1, summing to the block, within zstd's ratio."""
        if not blocks.size:
            return
        lengths = self._chunk_stored
        chunks = self._chunk_counts[blocks]
        starts = self._stored_start[blocks]
        owner = np.repeat(blocks, chunks)
        bad = np.zeros(len(self._raw), dtype=bool)
        bad[blocks[self._stored_sums(blocks, chunks, starts) != self._stored[blocks]]] = True
        bad[owner[lengths < 1]] = True
        self._fail_first(bad, InvalidError, "zstd chunk stored lengths must each be at least "
                         "1 and add up to the stored length", "R-CHUNK-004")
        # Raw length of every zstd chunk: chunk_size, except the last of each block.
        position = np.arange(len(lengths)) - np.repeat(starts, chunks)
        size = np.where(self._chunk_sizes[owner] == 0, self._raw[owner],
                        self._chunk_sizes[owner])
        last = position == np.repeat(chunks, chunks) - 1
        raw_chunk = np.where(last, self._raw[owner] - size * position.astype(_U64), size)
        # Lengths above 2^40 allow any raw chunk (at most 2^54 bytes) anyway.
        hits = np.flatnonzero(raw_chunk > np.minimum(lengths, _U64(1 << 40))
                              * MAX_RATIO[self._codecs[owner]])
        if hits.size:
            codec = BY_VALUE[int(self._codecs[owner[hits[0]]])]
            self._fail(LimitExceededError, f"a {codec.name} chunk claims more than "
                       f"{codec.max_ratio} raw bytes per stored byte, more than {codec.name} "
                       "can produce", "R-CHUNK-004", int(self._block_tensor[owner[hits[0]]]))

    def _stored_sums(self, blocks: np.ndarray, chunks: np.ndarray, starts: np.ndarray
                     ) -> np.ndarray:
        """Sum of each zstd block's chunk stored lengths, exactly (as Python ints when the
        lengths are so large that 64-bit sums could overflow)."""
        lengths = self._chunk_stored
        if lengths.size and int(lengths.max()) < (1 << 39):  # 2^24 chunks x 2^39 < 2^64
            return np.add.reduceat(lengths, starts)
        values = lengths.tolist()
        return np.array([sum(values[a : a + n]) for a, n in zip(starts.tolist(),
                                                                chunks.tolist())], dtype=object)

    def _check_overlaps(self) -> None:
        used = np.flatnonzero(self._stored > 0)
        order = used[np.lexsort((self._offsets[used], self._shards[used]))]
        if order.size < 2:
            return
        ends = self._offsets[order] + self._stored[order]
        same_shard = self._shards[order[1:]] == self._shards[order[:-1]]
        clash = np.flatnonzero(same_shard & (ends[:-1] > self._offsets[order[1:]]))
        if clash.size:
            a, b = order[clash[0]], order[clash[0] + 1]
            self._fail(InvalidError, f"stored bytes overlap those of tensor "
                       f"{self._keys[int(self._block_tensor[a])]!r}", "R-DATA-003",
                       int(self._block_tensor[b]))

    # -- building views -------------------------------------------------------

    def _lists(self) -> _ColumnLists:  # lists index faster than arrays, a value at a time
        if self._column_lists is None:
            self._column_lists = _ColumnLists(self)
        return self._column_lists

    def _build(self, row: int) -> TensorInfo:
        c = self._lists()
        dtype = dtypes.BY_CODE[c.dtypes[row]]
        shape = tuple(c.dims[c.dim_start[row] : c.dim_start[row] + c.ranks[row]])
        first = c.first_block[row]
        count = c.slice_counts[row]
        if count == 0:
            return TensorInfo(self._keys[row], dtype, shape, self._block(c, first), ())
        return TensorInfo(self._keys[row], dtype, shape, None,
                          lambda: self._slices(c, first, count, len(shape)))

    def _slices(self, c: _ColumnLists, first: int, count: int, rank: int
                ) -> tuple[Slice, ...]:
        """The Slice objects of blocks ``first`` to ``first + count`` (boxes of ``rank``)."""
        return tuple(Slice(tuple(c.slice_starts[at : at + rank]), tuple(
            c.slice_extents[at : at + rank]), self._block(c, j)) for j, at in zip(
                range(first, first + count), c.box_start[first : first + count]))

    def slice_boxes(self, key: str) -> SliceBoxes | None:
        """The slices of ``key`` as arrays, a row per slice in table order (no object per
        slice); None for a tensor stored whole. KeyError when there is no such key."""
        row = self._rows[key]
        count = int(self._slice_counts[row])
        if count == 0:
            return None
        boxes = self._boxes.get(row)
        if boxes is None:  # values below 2^58 once checked
            rank, first = int(self._ranks[row]), int(self._first_block[row])
            at = slice(int(self._box_start[first]), int(self._box_start[first]) + count * rank)
            lo = self._slice_starts[at].reshape(count, rank).astype(np.int64)
            hi = lo + self._slice_extents[at].reshape(count, rank).astype(np.int64)
            boxes = self._boxes[row] = SliceBoxes(lo, hi, np.arange(first, first + count))
        return boxes

    @property
    def block_columns(self) -> BlockColumns:
        """The checked block table as arrays, a row per block; read-only by convention."""
        if self._block_columns is None:
            self._block_columns = BlockColumns(
                self._shards, self._offsets, self._raw, STORES_RAW[self._codecs],
                self._chunk_sizes, self._chunk_counts, self._crc_start, self._crc_array)
        return self._block_columns

    def block(self, j: int) -> Block:
        """Block ``j`` of the block table (a row of :attr:`block_columns`)."""
        return self._block(self._lists(), j)

    def plain_chunk(self, key: str) -> PlainChunk | None:
        """Where the bytes of ``key`` lie when it is stored whole, uncompressed, in one
        chunk of at least one byte, with a fixed-size dtype other than bool; else None.

        The per-key read of a small tensor: a handful of list lookups, no
        TensorInfo or Block built. KeyError when there is no such key.
        """
        row = self._rows[key]
        c = self._lists()
        j = c.first_block[row]
        if c.slice_counts[row] or not STORES_RAW[c.codecs[j]] or c.chunk_counts[j] != 1:
            return None
        if self._view_dtypes is None:  # made on first use: it may load ml_dtypes
            # None where reading needs more than a view: byte strings and bools.
            self._view_dtypes = [None if d is None or d.kind == "b" else d
                                 for d in numpy_dtypes(self._dtypes)]
        numpy_dtype = self._view_dtypes[row]
        if numpy_dtype is None:
            return None
        at = c.dim_start[row]
        return PlainChunk(c.shards[j], c.offsets[j], c.raw[j], c.crcs[c.crc_start[j]],
                          numpy_dtype, tuple(c.dims[at : at + c.ranks[row]]))

    def split_small_plain(self, keys: list[str], max_bytes: int
                          ) -> tuple[SmallPlain, list[str]]:
        """Split ``keys`` into small tensors read in batches and all others.

        Small means stored whole, uncompressed, in one chunk of 1 to
        ``max_bytes`` bytes, with a fixed-size dtype. They are described
        column-wise, sorted by (shard, offset), without building TensorInfos.
        """
        rows = np.fromiter(map(self._rows.__getitem__, keys), dtype=np.int64, count=len(keys))
        blocks = self._first_block[rows]
        raw = self._raw[blocks]
        small = ((self._slice_counts[rows] == 0) & STORES_RAW[self._codecs[blocks]]
                 & (raw > 0) & (raw <= max_bytes) & (ITEMSIZE[self._dtypes[rows]] > 0)
                 & (self._chunk_counts[blocks] == 1))
        others = [keys[i] for i in np.flatnonzero(~small).tolist()]
        rows, blocks = rows[small], blocks[small]
        order = np.lexsort((self._offsets[blocks], self._shards[blocks]))
        rows, blocks = rows[order], blocks[order]
        return SmallPlain(
            keys=[self._keys[r] for r in rows.tolist()],
            shards=self._shards[blocks].tolist(),
            offsets=self._offsets[blocks].tolist(),
            raw_lengths=self._raw[blocks].tolist(),
            crcs=self._crc_array[self._crc_start[blocks]].tolist(),
            dtypes=numpy_dtypes(self._dtypes[rows]),
            shapes=self._shapes(rows),
        ), others

    def _shapes(self, rows: np.ndarray) -> list[tuple[int, ...]]:
        """The shapes of tensors ``rows``; by one gather when they share a rank."""
        ranks = self._ranks[rows]
        if ranks.size and (ranks == ranks[0]).all():
            dims = self._dims[self._dim_start[rows][:, None] + np.arange(ranks[0])]
            return list(map(tuple, dims.tolist()))
        c = self._lists()
        return [tuple(c.dims[c.dim_start[r] : c.dim_start[r] + c.ranks[r]])
                for r in rows.tolist()]

    def _block(self, c: _ColumnLists, j: int) -> Block:
        compression = BY_VALUE[c.codecs[j]]
        offset = c.offsets[j]
        crc_at = c.crc_start[j]
        chunks = c.chunk_counts[j]
        starts: list[int] = []
        if not compression.stores_raw:
            at = c.stored_start[j]
            starts = list(accumulate(c.chunk_stored[at : at + chunks], initial=offset))
        return Block(c.shards[j], offset, c.stored[j], c.raw[j], compression, c.shuffles[j],
                     c.chunk_sizes[j], c.crcs[crc_at : crc_at + chunks], starts)


class _ColumnLists:
    """The checked columns of a Tables as Python lists of Python ints, each made on first
    use: a load of a few tensors stored in thousands of chunks needs their rows of the
    tensor table, not the CRC of every chunk as a list."""

    # The column of Tables each list is made of, by the list's name.
    _COLUMNS: ClassVar[dict[str, str]] = {
        **{name: f"_{name}" for name in (
            "dtypes", "ranks", "dims", "dim_start", "slice_counts", "first_block", "shards",
            "offsets", "stored", "raw", "codecs", "shuffles", "chunk_sizes", "crc_start",
            "chunk_counts", "stored_start", "chunk_stored", "slice_starts", "slice_extents",
            "box_start")},
        "crcs": "_crc_array"}

    def __init__(self, tables: Tables) -> None:
        self._tables = tables

    def __getattr__(self, name: str) -> list[Any]:  # a column not made yet
        column = self._COLUMNS.get(name)
        if column is None:
            raise AttributeError(name)
        values: list[Any] = getattr(self._tables, column).tolist()
        setattr(self, name, values)
        return values
