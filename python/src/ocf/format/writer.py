"""Streaming checkpoint writer (spec/format.md, spec/commit.md).

Tensor bytes go from the arrays straight to the file: no buffer of the
whole checkpoint is ever built. Each tensor starts on a 64-byte boundary
[R-DATA-001]; chunks are checksummed, and compressed on worker threads
when zstd is chosen. The index is written last, and the checkpoint is
published atomically on :meth:`Writer.commit` [R-COMMIT-001]
[R-COMMIT-002]; a crash or an exception before that leaves nothing at the
target but what was there before.
"""

from __future__ import annotations

import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

import numpy as np

from ocf._version import __version__
from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.codecs.base import Codec
from ocf.format.codecs.registry import codec_named
from ocf.format.commit import (
    leftover_names,
    new_write_id,
    shard_file_name,
    temp_names_of,
)
from ocf.format.container import (
    ALIGNMENT,
    FOOTER_SIZE,
    INDEX_FILE_NAME,
    PREAMBLE_SIZE,
    Footer,
    padding,
)
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.index.encoding import TableBuilder
from ocf.format.index.model import Block
from ocf.format.limits import (
    MAX_CHUNK_SIZE,
    MAX_ELEMENTS,
    MAX_INDEX_BYTES,
    MAX_KEY_BYTES,
    MAX_RANK,
    MIN_CHUNK_SIZE,
    nonzero_product,
)
from ocf.format.metadata import encode_map
from ocf.format.object_graph import Node, decode_graph, encode_graph
from ocf.format.raw import to_raw
from ocf.format.slicing import Box, boxes_disjoint, boxes_tile
from ocf.format.storage.backend import Layout, Output, backend_of
from ocf.format.storage.location import Location, StorageOptions, locate
from ocf.v1 import index_pb2

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_SHARD_SIZE = 4 << 30
# zstd level of writers that choose none. Level 1, not zstd's own default of 3:
# on checkpoint weights (float32 rounded to bf16, byte-shuffled) level 3 costs
# 2.5x the CPU of level 1 (5.0-6.6 against 1.9-2.4 s/GiB on the benchmark
# machine) and stores more (0.354 of the raw bytes against 0.342): the
# compressible bytes are the exponents, which level 1 already finds.
DEFAULT_COMPRESSION_LEVEL = 1
# Tensors at least this large are checksummed on a worker thread while the
# main thread writes them.
_PARALLEL_CRC = 4 << 20
# write_many and write_slices gather small blocks up to about this many bytes
# and write them together: few system calls, and memory stays bounded.
_BATCH_BYTES = 4 << 20
_ZEROS = memoryview(bytes(ALIGNMENT))
# The NumPy dtypes whose arrays are their own raw bytes when C-ordered (the
# little-endian machines' native types; ml_dtypes types export no buffer).
_VIEWABLE: dict[np.dtype[np.generic], dtypes.Dtype] = {
    np.dtype(row.kind): row for row in dtypes.TABLE
    if isinstance(row.kind, type) and sys.byteorder == "little"}


class _Gathered:
    """Small tensors gathered by write_many, to be written together: the rows they
    will have in the tensor table, from ``first_row`` on, and their bytes."""

    def __init__(self, first_row: int) -> None:
        self.first_row = first_row
        self.keys: list[str] = []
        self.codes: list[int] = []
        self.shapes: list[tuple[int, ...]] = []
        self.raws: list[memoryview] = []
        self.sizes: list[int] = []
        self.bytes = 0

    def add(self, key: str, code: int, shape: tuple[int, ...], raw: memoryview,
            size: int) -> int:
        """Gather one tensor; the row it will have."""
        self.keys.append(key)
        self.codes.append(code)
        self.shapes.append(shape)
        self.raws.append(raw)
        self.sizes.append(size)
        self.bytes += size
        return self.first_row + len(self.keys) - 1


