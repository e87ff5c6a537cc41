"""Reading a TensorFlow V2 checkpoint (a "tensor bundle") without TensorFlow.

``PREFIX.index`` is an SSTable (ocf.interop.tensorflow.sstable) mapping each key to
a BundleEntryProto, the empty key to the BundleHeaderProto. The bytes of a
tensor are ``size`` bytes at ``offset`` of ``PREFIX.data-{shard:05d}-of-
{num_shards:05d}``, with a masked CRC-32C. Fixed-width types are raw
little-endian row-major elements; strings use ocf.interop.tensorflow.strings.
Sub-byte types (int4, uint4, int2, uint2, float4_e2m1fn) take one byte per
element, the value in its low bits; a byte with a higher bit set is refused
as INVALID (TensorFlow never writes one). Every tensor comes back with the
NumPy dtype TensorFlow's own reader gives it (ocf.interop.tensorflow.dtypes): the
quantized types as plain integers, the sub-byte ones as ml_dtypes types.
A partitioned tensor's entry lists slices, each stored under its own slice
key (ocf.interop.tensorflow.slice_keys); read() assembles them, read_slice() returns
one.

The index is read and every block checked when the reader opens; entries
are decoded on first use; data files are opened on first use. Every offset
and size is checked against the file before anything is allocated; for a
partitioned tensor, every slice's, and that the slices share no stored bytes
and do not overlap (ocf.interop.tensorflow.tiling), before the tensor is allocated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from io import BufferedReader
from types import TracebackType

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    UnknownRequiredFeatureError,
)
from ocf.format.memory import needing
from ocf.format.storage.local import open_regular
from ocf.format.storage.location import url_scheme
from ocf.interop.ocf import is_ocf_checkpoint
from ocf.interop.tensorflow import dtypes, sstable, strings
from ocf.interop.tensorflow.encoding import check_masked_crc, mask_crc, masked_crc32c
from ocf.interop.tensorflow.entries import BundleHeader, TFEntry, decode_entry, decode_header
from ocf.interop.tensorflow.slice_keys import is_slice_key, slice_key
from ocf.interop.tensorflow.tiling import check_tiling

# The index of a bundle with a million tensors is well under this.
MAX_INDEX_FILE_BYTES = 1 << 30
INDEX_SUFFIX = ".index"


def data_filename(prefix: str, shard: int, num_shards: int) -> str:
    """TensorFlow's DataFilename: ``PREFIX.data-00000-of-00001``.

    Examples:
        >>> ocf.tensorflow.data_filename("train/ckpt-3", 0, 1)
        'train/ckpt-3.data-00000-of-00001'
    """
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def normalize_prefix(prefix: str | os.PathLike[str]) -> str:
    """The checkpoint prefix; a path to ``PREFIX.index`` itself is accepted too."""
    text = os.fspath(prefix)
    if text.endswith(INDEX_SUFFIX) and not os.path.exists(text + INDEX_SUFFIX):
        return text[: -len(INDEX_SUFFIX)]
    return text


class BundleReader:
    """A TensorFlow V2 checkpoint opened for reading.

    Examples:
        >>> with ocf.tensorflow.BundleReader("train/ckpt-3") as bundle:  # TensorFlow not needed
        ...     arrays = {key: bundle.read(key) for key in bundle.keys()}
    """

    def __init__(self, prefix: str | os.PathLike[str], *, verify: bool = True) -> None:
        self.prefix = normalize_prefix(prefix)
        self.index_path = self.prefix + INDEX_SUFFIX
        self.verify = verify
        self.bytes_read = 0
        self._files: dict[int, tuple[BufferedReader, int]] = {}
        data = self._read_index()
        # Tells this checkpoint from one written over it later (ocf.interop).
        self.index_identity = (len(data), crc32c(data))
        with needing(len(data), "decoding the index", path=self.index_path):
            entries = sstable.read_table(data, path=self.index_path, verify=verify)
        if not entries or entries[0][0] != b"":
            raise MalformedError(
                "the first index entry is not the header (empty key)", path=self.index_path
            )
        self.header: BundleHeader = decode_header(entries[0][1], self.index_path)
        self._raw = dict(entries[1:])
        self._keys = [self._tensor_key(k) for k, _ in entries[1:] if not is_slice_key(k)]
        self._entries: dict[str, TFEntry] = {}
        # Per tensor read in order by read_elements: the next element and the CRC so far.
        self._running: dict[str, tuple[int, int]] = {}
        # The last partitioned or string tensor read_elements assembled, for its next piece.
        self._assembled: tuple[str, np.ndarray] | None = None

    def _read_index(self) -> bytes:
        with open_regular(self.index_path, "TensorFlow checkpoint index") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_INDEX_FILE_BYTES:
                raise LimitExceededError(
                    f"index of {size} bytes exceeds the limit of {MAX_INDEX_FILE_BYTES}",
                    path=self.index_path,
                )
            with needing(size, "reading the index", path=self.index_path):
                data = f.read()
        self.bytes_read += len(data)
        return data

    def _tensor_key(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedError(f"index key {raw!r} is not UTF-8", path=self.index_path) from None

    # Keys and entries.

    def keys(self) -> list[str]:
        """The tensor keys in index (bytewise) order, without the header and slice keys."""
        return list(self._keys)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key != "" and key.encode("utf-8") in self._raw

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def entry(self, key: str) -> TFEntry:
        """The decoded and validated entry of ``key``."""
        cached = self._entries.get(key)
        if cached is not None:
            return cached
        raw = key.encode("utf-8")
        if key == "" or is_slice_key(raw) or raw not in self._raw:
            raise NotFoundError("no such tensor in the checkpoint", path=self.index_path, key=key)
        entry = decode_entry(key, self._raw[raw], self.header.num_shards, self.index_path)
        self._entries[key] = entry
        return entry

    def entries(self) -> list[TFEntry]:
        return [self.entry(k) for k in self._keys]

    # Tensors.

    def read(self, key: str) -> np.ndarray:
        """The whole tensor; a partitioned one is assembled from its slices."""
        entry = self.entry(key)
        _check_supported(entry, self.index_path)
        with self._memory_for(entry, key):
            if entry.slices is None:
                return self._read_stored(entry, key)
            return self._assemble(entry)

    def read_slice(self, key: str, index: int) -> np.ndarray:
        """Stored slice ``index`` (as ordered in ``entry(key).slices``) of a partitioned tensor."""
        entry = self.entry(key)
        if entry.slices is None:
            raise InvalidError("the tensor is not partitioned", path=self.index_path, key=key)
        if not 0 <= index < len(entry.slices):
            raise InvalidError(
                f"slice index {index} is outside the {len(entry.slices)} slices",
                path=self.index_path,
                key=key,
            )
        _check_supported(entry, self.index_path)
        part = self._slice_entry(entry, index)
        with self._memory_for(part, key):
            return self._read_stored(part, key)

    def _memory_for(self, entry: TFEntry, key: str) -> AbstractContextManager[None]:
        """Reading ``entry``: out of memory names it, the index and its bytes [R-ERR-003].

        Sizes are checked against the data files before any allocation (the
        module's docstring), so only a valid tensor can need more than is free.
        """
        itemsize = 1 if entry.dtype is None else entry.dtype.itemsize
        return needing(entry.num_elements * itemsize, "reading this tensor",
                       path=self.index_path, key=key)

    def read_elements(self, key: str, begin: int, end: int) -> np.ndarray:
        """Elements ``begin`` to ``end`` (C order, flattened) of tensor ``key``.

        A tensor stored whole with a fixed-width dtype is read from just that
        byte range. Its checksum covers all its bytes, so it is checked when
        the ranges are read in order from the first element to the last (as
        a reader going through a tensor piece by piece does); a tensor read
        out of order is not checked. Partitioned and string tensors are read
        whole, and checked, once for all their pieces (the last one is kept).
        """
        entry = self.entry(key)
        _check_supported(entry, self.index_path)
        if (begin, end) == (0, entry.num_elements):
            return self.read(key).reshape(-1)
        if entry.slices is not None or entry.dtype is None:
            if self._assembled is None or self._assembled[0] != key:
                self._assembled = None  # freed before the next one is read
                self._assembled = (key, self.read(key).reshape(-1))
            part: np.ndarray = self._assembled[1][begin:end].copy()
            return part
        path = self._check_stored(entry, key)
        itemsize = entry.dtype.itemsize
        handle, _ = self._file(entry.shard_id, key)
        buffer = np.empty((end - begin) * itemsize, dtype=np.uint8)
        handle.seek(entry.offset + begin * itemsize)
        got = handle.readinto(buffer.data)
        self.bytes_read += got
        if got != buffer.size:
            raise MalformedError(f"short read: {got} of {buffer.size} bytes", path=path, key=key)
        self._check_in_order(entry, begin, end, buffer, path)
        _check_values(entry, buffer, path, key)
        return buffer.view(entry.dtype)

    def _check_in_order(self, entry: TFEntry, begin: int, end: int, data: np.ndarray,
                        path: str) -> None:
        """Extend the running CRC of ``entry`` by ``data``; check it at the last element."""
        if not self.verify:
            return
        start, crc = self._running.pop(entry.key, (0, 0))
        if begin != start:  # out of order: this pass cannot be checked
            if begin != 0:
                return
            crc = 0
        crc = crc32c(data.data, crc)
        if end < entry.num_elements:
            self._running[entry.key] = (end, crc)
            return
        check_masked_crc(entry.crc32c, mask_crc(crc), path, entry.key)

    def _slice_entry(self, parent: TFEntry, index: int) -> TFEntry:
        assert parent.slices is not None
        assert parent.raw_slices is not None
        raw_key = slice_key(parent.key, parent.raw_slices[index])
        value = self._raw.get(raw_key)
        what = f"slice {index}"
        if value is None:
            raise InvalidError(
                f"{what} has no entry in the index", path=self.index_path, key=parent.key
            )
        entry = decode_entry(parent.key, value, self.header.num_shards, self.index_path)
        expected = tuple(length for _, length in parent.slices[index])
        if entry.slices is not None or entry.tf_dtype != parent.tf_dtype or entry.shape != expected:
            raise InvalidError(
                f"{what} entry (dtype {entry.dtype_name}, shape {list(entry.shape)}) does not "
                f"match the slice (dtype {parent.dtype_name}, shape {list(expected)})",
                path=self.index_path,
                key=parent.key,
            )
        return entry

    def _assemble(self, entry: TFEntry) -> np.ndarray:
        assert entry.slices is not None
        total = entry.num_elements
        parts = [self._slice_entry(entry, i) for i in range(len(entry.slices))]
        covered = sum(p.num_elements for p in parts)
        if covered != total:
            raise InvalidError(
                f"the slices hold {covered} elements, the tensor has {total}",
                path=self.index_path,
                key=entry.key,
            )
        # Before allocating: every slice's size fits its elements and lies within its
        # data file, the slices share no bytes, and they do not overlap (their element
        # counts add up to the tensor's, so they tile it). The output is then no larger
        # than the data files (times the size of a reference, for strings).
        stored = sum(part.size for part in parts)
        shards = {part.shard_id for part in parts}
        for part in parts:
            self._check_stored(part, entry.key)
        available = sum(self._file(shard, entry.key)[1] for shard in shards)
        if stored > available:
            raise InvalidError(
                f"the slices claim {stored} stored bytes, more than the {available} bytes "
                "of their data files (slices share bytes)",
                path=self.index_path,
                key=entry.key,
            )
        check_tiling(entry.slices, self.index_path, entry.key)
        out = np.empty(entry.shape, dtype=object if entry.dtype is None else entry.dtype)
        for sl, part in zip(entry.slices, parts):
            region = tuple(slice(start, start + length) for start, length in sl)
            out[region] = self._read_stored(part, entry.key)
        return out

    def _read_stored(self, entry: TFEntry, key: str) -> np.ndarray:
        count = entry.num_elements
        path = self._check_stored(entry, key)
        buffer = self._read_bytes(entry, path, key)
        if entry.is_string:
            values = strings.decode(
                buffer.data, count, entry.crc32c, verify=self.verify, path=path, key=key
            )
            out = np.empty(count, dtype=object)
            out[:] = values
            return out.reshape(entry.shape)
        if self.verify:
            check_masked_crc(entry.crc32c, masked_crc32c(buffer.data), path, key)
        _check_values(entry, buffer, path, key)
        assert entry.dtype is not None
        return buffer.view(entry.dtype).reshape(entry.shape)

    def _check_stored(self, entry: TFEntry, key: str) -> str:
        """The data file of a stored tensor or slice, after checking that its size fits
        its elements and its bytes lie within the file."""
        path = data_filename(self.prefix, entry.shard_id, self.header.num_shards)
        count = entry.num_elements
        if entry.is_string:
            strings.check_size(entry.size, count, path, key)
        elif entry.dtype is not None and entry.size != count * entry.dtype.itemsize:
            raise InvalidError(
                f"entry holds {entry.size} bytes, {entry.dtype_name}{list(entry.shape)} "
                f"needs {count * entry.dtype.itemsize}",
                path=path,
                key=key,
            )
        _, size = self._file(entry.shard_id, key)
        if entry.offset + entry.size > size:
            raise MalformedError(
                f"tensor bytes [{entry.offset}, {entry.offset + entry.size}) run past the end "
                f"of the {size}-byte data file (truncated?)",
                path=path,
                key=key,
            )
        return path

    def _read_bytes(self, entry: TFEntry, path: str, key: str) -> np.ndarray:
        handle, _ = self._file(entry.shard_id, key)
        buffer = np.empty(entry.size, dtype=np.uint8)
        handle.seek(entry.offset)
        got = handle.readinto(buffer.data)
        self.bytes_read += got
        if got != entry.size:
            raise MalformedError(
                f"short read: {got} of {entry.size} bytes at offset {entry.offset}",
                path=path,
                key=key,
            )
        return buffer

    def _file(self, shard: int, key: str) -> tuple[BufferedReader, int]:
        opened = self._files.get(shard)
        if opened is None:
            path = data_filename(self.prefix, shard, self.header.num_shards)
            handle = open_regular(path, "TensorFlow data file", key=key)  # closed by close()
            opened = (handle, os.fstat(handle.fileno()).st_size)
            self._files[shard] = opened
        return opened

    # Lifetime.

    def close(self) -> None:
        self._assembled = None
        for handle, _ in self._files.values():
            handle.close()
        self._files.clear()

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_supported(entry: TFEntry, path: str) -> None:
    if dtypes.is_supported(entry.tf_dtype):
        return
    if dtypes.is_known(entry.tf_dtype):
        raise UnknownRequiredFeatureError(
            f"dtype {entry.dtype_name} (TensorFlow DataType {entry.tf_dtype}) is not supported",
            path=path,
            key=entry.key,
        )
    raise InvalidError(f"unknown TensorFlow DataType {entry.tf_dtype}", path=path, key=entry.key)


def _check_values(entry: TFEntry, stored: np.ndarray, path: str, key: str) -> None:
    """Refuse a sub-byte element whose byte has a bit set above the type's width."""
    bad = dtypes.first_out_of_range(entry.tf_dtype, stored)
    if bad is None:
        return
    raise InvalidError(
        dtypes.out_of_range_message(entry.tf_dtype, bad, int(stored[bad])), path=path, key=key
    )


def is_tensorflow_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether local ``path`` is a TensorFlow checkpoint and not an OCF one.

    True for a PREFIX whose PREFIX.index exists, for a PREFIX.index path, and
    for a directory holding TensorFlow's ``checkpoint`` state file; never for
    a URL or an OCF checkpoint. Imports no TensorFlow.

    Examples:
        >>> ocf.tensorflow.is_tensorflow_checkpoint("train/ckpt-3")  # train/ckpt-3.index exists
        True
    """
    if url_scheme(path) is not None or is_ocf_checkpoint(path):
        return False
    text = os.fspath(path)
    if os.path.isdir(text):
        return os.path.isfile(os.path.join(text, "checkpoint"))
    if text.endswith(INDEX_SUFFIX) and os.path.isfile(text):
        return True
    return os.path.isfile(text + INDEX_SUFFIX)
