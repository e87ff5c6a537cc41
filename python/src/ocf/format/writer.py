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
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np

from ocf._version import __version__
from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.codec import ChunkEncoder, Codec
from ocf.format.commit import (
    leftover_names,
    new_write_id,
    shard_file_name,
    temp_names_of,
)
from ocf.format.container import (
    FOOTER_SIZE,
    INDEX_FILE_NAME,
    PREAMBLE_SIZE,
    Footer,
    padding,
)
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.index.encoding import fill_tables
from ocf.format.index.model import Block, Slice
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
from ocf.format.slicing import boxes_disjoint, boxes_tile
from ocf.format.storage.backend import Layout, Output, backend_of
from ocf.format.storage.location import Location, StorageOptions, locate
from ocf.v1 import index_pb2

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_SHARD_SIZE = 4 << 30
# Tensors at least this large are checksummed on a worker thread while the
# main thread writes them.
_PARALLEL_CRC = 4 << 20


@dataclass(slots=True)
class _Tensor:
    """A written tensor: a future row of the tensor table (an encoding.TensorRow)."""

    key: str
    dtype: dtypes.Dtype
    shape: tuple[int, ...]
    block: Block | None = None  # stored whole
    slices: list[Slice] = field(default_factory=list)  # stored in slices


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
        compression_level: int = 3,
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
        self.compression = Codec.parse(compression)
        self._plain = self.compression is Codec.NONE  # tested once per tensor
        self.level = compression_level
        self.byte_shuffle = byte_shuffle and self.compression is Codec.ZSTD
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
        self._tensors: dict[str, _Tensor] = {}
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
        self._tensors[key] = _Tensor(key, dtype, array.shape, self._store(raw, dtype))

    def write_slice(
        self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int]
    ) -> None:
        """Store ``array`` as the box at ``start`` of the tensor ``key`` of global ``shape``.

        Several calls build one tensor; at commit its boxes must tile the
        global shape exactly [R-SLICE-002].
        """
        array = np.asarray(array)
        dtype = dtypes.for_array(array)
        start, shape = tuple(int(x) for x in start), tuple(int(x) for x in shape)
        tensor = self._tensors.get(key)
        if tensor is not None and (tensor.block is not None or tensor.dtype != dtype
                                   or tensor.shape != shape):
            raise InvalidError(f"slice has dtype {dtype.name} and global shape {list(shape)}, "
                               f"the tensor written before under this key "
                               f"{tensor.dtype.name} and {list(tensor.shape)}"
                               f"{' stored whole' if tensor.block is not None else ''}",
                               key=key, requirement="R-SLICE-001")
        if len(start) != len(shape) or array.ndim != len(shape) or array.size == 0 or any(
            b < 0 or b + e > d for b, e, d in zip(start, array.shape, shape)
        ):
            raise InvalidError(f"slice of shape {list(array.shape)} at {list(start)} is not a "
                               f"non-empty box inside {list(shape)}", key=key,
                               requirement="R-SLICE-001")
        _check_shape(key, shape)
        raw = to_raw(array, dtype)
        if tensor is None:
            self._claim_key(key)
            tensor = self._tensors[key] = _Tensor(key, dtype, shape)
        tensor.slices.append(Slice(start, array.shape, self._store(raw, dtype)))

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
                decode_graph(self._index.object_graph, self._tensors, str(self.target))
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
        if key in self._tensors:
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
        if self.compression is Codec.NONE:
            crcs = self._write_plain(output, raw, ranges)
            return Block(shard, offset, size, size, self.compression, False, chunk_size,
                         crcs, [])
        shuffle = self.byte_shuffle and dtype.itemsize > 1
        encoder = ChunkEncoder(self.compression, self.level, dtype.itemsize if shuffle else 1)
        crcs, starts = [], [offset]
        for stored, crc in self._encoded(encoder, raw, ranges):
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
        self, encoder: ChunkEncoder, raw: memoryview, ranges: list[tuple[int, int]]
    ) -> Iterator[tuple[memoryview | bytes, int]]:
        """Encoded chunks and their CRC-32C in order, at most a few in flight so memory
        stays bounded. Each is encoded and checksummed on a worker thread, leaving this
        one only the writes."""
        window: deque[Future[tuple[memoryview | bytes, int]]] = deque()
        for a, b in ranges:
            window.append(self._pool.submit(_encode_chunk, encoder, raw[a:b]))
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
        for tensor in self._tensors.values():
            if tensor.block is None:
                self._check_tiling(tensor)
        fill_tables(self._index, self._tensors.values())

    def _check_tiling(self, tensor: _Tensor) -> None:
        boxes = [(piece.start, piece.extent) for piece in tensor.slices]
        if not self.slices_must_tile:
            if not boxes_disjoint(boxes):
                raise InvalidError("slices of this tensor overlap", key=tensor.key,
                                   path=self.target, requirement="R-SLICE-001")
        elif not boxes_tile(boxes, tensor.shape):
            raise InvalidError(f"slices do not tile the global shape {list(tensor.shape)} "
                               "exactly (overlap or gap)", key=tensor.key, path=self.target,
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


def _encode_chunk(encoder: ChunkEncoder, raw: memoryview) -> tuple[memoryview | bytes, int]:
    stored = encoder.encode(raw)
    return stored, crc32c(stored)


def _check_shape(key: str, shape: tuple[int, ...]) -> None:
    """Refuse a shape beyond the limits of [R-TENSOR-003], empty ones included."""
    if len(shape) > MAX_RANK:
        raise LimitExceededError(f"rank {len(shape)} is above the limit of {MAX_RANK}",
                                 key=key, requirement="R-TENSOR-003")
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)}: its non-zero dimensions multiply to "
                                 "more than 2^58", key=key, requirement="R-TENSOR-003")