class Writer:
    """Writes one checkpoint; use as a context manager, or call commit()/abort().

    ``layout="file"`` writes one self-contained file (conventionally
    ``.ocf``); ``layout="directory"`` writes a directory with ``index.ocf``
    and data shards of at most ``max_shard_size`` bytes each (a tensor
    larger than that gets a shard of its own).

    Extension points, public and stable (``ocf.distributed.parts.PartWriter`` writes a
    part index of a multi-writer save with them, spec/parts.md): the class
    attribute :attr:`slices_must_tile`, the property :attr:`index_name` and
    the method :meth:`finish_index`.

    Examples:
        >>> with ocf.Writer("model.ocf", compression="zstd", metadata={"epoch": 3}) as writer:
        ...     writer.write("dense/kernel", np.ones((256, 128), np.float32))
        ...     writer.write("step", np.array(10))
        ... # committed (atomically) when the block ends without an error
    """

    #: Whether commit requires the slices of each tensor written with
    #: :meth:`write_slice` to tile its global shape exactly [R-SLICE-002].
    #: When False they need only be pairwise disjoint [R-SLICE-001]: a part
    #: of a multi-writer save holds some of the boxes (spec/parts.md, [R-PART-001]).
    slices_must_tile: bool = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        layout: Layout = "file",
        compression: str | None = None,
        compression_level: int = DEFAULT_COMPRESSION_LEVEL,
        byte_shuffle: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
        metadata: Mapping[str, object] | None = None,
        threads: int | None = None,
        write_id: str | None = None,
        storage_options: StorageOptions | None = None,
    ) -> None:
        # A URL (s3://...) names an object store: its files are uploaded under
        # their final names, and completing the index upload commits [R-COMMIT-005].
        self.target: Location = locate(path, storage_options)
        self._storage = backend_of(self.target)
        self.layout = layout
        self.compression = codec_named(compression)
        self._plain = self.compression.stores_raw  # tested once per tensor
        self.level = compression_level
        self.byte_shuffle = byte_shuffle and not self.compression.stores_raw
        if chunk_size % 64 or not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise InvalidError(f"chunk_size {chunk_size} must be a multiple of 64 in "
                               f"[{MIN_CHUNK_SIZE}, {MAX_CHUNK_SIZE}]", requirement="R-CHUNK-001")
        self.chunk_size = chunk_size
        self.max_shard_size = max_shard_size
        # Names this write's temporary files and shards; fixed only by tools that
        # must produce identical bytes on every run (conformance generators).
        self.write_id = write_id or new_write_id()
        self._index = index_pb2.Index()
        self._index.header.writer = f"ocf-python {__version__}"
        if metadata:
            encode_map(metadata, self._index.metadata)
        # The tensor and block tables, as columns; each key's row in them; the
        # boxes of the tensors stored in slices, by row.
        self._table = TableBuilder()
        self._rows: dict[str, int] = {}
        self._boxes: dict[int, list[Box]] = {}
        self._graph: list[Node] | None = None
        self._threads = threads or min(4, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(max_workers=self._threads)
        self._files: list[Output] = []
        self._created_directory = False
        self._closed = False
        self._prepare_target()

    # -- public API -----------------------------------------------------------

    def write(self, key: str, array: np.ndarray) -> None:
        """Store ``array`` whole under ``key``; its bytes are written now."""
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        dtype = dtypes.for_array(array)
        if array.size == 0 or array.ndim > MAX_RANK:
            # An array with elements has fewer than 2^58 of them, or could not be
            # laid out in memory: only empty ones can break the limit.
            _check_shape(key, array.shape)
        raw = to_raw(array, dtype)
        self._claim_key(key)
        block = self._store(raw, dtype)
        self._table.add_block(self._add_row(key, dtype, array.shape), block)

    def write_many(
        self, tensors: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]]
    ) -> None:
        """Store each array whole under its key, in order, as :meth:`write` would.

        The file is the same, byte for byte, as one :meth:`write` per tensor,
        and so are the errors, raised at the same tensor (the tensors before
        it are written). The difference is the cost: small uncompressed
        tensors (non-empty, at most ``chunk_size`` bytes) are gathered a few
        MiB at a time and written together, their offsets computed at once
        and their index rows added as columns, so a checkpoint of many small
        tensors costs a fraction of a :meth:`write` call each. Other tensors
        are written as they come. A mapping's values are read one at a time,
        in order (a lazy mapping converts each when it is reached).

        Examples:
            >>> biases = {f"layer{i}/bias": np.zeros(256, np.float32) for i in range(1000)}
            >>> with ocf.Writer("model.ocf") as writer:
            ...     writer.write_many(biases)
            ...     writer.write_many([("step", np.array(10))])
        """
        pairs = tensors.items() if isinstance(tensors, Mapping) else tensors
        # Tensors whose bytes are viewed as they are: a NumPy dtype of the table, C order.
        viewable = _VIEWABLE if self._plain else {}
        limit = self.chunk_size
        claimed = self._rows
        gathered = _Gathered(len(self._table))
        try:
            for key, value in pairs:
                array = value if type(value) is np.ndarray else np.asarray(value)
                dtype = viewable.get(array.dtype)
                size = array.nbytes
                if (dtype is not None and 0 < size <= limit and array.ndim <= MAX_RANK
                        and array.flags.c_contiguous):
                    raw = array.data
                else:
                    small = self._small_raw(array)
                    if small is None:  # written alone, after those gathered before it
                        self._write_gathered(gathered)
                        gathered = _Gathered(len(self._table))
                        self.write(key, array)
                        continue
                    dtype, raw = small
                if not (type(key) is str and key.isascii() and 0 < len(key) <= MAX_KEY_BYTES
                        and "\0" not in key) or key in claimed:
                    self._claim_key(key)  # raises, unless a valid key that is not ASCII
                claimed[key] = gathered.add(key, dtype.code, array.shape, raw, size)
                if gathered.bytes >= _BATCH_BYTES:
                    self._write_gathered(gathered)
                    gathered = _Gathered(len(self._table))
        finally:
            # Also after an error: the tensors before it are written, as by write().
            self._write_gathered(gathered)

    def write_slice(
        self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int]
    ) -> None:
        """Store ``array`` as the box at ``start`` of the tensor ``key`` of global ``shape``.

        Several calls build one tensor; at commit its boxes must tile the
        global shape exactly [R-SLICE-002].
        """
        self._write_slice(key, array, start, shape)

    def write_slices(self, key: str, array: np.ndarray, start: Sequence[int],
                     shape: Sequence[int], boxes: Sequence[Box]) -> None:
        """Store the box ``array`` at ``start`` of the tensor ``key`` of global ``shape``
        as several slices: ``boxes``, each (start, extent) in global coordinates and
        inside the box.

        The same file as one :meth:`write_slice` of each part of ``array``, in
        order, and the same errors; uncompressed parts of at most
        ``chunk_size`` bytes are copied side by side into a buffer of a few MiB
        and written together. The boxes need not cover the box, nor be
        disjoint: that is checked at commit, as for :meth:`write_slice`.
        ``ocf.distributed.parts.PartWriter`` stores its tiles with it.

        Examples:
            >>> table = np.arange(64.0).reshape(8, 8)
            >>> with ocf.Writer("table.ocf") as writer:  # the two halves of the rows
            ...     writer.write_slices("table", table, (0, 0), (8, 8),
            ...                         [((0, 0), (4, 8)), ((4, 0), (4, 8))])
        """
        array = np.asarray(array)
        if not len(boxes):
            return
        origin, starts, extents = _boxes_inside(key, array, start, boxes)
        dtype = self._gathering_dtype(key, array, shape, starts, extents)
        if dtype is None:  # one slice at a time, raising what write_slice raises
            for box_start, extent in zip(starts.tolist(), extents.tolist()):
                window = tuple(slice(b - o, b - o + e)
                               for b, o, e in zip(box_start, origin.tolist(), extent))
                self._write_slice(key, array[window], box_start, shape)
            return
        row = self._rows.get(key)
        if row is None:
            self._claim_key(key)
            row = self._add_row(key, dtype, tuple(int(x) for x in shape), sliced=True)
            self._boxes[row] = []
        self._boxes[row].extend(zip(map(tuple, starts.tolist()), map(tuple, extents.tolist())))
        self._gather(row, array, dtype, starts, starts - origin, extents)

    def set_metadata(self, metadata: Mapping[str, object]) -> None:
        """Replace the checkpoint's metadata (given to the constructor, if any) before
        :meth:`commit`: for writers that learn it only after writing the tensors."""
        self._index.ClearField("metadata")
        encode_map(metadata, self._index.metadata)

    def set_object_graph(self, nodes: Sequence[Node]) -> None:
        """Make this an object-based checkpoint with the object graph ``nodes``.

        Node 0 is the root. Attribute keys must name tensors written to this
        checkpoint; the graph is checked like a reader would before commit.
        """
        self._graph = list(nodes)

    @property
    def index_name(self) -> str:
        """The name under which the directory form publishes its index.

        ``index.ocf``: publishing it commits the checkpoint, after which the
        shards and temporary files it does not reference are deleted
        [R-COMMIT-004]. Under any other name (a part index, spec/parts.md) the
        index is written and published by the same steps, and nothing is
        deleted.
        """
        return INDEX_FILE_NAME

    def finish_index(self, index: index_pb2.Index) -> None:
        """Called by :meth:`commit` with the index message (``ocf.v1.index_pb2.Index``)
        once its tables, metadata and object graph are filled, before it is
        serialized; its shards are listed after this call. The default does
        nothing; a subclass may set more fields (a part's ``Index.part``)."""

    def commit(self) -> None:
        """Write the index and publish the checkpoint atomically."""
        if self._closed:
            raise InvalidError("writer is already closed", path=self.target)
        try:
            self._fill_tables()
            if self._graph is not None:
                encode_graph(self._graph, self._index.object_graph)
                decode_graph(self._index.object_graph, self._rows, str(self.target))
            self.finish_index(self._index)
            if self.layout == "file":
                self._commit_file()
            else:
                self._commit_directory()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._pool.shutdown()

    def abort(self) -> None:
        """Drop everything written so far; the target is left as it was."""
        for output in self._files:
            output.discard()
        self._files.clear()
        if self._created_directory:
            self._storage.remove_created_directory(self.target)
        self._closed = True
        self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        elif not self._closed:
            self.abort()

    # -- batches of small blocks ------------------------------------------------

    def _add_row(self, key: str, dtype: dtypes.Dtype, shape: tuple[int, ...],
                 sliced: bool = False) -> int:
        """Give the claimed ``key`` its row in the tensor table."""
        row = self._rows[key] = self._table.add_tensor(key, dtype.code, shape, sliced)
        return row

    def _small_raw(self, array: np.ndarray) -> tuple[dtypes.Dtype, memoryview] | None:
        """The dtype and raw bytes of ``array`` if write_many gathers it (uncompressed,
        non-empty, at most one chunk, a fixed-size dtype); None if write() stores it."""
        if not self._plain:
            return None
        dtype = dtypes.for_array(array)
        if dtype.kind is None or array.ndim > MAX_RANK or not 0 < array.nbytes <= self.chunk_size:
            return None
        return dtype, to_raw(array, dtype)

    def _write_gathered(self, gathered: _Gathered) -> None:
        """Give the gathered tensors their rows, then write their bytes."""
        first = self._table.add_tensors(gathered.keys, gathered.codes, gathered.shapes)
        self._write_small(range(first, first + len(gathered.keys)), gathered.raws,
                          gathered.sizes)

    def _dtype_of(self, row: int) -> dtypes.Dtype:
        return dtypes.BY_CODE[self._table.dtype_codes[row]]

    def _write_slice(self, key: str, array: np.ndarray, start: Sequence[int],
                     shape: Sequence[int]) -> None:
        """:meth:`write_slice` itself, which a subclass may override (PartWriter)."""
        array = np.asarray(array)
        dtype = dtypes.for_array(array)
        start, shape = tuple(int(x) for x in start), tuple(int(x) for x in shape)
        row = self._rows.get(key)
        if row is not None and (row not in self._boxes or self._dtype_of(row) != dtype
                                or self._table.shapes[row] != shape):
            whole = row not in self._boxes
            raise InvalidError(f"slice has dtype {dtype.name} and global shape {list(shape)}, "
                               f"the tensor written before under this key "
                               f"{self._dtype_of(row).name} and "
                               f"{list(self._table.shapes[row])}{' stored whole' if whole else ''}",
                               key=key, requirement="R-SLICE-001")
        if len(start) != len(shape) or array.ndim != len(shape) or array.size == 0 or any(
            b < 0 or b + e > d for b, e, d in zip(start, array.shape, shape)
        ):
            raise InvalidError(f"slice of shape {list(array.shape)} at {list(start)} is not a "
                               f"non-empty box inside {list(shape)}", key=key,
                               requirement="R-SLICE-001")
        _check_shape(key, shape)
        raw = to_raw(array, dtype)
        if row is None:
            self._claim_key(key)
            row = self._add_row(key, dtype, shape, sliced=True)
            self._boxes[row] = []
        block = self._store(raw, dtype)
        self._boxes[row].append((start, array.shape))
        self._table.add_block(row, block, (start, array.shape))

    def _gathering_dtype(self, key: str, array: np.ndarray, shape: Sequence[int],
                         starts: np.ndarray, extents: np.ndarray) -> dtypes.Dtype | None:
        """The dtype of ``array`` when :meth:`write_slices` may copy its boxes side by
        side: each a valid, non-empty slice of ``shape`` of at most one uncompressed
        chunk, of a tensor that takes slices of this dtype and shape. None when
        anything is off (write_slice then says what)."""
        dtype = dtypes.for_array(array)
        try:
            bounds = np.asarray(shape, np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            return None
        if not (self._plain and dtype.itemsize and bounds.size == array.ndim <= MAX_RANK):
            return None
        global_shape = tuple(bounds.tolist())
        row = self._rows.get(key)
        if row is not None and (row not in self._boxes or self._dtype_of(row) != dtype
                                or self._table.shapes[row] != global_shape):
            return None
        if ((starts < 0).any() or (extents <= 0).any() or (starts + extents > bounds).any()
                or nonzero_product(global_shape) > MAX_ELEMENTS
                or int(extents.prod(axis=1).max()) * dtype.itemsize > self.chunk_size):
            return None
        return dtype

    def _gather(self, row: int, array: np.ndarray, dtype: dtypes.Dtype, starts: np.ndarray,
                offsets: np.ndarray, extents: np.ndarray) -> None:
        """Write the boxes of the tensor at ``row`` (``starts`` in the tensor, ``offsets``
        in ``array``, ``extents``): copied side by side, in C order each, into buffers
        of a few MiB, and written as small blocks."""
        numpy_dtype = dtype.numpy
        assert numpy_dtype is not None
        sizes = extents.prod(axis=1)
        ends = np.cumsum(sizes) * dtype.itemsize
        first, count = 0, len(sizes)
        while first < count:
            done = int(ends[first - 1]) if first else 0
            last = max(first + 1, int(np.searchsorted(ends, done + _BATCH_BYTES, side="right")))
            buffer = np.empty(int(sizes[first:last].sum()), numpy_dtype)
            raw = buffer.view(np.uint8).data
            raws = []
            position = 0
            for offset, extent, size in zip(offsets[first:last].tolist(),
                                            extents[first:last].tolist(),
                                            sizes[first:last].tolist()):
                window = tuple(slice(o, o + e) for o, e in zip(offset, extent))
                buffer[position:position + size].reshape(extent)[...] = array[window]
                raws.append(raw[position * dtype.itemsize:(position + size) * dtype.itemsize])
                position += size
            self._write_small([row] * (last - first), raws,
                              (sizes[first:last] * dtype.itemsize).tolist(),
                              (starts[first:last], extents[first:last]))
            first = last

    def _write_small(self, rows: Sequence[int], raws: list[memoryview], byte_sizes: list[int],
                     boxes: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Write ``raws`` as the next blocks, of the tensors at ``rows`` (of the slices
        ``boxes``, starts and extents, if given): each non-empty, uncompressed and at
        most one chunk. The bytes, offsets and shards are those of one _store each."""
        if not raws:
            return
        sizes = np.asarray(byte_sizes, np.int64)
        crcs = list(map(crc32c, raws))
        padded = (sizes + (ALIGNMENT - 1)) // ALIGNMENT * ALIGNMENT
        first = 0
        while first < len(raws):
            output = self._output_for(int(sizes[first]))
            shard = len(self._files) - 1 if self.layout == "directory" else 0
            output.align()
            # Each block starts at the next 64-byte boundary after the one before.
            offsets = output.position + np.cumsum(padded[first:]) - padded[first:]
            last = len(raws)
            if self.layout == "directory":  # the blocks that fit in this shard, one at least
                fits = np.searchsorted(offsets + sizes[first:], self.max_shard_size, "right")
                last = first + max(1, int(fits))
            output.write_many(_padded(raws[first:last], sizes[first:last], padded[first:last]))
            self._table.add_plain_blocks(
                rows[first:last], shard, offsets[:last - first].tolist(),
                sizes[first:last].tolist(), crcs[first:last],
                None if boxes is None else (boxes[0][first:last].reshape(-1).tolist(),
                                            boxes[1][first:last].reshape(-1).tolist(),
                                            boxes[0].shape[1]))
            first = last

    # -- storing blocks -------------------------------------------------------

    def _claim_key(self, key: str) -> None:
        if not isinstance(key, str) or not key or "\0" in key:
            raise InvalidError("tensor keys must be non-empty str without NUL", key=repr(key),
                               requirement="R-TENSOR-001")
        try:  # an ASCII key is its own UTF-8; others may hold a lone surrogate
            size = len(key) if key.isascii() else len(key.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidError(f"key is not valid Unicode ({exc.reason} at character "
                               f"{exc.start}); keys are UTF-8", key=key,
                               requirement="R-TENSOR-001") from None
        if size > MAX_KEY_BYTES:
            raise LimitExceededError(f"key is {size} bytes, above the limit of "
                                     f"{MAX_KEY_BYTES}", requirement="R-TENSOR-001")
        if key in self._rows:
            raise InvalidError("key written twice", key=key, requirement="R-TENSOR-001")

    def _store(self, raw: memoryview, dtype: dtypes.Dtype) -> Block:
        """Write ``raw`` as the next block."""
        size = len(raw)
        output = self._output_for(size)
        output.align()
        shard = len(self._files) - 1 if self.layout == "directory" else 0
        offset = output.position
        if self._plain and 0 < size <= self.chunk_size:
            # The common case of many small tensors, kept short: one chunk.
            crc = crc32c(raw)
            output.write(raw)
            return Block(shard, offset, size, size, self.compression, False, 0, [crc], [])
        chunk_size = self.chunk_size if size > self.chunk_size else 0
        ranges = [(0, size)] if not chunk_size else [
            (s, min(s + chunk_size, size)) for s in range(0, size, chunk_size)]
        if not size:
            return Block(shard, offset, 0, 0, self.compression, False, 0, [], [])
        if self._plain:
            crcs = self._write_plain(output, raw, ranges)
            return Block(shard, offset, size, size, self.compression, False, chunk_size,
                         crcs, [])
        shuffle = self.byte_shuffle and dtype.itemsize > 1
        crcs, starts = [], [offset]
        for stored, crc in self._encoded(raw, ranges, dtype.itemsize if shuffle else 1):
            crcs.append(crc)
            starts.append(starts[-1] + len(stored))
            output.write(stored)
        return Block(shard, offset, starts[-1] - offset, size, self.compression, shuffle,
                     chunk_size, crcs, starts)

    def _write_plain(
        self, output: Output, raw: memoryview, ranges: list[tuple[int, int]]
    ) -> list[int]:
        def checksums() -> list[int]:
            return [crc32c(raw[a:b]) for a, b in ranges]

        if len(raw) < _PARALLEL_CRC:
            crcs = checksums()
            output.write(raw)
            return crcs
        pending = self._pool.submit(checksums)
        output.write(raw)
        return pending.result()

    def _encoded(
        self, raw: memoryview, ranges: list[tuple[int, int]], itemsize: int
    ) -> Iterator[tuple[memoryview | bytes, int]]:
        """Encoded chunks and their CRC-32C in order, at most a few in flight so memory
        stays bounded. Each is encoded and checksummed on a worker thread, leaving this
        one only the writes."""
        window: deque[Future[tuple[memoryview | bytes, int]]] = deque()
        for a, b in ranges:
            window.append(self._pool.submit(_encode_chunk, self.compression, self.level,
                                            itemsize, raw[a:b]))
            if len(window) > 2 * self._threads:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()

    # -- files and commit -----------------------------------------------------

    def _prepare_target(self) -> None:
        if self.layout not in ("file", "directory"):
            raise InvalidError(f"layout must be 'file' or 'directory', not {self.layout!r}")
        self._created_directory = self._storage.prepare_target(self.target, self.layout)
        if self.layout == "file":
            self._files.append(self._storage.create_output(self.target, self.write_id))
            self._index.shards.add(path="")  # the file itself holds the data

    def _output_for(self, size: int) -> Output:
        if self.layout == "file":
            return self._files[0]
        if not self._files or (
            self._files[-1].position > PREAMBLE_SIZE
            and self._files[-1].position + padding(self._files[-1].position) + size
            > self.max_shard_size
        ):
            # A shard goes straight to its final name, which no reader opens
            # before a committed index names it [R-COMMIT-002].
            name = shard_file_name(self.write_id, len(self._files))
            self._files.append(self._storage.create_output(self.target / name, None))
        return self._files[-1]

    def _fill_tables(self) -> None:
        """Lay the written tensors and blocks out as the index's columns."""
        for row, boxes in self._boxes.items():
            self._check_tiling(self._table.keys[row], self._table.shapes[row], boxes)
        self._table.fill(self._index)

    def _check_tiling(self, key: str, shape: tuple[int, ...], boxes: list[Box]) -> None:
        if not self.slices_must_tile:
            if not boxes_disjoint(boxes):
                raise InvalidError("slices of this tensor overlap", key=key,
                                   path=self.target, requirement="R-SLICE-001")
        elif not boxes_tile(boxes, shape):
            raise InvalidError(f"slices do not tile the global shape {list(shape)} "
                               "exactly (overlap or gap)", key=key, path=self.target,
                               requirement="R-SLICE-002")

    def _index_bytes(self) -> bytes:
        index_bytes = self._index.SerializeToString(deterministic=True)
        if len(index_bytes) > MAX_INDEX_BYTES:
            raise LimitExceededError(f"index would be {len(index_bytes)} bytes, above the "
                                     f"limit of {MAX_INDEX_BYTES}", path=self.target,
                                     requirement="R-LIMIT-001")
        return index_bytes

    def _commit_file(self) -> None:
        index_bytes = self._index_bytes()
        output = self._files[0]
        output.flush()
        index_offset = output.position
        output.write(index_bytes)
        footer = Footer(index_offset, len(index_bytes), crc32c(index_bytes))
        output.write(footer.pack())
        assert output.position == index_offset + len(index_bytes) + FOOTER_SIZE
        output.close_durably()  # for an object, this is the commit [R-COMMIT-005]
        output.publish()
        self._files.clear()
        self._remove_file_leftovers()

    def _remove_file_leftovers(self) -> None:
        """Delete the temporary files of earlier, killed writes of this same path, which
        [R-COMMIT-004] allows once this commit is done; without it each killed save
        would leave up to a whole checkpoint behind for good."""
        if not self._storage.temporary_names:
            return  # an upload uses no temporary name
        parent = self.target.parent
        ours = temp_names_of(re.escape(self.target.name))
        for name in self._storage.list_names(parent):
            if ours.fullmatch(name):
                self._storage.remove(parent / name)

    def _commit_directory(self) -> None:
        self._publish_index(self.index_name)
        if self.index_name != INDEX_FILE_NAME:
            return  # not a commit of the checkpoint: nothing to clean up
        referenced = {s.path for s in self._index.shards}
        # A previous version's shards, or a crashed write's [R-COMMIT-004].
        for leftover in leftover_names(self._storage.list_names(self.target), referenced):
            self._storage.remove(self.target / leftover)

    def _publish_index(self, name: str) -> None:
        """Steps 4 to 8 of [R-COMMIT-002]: sync the shards, list them, and publish
        the index under ``name`` in the target directory (a part index publishes
        under its own name, spec/parts.md)."""
        for output in self._files:
            output.close_durably()
            self._index.shards.add(path=output.path.name, length=output.position)
        index_bytes = self._index_bytes()
        # Local files go to a temporary name and are renamed; on an object store the
        # index is uploaded under its final name after every shard upload completed,
        # and completing it is the commit [R-COMMIT-005].
        index_file = self._storage.create_output(self.target / name, self.write_id)
        self._files.append(index_file)
        index_offset = index_file.position
        index_file.write(index_bytes)
        index_file.write(Footer(index_offset, len(index_bytes), crc32c(index_bytes)).pack())
        index_file.close_durably()
        self._storage.sync_directory(self.target)  # the shards' names are durable
        index_file.publish()
        self._files.clear()


def _encode_chunk(codec: Codec, level: int, itemsize: int, raw: memoryview
                  ) -> tuple[memoryview | bytes, int]:
    stored = codec.encode(raw, level, itemsize)
    return stored, crc32c(stored)


def _check_shape(key: str, shape: tuple[int, ...]) -> None:
    """Refuse a shape beyond the limits of [R-TENSOR-003], empty ones included."""
    if len(shape) > MAX_RANK:
        raise LimitExceededError(f"rank {len(shape)} is above the limit of {MAX_RANK}",
                                 key=key, requirement="R-TENSOR-003")
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)}: its non-zero dimensions multiply to "
                                 "more than 2^58", key=key, requirement="R-TENSOR-003")


