"""Checkpoint reader (spec/format.md, spec/commit.md).

Opening reads only the footer and the index, checks them completely, and
checks that every shard file exists with its recorded length. Tensors are
read on demand: :meth:`Reader.get_tensor` returns uncompressed tensors as
read-only NumPy views over a memory map (zero-copy), :meth:`Reader.read_tensor`
returns a fresh writable array, and :meth:`Reader.get_slice` reads only the
chunks that hold the requested region. Checksums are verified on every
read unless ``verify=False`` [R-CRC-001]. The Reader maps keys to blocks;
the block reader (:mod:`ocf.format.reading.blocks`) reads and checks them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from math import prod
from types import TracebackType

import numpy as np

from ocf.format.container import read_index_bytes
from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    NotFoundError,
    OCFError,
)
from ocf.format.index.decoding import Index, decode_index
from ocf.format.index.model import Block, Shard, SmallPlain, TensorInfo
from ocf.format.memory import allocate, needing
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph, decode_graph
from ocf.format.pieces import Piece
from ocf.format.pool import check_identity, pool_directory
from ocf.format.raw import check_bool, decode_strings
from ocf.format.reading.bands import read_row_bands
from ocf.format.reading.blocks import BlockReader, GroupRead, runs
from ocf.format.reading.tiles import RegionPlan, copy_row_runs, copy_tiles, plan_region
from ocf.format.slicing import Box, as_array_index, chunks_touching, intersect, select
from ocf.format.source import Source
from ocf.format.storage.backend import Input, backend_of
from ocf.format.storage.location import Location, StorageOptions, locate

# read_tensors() reads uncompressed tensors up to this size together with
# their neighbours, in one system call per run of at most READ_GROUP bytes
# whose gaps are small.
_BATCH_MAX = 1 << 20


def _ascii_folded(name: str) -> bytes:
    """``name`` with ASCII letters upper-cased and nothing else changed (bytes.upper
    folds ASCII only), as shard names are compared [R-SHARD-005] [R-SHARD-006]."""
    return name.encode("utf-8", "surrogateescape").upper()


class Reader(Source[TensorInfo]):
    """An open OCF checkpoint: a read-only mapping from key to :class:`TensorInfo`, the
    :class:`~ocf.format.source.Source` of the OCF format.

    Examples:
        >>> with ocf.Reader("model.ocf") as reader:  # reads the index only
        ...     print(list(reader), reader.metadata)
        ...     kernel = reader.get_tensor("dense/kernel")  # zero-copy, CRC-checked
        ...     rows = reader.get_slice("dense/kernel", np.s_[:8])  # only the chunks it needs
    """

    format_name = "OCF"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True,
                 storage_options: StorageOptions | None = None) -> None:
        """Open ``path``: a local path, or a URL of an fsspec filesystem (``s3://...``)
        whose ``storage_options`` go to fsspec; objects are read by ranges, never mapped."""
        where = locate(path, storage_options)
        self._storage = backend_of(where)
        self.path: Location = self._storage.resolve_checkpoint(where)
        self._blocks = BlockReader(self.path, verify)
        self._graph: ObjectGraph | None = None
        self._own = self._storage.open_index(self.path)
        try:
            self.index = self._read_index(self._own)
            for shard in self.index.shards:  # step 16, eager [R-VERIFY-001]
                self._blocks.add_shard(self._own if shard.path == "" else
                                       self._open_shard(shard))
        except BaseException:
            self.close()
            raise

    @property
    def verify(self) -> bool:
        """Whether every read checks the checksums of the chunks it uses [R-CRC-001]."""
        return self._blocks.verify

    @verify.setter
    def verify(self, verify: bool) -> None:
        self._blocks.verify = verify

    @property
    def bytes_read(self) -> int:
        """The bytes of the shard files read (or mapped and used) so far."""
        return self._blocks.bytes_read

    @bytes_read.setter
    def bytes_read(self, count: int) -> None:  # a caller may reset the count
        self._blocks.bytes_read = count

    def _open_shard(self, shard: Shard) -> Input:
        """The shard of the index: beside the index file [R-SHARD-001], and never the
        index file itself [R-SHARD-006]; or a pool object [R-POOL-003]."""
        name, length = shard.path, shard.length
        if shard.pool_sha256:
            return self._storage.open_pool_shard(pool_directory(self.path), name, length)
        if _ascii_folded(name) == _ascii_folded(self.path.name):
            raise InvalidError(f"shard {name!r} names the index file itself",
                               path=self.path, requirement="R-SHARD-006")
        return self._storage.open_shard(self.path.parent / name, length)

    def shard_input(self, number: int) -> Input:
        """The open file of shard ``number`` of the index (opened and checked at open)."""
        return self._blocks.shards[number]

    def check_pool_identities(self) -> None:
        """Hash every pool object the index lists, in order, against its recorded
        SHA-256 (IntegrityError): step 16b of a full verification, which reads every
        byte of them [R-POOL-004]. Ordinary reads check chunk CRCs only."""
        for number, shard in enumerate(self.index.shards):
            if shard.pool_sha256:
                check_identity(self._blocks.shards[number], shard.pool_sha256)

    # -- opening --------------------------------------------------------------

    def _read_index(self, own: Input) -> Index:
        data, footer = read_index_bytes(own)
        self.format_version = (footer.format_major, footer.format_minor)
        # Tells this checkpoint from one written over it later (ocf.interop).
        self.index_identity = (footer.index_length, footer.index_crc32c)
        with needing(len(data), "decoding the index", path=own.path):
            return decode_index(data, str(own.path), footer.index_offset)

    # -- mapping interface ----------------------------------------------------

    def __getitem__(self, key: str) -> TensorInfo:
        try:
            return self.index.tensors[key]
        except KeyError:
            raise NotFoundError("no tensor with this key", path=self.path, key=key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.index.tensors)

    def __len__(self) -> int:
        return len(self.index.tensors)

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return self.index.metadata

    @property
    def identity(self) -> tuple[int, int]:
        """The length and CRC-32C of the index as opened."""
        return self.index_identity

    @property
    def mappable(self) -> bool:
        """Whether every file of the checkpoint can be memory-mapped (local files)."""
        return self._blocks.mappable

    @property
    def object_graph(self) -> ObjectGraph | None:
        """The checked object graph of an object-based checkpoint, else None.

        Checked on first use, so that reading by name never pays for it.
        """
        if self._graph is None and self.index.graph_message is not None:
            with needing(self.index_identity[0], "the object graph of this index",
                         path=self.path):
                self._graph = decode_graph(self.index.graph_message, self.index.tensors,
                                           str(self.path), self.index.odd_metadata_nodes())
        return self._graph

    # -- reading --------------------------------------------------------------

    def get_tensor(self, key: str) -> np.ndarray:
        """The tensor ``key``; a read-only zero-copy view when it is stored uncompressed."""
        view = self._plain_view(key)
        if view is not None:
            return view
        info = self[key]
        block = info.block
        if block is None or info.dtype.is_bytes or not self._blocks.maps(block):
            return self.read_tensor(key)
        with self._memory_for(info):  # mapping a shard takes address space too
            raw = self._blocks.mapped(block)
            self._blocks.verify_mapped(info, block, range(block.chunk_count), raw)
            return self._materialize(info, raw, info.shape)

    def _plain_view(self, key: str) -> np.ndarray | None:
        """The view :meth:`get_tensor` returns for a mapped tensor of one uncompressed
        chunk, built from the index columns alone (the common case of many small
        tensors); None for any other tensor, and for a checksum mismatch, which
        the general path then reports."""
        try:
            plain = self.index.tensors.plain_chunk(key)
        except KeyError:
            raise NotFoundError("no tensor with this key", path=self.path, key=key) from None
        if plain is None:
            return None
        shard, offset, length, crc, dtype, shape = plain
        raw = self._blocks.plain_chunk(shard, offset, length, crc)
        if raw is None:
            return None
        # Read-only, as the map is. Not np.ndarray(shape, dtype, whole, offset), which is
        # cheaper but keeps the mmap itself as its base and releases the memoryview's
        # export: the reader's close() could then unmap memory the view still reads
        # (a segmentation fault). frombuffer keeps the memoryview, so the map stays
        # open while any view of it lives.
        view: np.ndarray = np.frombuffer(raw, dtype).reshape(shape)
        return view

    def read_tensor(self, key: str) -> np.ndarray:
        """The tensor ``key`` as a new, writable array that owns its memory."""
        info = self[key]
        with self._memory_for(info):
            if info.block is None:
                return self._read_region(info, ((0,) * len(info.shape), info.shape))
            raw = self._blocks.read(info, info.block)
            return self._materialize(info, raw, info.shape)

    def read_into(self, key: str, out: np.ndarray) -> np.ndarray:
        """Read the tensor ``key`` into ``out``, an array the caller already holds; return it.

        ``out`` is writable, C-contiguous, of the tensor's shape and dtype.
        Nothing the size of the tensor is allocated: at most one zstd chunk
        per worker thread, or for a tensor stored in slices one slice, so a
        tensor as large as free memory still reads [R-ERR-003]. Byte
        strings have no fixed size and are refused (use read_tensor).
        """
        info = self[key]
        numpy_dtype = info.dtype.numpy
        if numpy_dtype is None:
            raise InvalidError("a tensor of byte strings cannot be read into an array of fixed "
                               "size; use read_tensor", path=self.path, key=key)
        if out.shape != info.shape or out.dtype != numpy_dtype or not out.flags.c_contiguous \
                or not out.flags.writeable:
            raise InvalidError(
                f"out is {'a writable' if out.flags.writeable else 'a read-only'} "
                f"{'' if out.flags.c_contiguous else 'non-contiguous '}{out.dtype} array of "
                f"shape {list(out.shape)}; the tensor needs a writable C-contiguous "
                f"{numpy_dtype} array of shape {list(info.shape)}", path=self.path, key=key)
        # What is still allocated: a decoded chunk, or one slice's bytes.
        needed = info.block.raw_chunk_size if info.block is not None else \
            int(self._slice_raw_lengths(key).max())
        with needing(needed, "reading this tensor into the given array", path=self.path,
                     key=info.key):
            if info.block is not None:
                raw = out.reshape(-1).view(np.uint8)
                self._blocks.fill(info, info.block, raw)
                self._materialize(info, raw, info.shape)  # checks bool bytes
                return out
            self._fill_from_slices(info, ((0,) * len(info.shape), info.shape), out)
        return out

    def read_slice_into(self, key: str, index: object, out: np.ndarray) -> np.ndarray:
        """Read ``tensor[index]`` (basic NumPy indices, as :meth:`get_slice`) into ``out``,
        an array the caller already holds, of that region's shape and the tensor's
        dtype; return it. Only the chunks the region needs are read; a region of a
        tensor stored in slices is copied from the (mapped) file straight into
        ``out``, without an array of the region in between."""
        info = self[key]
        selection = select(index, info.shape)
        numpy_dtype = info.dtype.numpy
        wanted = tuple(n for d, n in enumerate(selection.box[1]) if d not in selection.squeeze)
        steps = tuple(len(range(0, n, s)) for n, s in zip(selection.box[1], selection.steps))
        shape = tuple(n for d, n in enumerate(steps) if d not in selection.squeeze)
        if numpy_dtype is None or out.shape != shape or out.dtype != numpy_dtype or \
                not out.flags.writeable:
            raise InvalidError(
                f"out is a {'writable' if out.flags.writeable else 'read-only'} {out.dtype} "
                f"array of shape {list(out.shape)}; the region needs a writable "
                f"{numpy_dtype or 'fixed-size'} array of shape {list(shape)}",
                path=self.path, key=key)
        if shape != wanted:  # steps: through an array of the whole box
            out[...] = self.get_slice(key, index)
        elif info.block is None:
            with self._memory_for(info):
                self._fill_from_slices(info, selection.box, np.expand_dims(
                    out, selection.squeeze))  # a view, whatever out's strides
        elif wanted == info.shape and out.flags.c_contiguous:
            self.read_into(key, out)
        else:
            with self._memory_for(info):
                out[...] = selection.apply(self._block_region(
                    info, info.block, info.shape, selection.box))
        return out

    def read_tensors(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """New writable arrays for ``keys``; neighbouring small tensors are read together.

        The small tensors of one run share that run's buffer, which is
        freed once none of them is referenced.
        """
        wanted = list(keys)
        missing = [key for key in wanted if key not in self.index.tensors]
        if missing:
            raise NotFoundError("no tensor with this key", path=self.path, key=missing[0])
        small, others = self.index.tensors.split_small_plain(wanted, _BATCH_MAX)
        result = self._read_overlapping(others)
        for first, last in runs(small):
            self._read_run(small, first, last, result)
        return {key: result[key] for key in wanted}

    def _read_overlapping(self, keys: list[str]) -> dict[str, np.ndarray]:
        """New arrays for ``keys``: the uncompressed ones read in groups of chunks whose
        reads all overlap, the others one by one."""
        result: dict[str, np.ndarray] = {}
        reads: list[GroupRead] = []
        buffers: list[tuple[TensorInfo, np.ndarray]] = []
        for key in keys:
            info = self[key]
            block = info.block
            if block is None or not block.compression.stores_raw or info.dtype.is_bytes:
                result[key] = self.read_tensor(key)
                continue
            out = self._blocks.buffer(info, block.raw_length)
            reads += self._blocks.start_raw_read(info, block, out.data, batch=True)
            buffers.append((info, out))
        self._blocks.finish_reads(reads)
        for info, out in buffers:
            result[info.key] = self._materialize(info, out, info.shape)
        return result

    def _read_run(self, small: SmallPlain, first: int, last: int,
                  result: dict[str, np.ndarray]) -> None:
        """Tensors ``first`` to ``last`` of ``small``, read with one system call, into
        ``result``: views of one buffer."""
        keys, numpy_dtypes, shapes = small.keys, small.dtypes, small.shapes
        for i, buffer, at in self._blocks.read_run(small, first, last, self.__getitem__):
            if numpy_dtypes[i].kind == "b":  # bool bytes must be checked
                raw = buffer[at : at + small.raw_lengths[i]]
                result[keys[i]] = self._materialize(self[keys[i]], raw, shapes[i])
            else:  # np.ndarray() costs far less than NumPy slicing, per tensor of thousands
                result[keys[i]] = np.ndarray(shapes[i], numpy_dtypes[i], buffer, at)

    def get_slice(self, key: str, index: object, *, mapped: bool = True) -> np.ndarray:
        """``tensor[index]`` for basic NumPy indices, reading only the chunks it needs.

        Unless ``mapped``, a local file's chunks are read rather than mapped, so
        memory holds only those chunks however much of the file a caller goes
        through piece by piece (``ocf diff``, ``ocf inspect --stats``).
        """
        info = self[key]
        selection = select(index, info.shape)
        with self._memory_for(info):
            region = self._read_region(info, selection.box, mapped=mapped)
            result = selection.apply(region)
        # The region was read for this call: returned as it is, unless steps leave
        # out some of it (then copied, to free the rest).
        return result if result.size == region.size else result.copy()

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        """``tensor[piece.index]``, its chunks read rather than mapped."""
        return self.get_slice(key, piece.index, mapped=False)

    def verify_tensor(self, key: str) -> None:
        """Check the stored bytes of tensor ``key`` against their checksums, without
        decoding or keeping them: one chunk in memory at a time, none for a mapped
        file. For a caller that reads the tensor later and must know now that it can
        (ocf.objects.read_ahead); nothing to check when the reader does not verify."""
        info = self[key]
        if not self.verify:
            return
        for block in info.blocks:
            self._blocks.verify_block(info, block)

    def verify_all(self) -> None:
        """A full verification, after what opening checked [R-VERIFY-001]: the identity
        of every pool object (step 16b), the object graph (if any), then every chunk
        of every tensor in table order: checksums, codecs, byte strings, bools."""
        self.check_pool_identities()
        _ = self.object_graph  # checked once, before any tensor byte is read
        for key in self:
            self.read_tensor(key)

    # -- regions ----------------------------------------------------------------

    def _memory_for(self, info: TensorInfo) -> AbstractContextManager[None]:
        """Reading ``info``: out of memory names it, its file and its raw bytes [R-ERR-003].

        Every buffer of a read is sized by the index, whose checks bound it by
        the file: a block stored raw lies in its shard, an encoded block holds at
        most its codec's output bound of raw bytes per stored byte [R-LIMIT-003].
        """
        raw = info.block.raw_length if info.block is not None else \
            sum(self._slice_raw_lengths(info.key).tolist())
        return needing(raw, "reading this tensor", path=self.path, key=info.key)

    def _slice_raw_lengths(self, key: str) -> np.ndarray:
        """The raw lengths of the blocks of the slices of ``key``, a tensor stored in slices."""
        boxes = self.index.tensors.slice_boxes(key)
        assert boxes is not None
        lengths: np.ndarray = self.index.tensors.block_columns.raw_lengths[boxes.blocks]
        return lengths

    def _block_region(self, info: TensorInfo, block: Block, shape: tuple[int, ...],
                      box: Box, mapped: bool = True) -> np.ndarray:
        """The elements of ``box`` from a block holding a tensor (or slice) of ``shape``."""
        window = tuple(slice(s, s + e) for s, e in zip(*box))
        if info.dtype.is_bytes:
            return self._materialize(info, self._blocks.read(info, block), shape, window)
        chunks = chunks_touching(shape, info.dtype.itemsize, block.raw_chunk_size,
                                 block.chunk_count, box)
        raw = self._blocks.chunks(info, block, chunks.tolist(), mapped)
        return self._materialize(info, raw, shape, window)

    def _read_region(self, info: TensorInfo, box: Box, mapped: bool = True) -> np.ndarray:
        """A new array holding the elements of ``box`` of the tensor."""
        if info.block is not None:
            region: np.ndarray = self._block_region(info, info.block, info.shape, box,
                                                    mapped).copy()
            return region
        dtype = object if info.dtype.numpy is None else info.dtype.numpy
        try:
            out = allocate(box[1], dtype, "reading this tensor", path=self.path, key=info.key)
        except ValueError as exc:  # a valid shape NumPy cannot represent
            raise LimitExceededError(f"shape {list(box[1])} cannot be held by NumPy: {exc}",
                                     path=self.path, key=info.key) from None
        self._fill_from_slices(info, box, out, mapped)
        return out

    def _fill_from_slices(self, info: TensorInfo, box: Box, out: np.ndarray,
                          mapped: bool = True) -> None:
        """Fill ``out``, an array of ``box``'s shape, from the slices of ``info`` that meet
        ``box``: the uncompressed tiles that lie inside it, and the runs of rows it needs
        of those it cuts along the first dimension only, in groups
        (:mod:`ocf.format.reading.tiles`); the others one by one."""
        tables = self.index.tensors
        boxes = tables.slice_boxes(info.key)
        assert boxes is not None  # a tensor stored in slices
        columns = tables.block_columns
        if box[1] == info.shape and info.dtype.numpy is not None \
                and info.dtype.numpy.kind != "b":  # the whole tensor: its bands first
            done = read_row_bands(self._blocks, columns, tables.block, info, boxes, out)
            if len(done) == len(boxes.blocks):  # all of it (an incremental save's bands)
                return
            plan = RegionPlan(*(np.setdiff1d(part, done)
                                for part in plan_region(boxes, columns, *box)))
        else:
            plan = plan_region(boxes, columns, *box)
        if info.dtype.numpy is None or info.dtype.numpy.kind == "b":  # strings and bools
            others = np.sort(np.concatenate(plan))  # need their checks
        else:
            copy_tiles(self._blocks, columns, info, boxes, plan.tiles, box[0], out, mapped)
            left = copy_row_runs(self._blocks, columns, info, boxes, plan.rows, box[0], out,
                                 mapped)
            others = np.sort(np.concatenate([left, plan.others]))
        for i in others.tolist():
            start = tuple(boxes.lo[i].tolist())
            extent = tuple((boxes.hi[i] - boxes.lo[i]).tolist())
            common = intersect(box, (start, extent))
            assert common is not None  # the plan has the slices that meet the box
            local = (tuple(c - p for c, p in zip(common[0], start)), common[1])
            target = tuple(slice(c - b, c - b + e) for c, b, e in zip(common[0], box[0],
                                                                      common[1]))
            out[target] = self._block_region(info, tables.block(int(boxes.blocks[i])), extent,
                                             local, mapped)

    def _materialize(self, info: TensorInfo, raw: np.ndarray, shape: tuple[int, ...],
                     window: tuple[slice, ...] = ()) -> np.ndarray:
        """The array of ``shape`` held by ``raw`` (or its ``window``), with bools checked."""
        numpy_dtype = info.dtype.numpy
        try:
            if numpy_dtype is None:
                strings: np.ndarray = decode_strings(raw, prod(shape), shape)[
                    as_array_index(window)]
                return strings
            array: np.ndarray = raw.view(numpy_dtype).reshape(shape)[as_array_index(window)]
            if numpy_dtype.kind == "b":
                check_bool(array)
            return array
        except OCFError as exc:
            raise exc.located(self.path, info.key) from None
        except ValueError as exc:  # a valid shape NumPy cannot represent
            raise LimitExceededError(f"shape {list(shape)} cannot be held by NumPy: {exc}",
                                     path=self.path, key=info.key) from None

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        shards = self._blocks.detach()  # maps first: one closes now when no view holds it
        for shard in {id(s): s for s in [self._own, *shards]}.values():
            shard.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
