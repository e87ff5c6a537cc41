"""Streaming checkpoint writer (spec/format.md, spec/commit.md).

Tensor bytes go from the arrays straight to the file: no buffer of the
whole checkpoint is ever built. What the writer is given is checked once,
into write items (:mod:`ocf.format.writing.items`); one emitter writes
their bytes as blocks (:mod:`ocf.format.writing.blocks`); the committer of
the layout writes the index last and publishes the checkpoint atomically on
:meth:`Writer.commit` [R-COMMIT-001] [R-COMMIT-002]
(:mod:`ocf.format.writing.committers`): a crash or an exception before
that leaves nothing at the target but what was there before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType

import numpy as np

from ocf._version import __version__
from ocf.format.codecs.registry import codec_named
from ocf.format.commit import new_write_id
from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import InvalidError
from ocf.format.limits import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from ocf.format.metadata import encode_map
from ocf.format.object_graph import Node, decode_graph, encode_graph
from ocf.format.reader import Reader
from ocf.format.slicing import Box
from ocf.format.storage.backend import Layout, backend_of
from ocf.format.storage.location import Location, StorageOptions, locate
from ocf.format.writing.banding import banded_items
from ocf.format.writing.blocks import BlockEmitter
from ocf.format.writing.committers import Committer, committer_for
from ocf.format.writing.items import Item, Tensors
from ocf.format.writing.pooled import Reuse, open_base, pooled_committer
from ocf.v1 import index_pb2

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_SHARD_SIZE = 4 << 30
# zstd level of writers that choose none. Level 1, not zstd's own default of 3:
# on checkpoint weights (float32 rounded to bf16, byte-shuffled) level 3 costs
# 2.5x the CPU of level 1 (5.0-6.6 against 1.9-2.4 s/GiB on the benchmark
# machine) and stores more (0.354 of the raw bytes against 0.342): the
# compressible bytes are the exponents, which level 1 already finds.
DEFAULT_COMPRESSION_LEVEL = 1


class Writer:
    """Writes one checkpoint; use as a context manager, or call commit()/abort().

    ``layout="file"`` writes one self-contained file (conventionally
    ``.ocf``); ``layout="directory"`` writes a directory with ``index.ocf``
    and data shards of at most ``max_shard_size`` bytes each (a tensor
    larger than that gets a shard of its own).

    ``incremental=True`` (format 1.2, spec/pool.md) writes the single-file form
    in the managed root that is the file's directory: the blocks whose bytes the
    checkpoint ``base`` (of the same root, usually the latest) already stores
    are referenced in the pool ``ocf-pool`` of the root (the base's file is
    linked there when a block of it is first reused), the others written to the
    file; tensors above 1 MiB are stored as bands of rows so that a change
    rewrites only its band. Such a checkpoint is read
    like any other, but is complete only with its pool (``ocf export`` copies
    one out); :class:`ocf.CheckpointManager` with ``incremental=True`` keeps
    the pool and deletes what no checkpoint references.

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
        incremental: bool = False,
        base: str | os.PathLike[str] | None = None,
    ) -> None:
        # A URL (s3://...) names an object store: its files are uploaded under
        # their final names, and completing the index upload commits [R-COMMIT-005].
        self.target: Location = locate(path, storage_options)
        storage = backend_of(self.target)
        self.layout = layout
        self.compression = codec_named(compression)
        self.level = compression_level
        self.byte_shuffle = byte_shuffle and not self.compression.stores_raw
        self.chunk_size = checked_chunk_size(chunk_size)
        self.max_shard_size = max_shard_size
        # Names this write's temporary files and shards; fixed only by tools that
        # must produce identical bytes on every run (conformance generators).
        self.write_id = write_id or new_write_id()
        self._index = index_pb2.Index()
        self._index.header.writer = f"ocf-python {__version__}"
        if metadata:
            encode_map(metadata, self._index.metadata)
        self._tensors = Tensors()
        self._graph: list[Node] | None = None
        self._closed = False
        self._base: Reader | None = None
        reuse = None
        self._reuse: Reuse | None = None  # an incremental write's lookups in the base
        if incremental:
            self._base = open_base(base, self.target)  # refused before a file is made
            try:
                committer = pooled_committer(layout, storage, self.target, self.write_id)
            except BaseException:
                self._close_base()
                raise
            self._reuse = Reuse(self._base, self._tensors, committer)
            reuse = self._reuse.block_for
            self._committer: Committer = committer
        else:
            self._committer = committer_for(layout, storage, self.target,
                                            self.write_id, max_shard_size)
        self._emitter = BlockEmitter(self._committer, self._tensors.table, self.compression,
                                     self.level, self.byte_shuffle, chunk_size,
                                     threads or min(4, os.cpu_count() or 1), reuse)

    # -- public API -----------------------------------------------------------

    def write(self, key: str, array: np.ndarray, *, chunk_size: int | None = None) -> None:
        """Store ``array`` whole under ``key``; its bytes are written now, in chunks of
        ``chunk_size`` bytes (None: the writer's ``chunk_size``)."""
        chunk_size = None if chunk_size is None else checked_chunk_size(chunk_size)
        self._emit(self._whole_items(((key, array),), chunk_size), chunk_size)

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
        self._emit(self._whole_items(pairs))

    def _whole_items(self, pairs: Iterable[tuple[str, np.ndarray]],
                     chunk_size: int | None = None) -> Iterator[Item]:
        """The items that store each array whole under its key, in chunks of
        ``chunk_size`` (None: the writer's)."""
        if self._reuse is not None:  # large tensors as bands of rows, each reused or written
            chunk, whole = chunk_size or self.chunk_size, self._reuse.writes_whole
            return (item for key, value in pairs
                    for item in banded_items(self._tensors, key, value, chunk, whole))
        return (self._tensors.whole(key, value) for key, value in pairs)

    def write_slice(
        self, key: str, array: np.ndarray, start: Sequence[int], shape: Sequence[int], *,
        chunk_size: int | None = None,
    ) -> None:
        """Store ``array`` as the box at ``start`` of the tensor ``key`` of global ``shape``,
        in chunks of ``chunk_size`` bytes (None: the writer's ``chunk_size``; the
        format records a chunk size per block, so the slices of a tensor may differ).

        Several calls build one tensor; at commit its boxes must tile the
        global shape exactly [R-SLICE-002].
        """
        self._emit(self._tensors.slices(key, array, start, shape),
                   None if chunk_size is None else checked_chunk_size(chunk_size))

    def write_slices(self, key: str, array: np.ndarray, start: Sequence[int],
                     shape: Sequence[int], boxes: Sequence[Box]) -> None:
        """Store the box ``array`` at ``start`` of the tensor ``key`` of global ``shape``
        as several slices: ``boxes``, each (start, extent) in global coordinates and
        inside the box.

        The same file as one :meth:`write_slice` of each part of ``array``, in
        order, and the same errors; uncompressed parts of at most
        ``chunk_size`` bytes are gathered a few MiB at a time and written
        together. The boxes need not cover the box, nor be disjoint: that is
        checked at commit, as for :meth:`write_slice`.
        ``ocf.distributed.parts.PartWriter`` stores its tiles with it.

        Examples:
            >>> table = np.arange(64.0).reshape(8, 8)
            >>> with ocf.Writer("table.ocf") as writer:  # the two halves of the rows
            ...     writer.write_slices("table", table, (0, 0), (8, 8),
            ...                         [((0, 0), (4, 8)), ((4, 0), (4, 8))])
        """
        self._emit(self._tensors.slices(key, array, start, shape, boxes))

    def _emit(self, items: Iterable[Item], chunk_size: int | None = None) -> None:
        self._emitter.emit(items, chunk_size)

    def write_tiles(self, key: str, array: np.ndarray, start: Sequence[int],
                    shape: Sequence[int], tile: Sequence[int], *,
                    chunk_size: int | None = None) -> None:
        """Store the box ``array`` at ``start`` of the tensor ``key`` of global ``shape``
        as the cells of the grid whose lines lie at the multiples of ``tile`` (an
        extent per dimension, in global coordinates), each cell a slice.

        The same file as :meth:`write_slices` of the cells in C order of the grid,
        and the same errors. When the grid's lines fall on the box's edges (every
        cell of the tile's shape) and the codec stores raw bytes, the cells are cut
        and written a few MiB at a time with array operations: thousands of tiles
        cost little more than the bytes. ``ocf.distributed.parts.PartWriter`` stores
        its tiles with it. Each tile is chunked by ``chunk_size`` (None: the writer's).

        Examples:
            >>> table = np.arange(64.0).reshape(8, 8)
            >>> with ocf.Writer("table.ocf") as writer:  # four 4 x 4 tiles
            ...     writer.write_tiles("table", table, (0, 0), (8, 8), (4, 4))
        """
        self._emitter.emit(self._tensors.tiles(key, array, start, shape, tile),
                           None if chunk_size is None else checked_chunk_size(chunk_size))

    def sync_data(self) -> None:
        """Make the tensor bytes written so far durable now (the directory layout: fsync
        of the shard files, or completed uploads), so that :meth:`commit` has only the
        index left to write; tensors written after it go to new shards. For a writer
        that must wait for something else before it commits (the coordinator of a DCP
        save waits for the other ranks): the wait then overlaps the disk. Nothing is
        committed, and :meth:`abort` still drops everything."""
        if self._closed:
            raise InvalidError("writer is already closed", path=self.target)
        self._committer.close_shards()

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
        self._finish(lambda: self._committer.commit(self._index, self.index_name))

    def seal(self) -> bytes:
        """Make every tensor byte durable and return the index file (preamble, index,
        footer) without publishing it: the directory layout only, for a part whose
        index goes to the merger in-band (spec/parts.md, [R-PART-009]). Nothing is
        committed; the shard files stay, and are the checkpoint's once a merged index
        names them (else a later commit's cleanup deletes them)."""
        sealed: list[bytes] = []
        self._finish(lambda: sealed.append(self._committer.seal(self._index)))
        return sealed[0]

    def _finish(self, publish: Callable[[], object]) -> None:
        """Complete the index and hand it to ``publish``; abort on any failure."""
        if self._closed:
            raise InvalidError("writer is already closed", path=self.target)
        try:
            self._tensors.check_slices(self.slices_must_tile, self.target)
            self._tensors.table.fill(self._index)
            if self._graph is not None:
                encode_graph(self._graph, self._index.object_graph)
                decode_graph(self._index.object_graph, self._tensors.rows, str(self.target))
            self.finish_index(self._index)
            publish()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._emitter.close()
        self._close_base()

    def abort(self) -> None:
        """Drop everything written so far; the target is left as it was."""
        self._committer.abort()
        self._closed = True
        self._emitter.close(cancel=True)
        self._close_base()

    def _close_base(self) -> None:
        if self._base is not None:
            self._base.close()
            self._base = None

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


def checked_chunk_size(chunk_size: int) -> int:
    """``chunk_size``, if it is a valid chunk size [R-CHUNK-001]."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size % 64 \
            or not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidError(f"chunk_size {chunk_size!r} must be a multiple of 64 in "
                           f"[{MIN_CHUNK_SIZE}, {MAX_CHUNK_SIZE}]", requirement="R-CHUNK-001")
    return chunk_size