def _padded(raws: list[memoryview], sizes: np.ndarray, padded: np.ndarray
            ) -> list[memoryview]:
    """``raws`` with the zeros that align each to 64 bytes after the one before (none
    after the last: the next block, or the index, pads or not as it needs)."""
    pads = (padded - sizes)[:-1]
    if not pads.any():
        return list(raws)
    parts: list[memoryview] = []
    for raw, pad in zip(raws, pads.tolist()):
        parts.append(raw)
        if pad:
            parts.append(_ZEROS[:pad])
    parts.append(raws[-1])
    return parts


def _boxes_inside(key: str, array: np.ndarray, start: Sequence[int], boxes: Sequence[Box]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``start`` and the starts and extents of ``boxes`` as arrays (one row a box);
    InvalidError unless each box lies inside the box of ``array`` at ``start``."""
    try:
        origin = np.asarray(start, np.int64)
        starts = np.asarray([box[0] for box in boxes], np.int64)
        extents = np.asarray([box[1] for box in boxes], np.int64)
        fits = (origin.shape == (array.ndim,) and starts.shape == extents.shape
                == (len(boxes), array.ndim))
    except (TypeError, ValueError, OverflowError, IndexError):
        fits = False
    if not fits or (starts < origin).any() or (
            starts + extents > origin + np.asarray(array.shape, np.int64)).any():
        raise InvalidError(f"the boxes to write must each be a (start, extent) inside the box "
                           f"of shape {list(array.shape)} at {list(start)} that the array "
                           "holds", key=key, requirement="R-SLICE-001")
    return origin, starts, extents
