"""Writing a TensorFlow V2 checkpoint (a "tensor bundle") that TensorFlow reads.

What TensorFlow's BundleWriter writes, byte for byte where it matters:
tensors are appended to the data file in the order they are added, densely
packed (no alignment padding), each with the masked CRC-32C of its stored
bytes; the index is an SSTable with the header entry (empty key: number of
data files, version producer 1) first and every other key in bytewise
order. Partitioned tensors (add_slice) get a parent entry listing their
slices and one entry per slice under its binary slice key.

The TensorFlow dtype follows the array's NumPy dtype (ocf.interop.tensorflow.dtypes):
ml_dtypes int4, uint4, int2, uint2 and float4_e2m1fn arrays are written one
byte per element, the value in the low bits, as TensorFlow writes them (an
element whose byte has a higher bit set is refused). The quantized types
share their NumPy dtype with plain integers, so they are written only when
asked for: ``add(key, int8_array, tf_dtype="qint8")``.

With ``max_shard_bytes`` the tensors are spread over several data files: a
new one is started when the next tensor would push the current one past the
limit (a tensor larger than the limit gets a file of its own; tensors are
never split).

A prefix whose ``.index`` exists is complete, also across a crash or power
cut and when an earlier checkpoint is overwritten: the data files and the
index are written under temporary names and fsynced; finish() then removes
an existing ``PREFIX.index`` (and fsyncs the directory) before any data file
is renamed over an old one, renames the data files into place, fsyncs the
directory, renames the index into place last, and fsyncs the directory
again. A crash part way leaves no index (the old checkpoint is gone, the new
one not yet there), never an old index beside new data, and temporary files
(``*.tempstate<hex>``) a reader ignores.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from ocf.format.commit import fsync_dir
from ocf.format.errors import InvalidError
from ocf.interop.tensorflow import dtypes, strings
from ocf.interop.tensorflow.bundle_reader import INDEX_SUFFIX, data_filename
from ocf.interop.tensorflow.dtypes import TFDType
from ocf.interop.tensorflow.encoding import masked_crc32c
from ocf.interop.tensorflow.entries import CONSUMER_VERSION
from ocf.interop.tensorflow.slice_keys import is_slice_key, slice_key
from ocf.interop.tensorflow.sstable import TableBuilder
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb

Box = tuple[tuple[int, int], ...]


@dataclass
class _Shard:
    """One data file being written under its temporary name."""

    temp_path: str
    handle: BinaryIO
    size: int = 0


class BundleWriter:
    """Writes one TensorFlow checkpoint at ``prefix``; call finish() (or use ``with``).

    Examples:
        >>> with ocf.tensorflow.BundleWriter("exported/ckpt-1") as bundle:
        ...     bundle.add("dense/kernel", np.ones((4, 2), np.float32))
        ... # tf.train.load_checkpoint("exported/ckpt-1") reads it
    """

    def __init__(
        self, prefix: str | os.PathLike[str], *, max_shard_bytes: int | None = None
    ) -> None:
        if max_shard_bytes is not None and max_shard_bytes <= 0:
            raise InvalidError(f"max_shard_bytes must be positive, not {max_shard_bytes}")
        self.prefix = os.fspath(prefix)
        # As TensorFlow's BundleWriter does, create the prefix's directory.
        os.makedirs(os.path.dirname(os.path.abspath(self.prefix)), exist_ok=True)
        self._max_shard_bytes = max_shard_bytes
        self._token = uuid.uuid4().hex
        self._shards: list[_Shard] = []
        self._entries: dict[bytes, pb.BundleEntryProto] = {}
        self._boxes: dict[str, list[Box]] = {}
        self._finished = False

    # Adding tensors.

    def add(self, key: str, array: np.ndarray, *, tf_dtype: TFDType | None = None) -> None:
        """Add a whole tensor: a numeric/bool/bfloat16/int4/... array, or an array of
        bytes/str.

        ``tf_dtype`` (a DataType value such as ``tf.qint8.as_datatype_enum``, or a name
        such as ``"qint8"`` or ``"DT_QINT8"``) stores it as that TensorFlow type; the
        array must then have the NumPy dtype TensorFlow's reader gives the type (int8
        for qint8). Without it the type follows the array's dtype, and plain integers
        stay plain.
        """
        raw = self._new_key(key)
        array = np.asarray(array)
        self._entries[raw] = self._store(key, array, _tf_dtype(key, array, tf_dtype))

    def add_slice(
        self,
        key: str,
        full_shape: Sequence[int],
        start: Sequence[int],
        array: np.ndarray,
        *,
        tf_dtype: TFDType | None = None,
    ) -> None:
        """Add the slice of partitioned tensor ``key`` that starts at ``start``
        (``tf_dtype`` as for :meth:`add`; every slice of a tensor has the same type)."""
        array = np.asarray(array)
        full = tuple(int(d) for d in full_shape)
        box = self._slice_box(key, full, tuple(int(s) for s in start), array.shape)
        code = _tf_dtype(key, array, tf_dtype)
        parent = self._parent(key, full, code)
        extents = [(s, n) for s, n in box]
        try:
            self._entries[slice_key(key, extents)] = self._store(key, array, code)
        except BaseException:
            if not parent.slices:  # the parent was made for this slice alone
                del self._entries[key.encode("utf-8")]
            raise
        self._boxes.setdefault(key, []).append(box)
        proto = parent.slices.add()
        for s, n in extents:
            proto.extents.add(start=s, length=n)

    def _new_key(self, key: str) -> bytes:
        self._check_open()
        if not isinstance(key, str) or key == "":
            raise InvalidError(f"tensor keys must be non-empty strings, not {key!r}")
        raw = key.encode("utf-8")
        if is_slice_key(raw):
            raise InvalidError("tensor keys must not start with NUL", key=key)
        if raw in self._entries:
            raise InvalidError("tensor key added twice", key=key)
        return raw

    def _parent(self, key: str, full: tuple[int, ...], code: int) -> pb.BundleEntryProto:
        raw = key.encode("utf-8")
        parent = self._entries.get(raw) if key in self._boxes else None
        if parent is None:
            parent = pb.BundleEntryProto(dtype=code, shape=_shape_proto(full))  # type: ignore[arg-type]
            self._entries[self._new_key(key)] = parent
        elif parent.dtype != code or tuple(d.size for d in parent.shape.dims) != full:
            raise InvalidError(
                f"slice of dtype {dtypes.name(code)} and full shape {list(full)} does not match "
                f"earlier slices ({dtypes.name(parent.dtype)}, "
                f"{[d.size for d in parent.shape.dims]})",
                key=key,
            )
        return parent

    def _slice_box(
        self, key: str, full: tuple[int, ...], start: tuple[int, ...], shape: tuple[int, ...]
    ) -> Box:
        self._check_open()
        if not len(full) == len(start) == len(shape):
            raise InvalidError(
                f"full shape {list(full)}, start {list(start)} and slice shape {list(shape)} "
                "differ in rank",
                key=key,
            )
        if any(s < 0 or s + n > d for s, n, d in zip(start, shape, full)):
            raise InvalidError(
                f"slice at {list(start)} of shape {list(shape)} is outside {list(full)}", key=key
            )
        box = tuple(zip(start, shape))
        for other in self._boxes.get(key, []):
            if all(s < os_ + on and os_ < s + n for (s, n), (os_, on) in zip(box, other)):
                raise InvalidError(f"slice at {list(start)} overlaps an earlier slice", key=key)
        return box

    # Data files.

    def _store(self, key: str, array: np.ndarray, code: int) -> pb.BundleEntryProto:
        if code == dtypes.DT_STRING:
            data, crc = strings.encode(_string_values(key, array))
            payload: bytes | memoryview = data
        else:
            numpy_dtype = dtypes.numpy_dtype(code)
            contiguous = np.ascontiguousarray(array, dtype=numpy_dtype)
            _check_values(key, code, contiguous)
            payload = contiguous.reshape(-1).view(np.uint8).data
            crc = masked_crc32c(payload)
        shard_id, offset = self._append(payload)
        return pb.BundleEntryProto(
            dtype=code,  # type: ignore[arg-type]
            shape=_shape_proto(array.shape),
            shard_id=shard_id,
            offset=offset,
            size=len(payload),
            crc32c=crc,
        )

    def _append(self, payload: bytes | memoryview) -> tuple[int, int]:
        """Write ``payload`` to the current data file (starting a new one if due)."""
        limit = self._max_shard_bytes
        if not self._shards or (
            limit is not None
            and self._shards[-1].size > 0
            and self._shards[-1].size + len(payload) > limit
        ):
            self._open_shard()
        shard = self._shards[-1]
        offset = shard.size
        shard.handle.write(payload)
        shard.size += len(payload)
        return len(self._shards) - 1, offset

    def _open_shard(self) -> None:
        if self._shards:
            _close_durably(self._shards[-1].handle)
        temp = f"{self.prefix}.data-{len(self._shards):05d}.tempstate{self._token}"
        self._shards.append(_Shard(temp, open(temp, "wb")))  # noqa: SIM115 - closed by finish

    # Finishing.

    def finish(self) -> None:
        """Publish the checkpoint: the data files, then the index (see the module doc)."""
        self._check_open()
        try:
            if not self._shards:
                self._open_shard()  # TensorFlow writes a data file even when it is empty
            _close_durably(self._shards[-1].handle)  # earlier ones were closed when left
            count = len(self._shards)
            temp_index = self._write_index(count)
            directory = Path(os.path.abspath(self.prefix)).parent
            index = self.prefix + INDEX_SUFFIX
            if os.path.lexists(index):  # an old index must never describe new data
                os.remove(index)
                fsync_dir(directory)
            for i, shard in enumerate(self._shards):
                os.replace(shard.temp_path, data_filename(self.prefix, i, count))
            fsync_dir(directory)
            os.replace(temp_index, index)
            fsync_dir(directory)
        except BaseException:
            self.abort()
            raise
        self._finished = True

    def _write_index(self, num_shards: int) -> str:
        """Write and fsync the index under its temporary name, which is returned."""
        header = pb.BundleHeaderProto(
            num_shards=num_shards, version=pb.VersionDef(producer=CONSUMER_VERSION)
        )
        table = TableBuilder()
        table.add(b"", header.SerializeToString(deterministic=True))
        for raw in sorted(self._entries):
            table.add(raw, self._entries[raw].SerializeToString(deterministic=True))
        temp = self._temp_index()
        with open(temp, "wb") as f:
            f.write(table.finish())
            f.flush()
            os.fsync(f.fileno())
        return temp

    def _temp_index(self) -> str:
        return f"{self.prefix}{INDEX_SUFFIX}.tempstate{self._token}"

    def abort(self) -> None:
        """Close and remove every temporary file; nothing of this writer remains."""
        for shard in self._shards:
            shard.handle.close()
            if os.path.exists(shard.temp_path):
                os.remove(shard.temp_path)
        temp_index = self._temp_index()
        if os.path.exists(temp_index):
            os.remove(temp_index)
        self._finished = True

    def _check_open(self) -> None:
        if self._finished:
            raise InvalidError("the BundleWriter is already finished or aborted")

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        elif not self._finished:
            self.abort()


def _tf_dtype(key: str, array: np.ndarray, requested: TFDType | None) -> int:
    """The DataType to store ``array`` as: ``requested``, or the one of its NumPy dtype."""
    if requested is None:
        code = dtypes.from_numpy(array.dtype)
        if code is None:
            raise InvalidError(f"NumPy dtype {array.dtype} has no TensorFlow equivalent", key=key)
        return code
    code = dtypes.resolve(requested)
    if code is None or not dtypes.is_supported(code):
        raise InvalidError(f"tf_dtype {requested!r} is no TensorFlow dtype this writer "
                           "writes", key=key)
    expected = dtypes.numpy_dtype(code)
    fits = array.dtype.kind in "OSU" if expected is None else array.dtype.name == expected.name
    if not fits:
        wanted = "bytes or str" if expected is None else expected.name
        raise InvalidError(f"a {dtypes.name(code)} tensor is written from an array of "
                           f"{wanted}, not {array.dtype}", key=key)
    return code


def _check_values(key: str, code: int, array: np.ndarray) -> None:
    """Refuse sub-byte elements whose byte has a bit set above the type's width (an
    ml_dtypes view of arbitrary bytes can hold them): TensorFlow never writes them."""
    bad = dtypes.first_out_of_range(code, array)
    if bad is not None:
        byte = int(array.reshape(-1).view(np.uint8)[bad])
        raise InvalidError(dtypes.out_of_range_message(code, bad, byte), key=key)


def _string_values(key: str, array: np.ndarray) -> list[bytes]:
    values: list[bytes] = []
    for item in array.reshape(-1).tolist():
        if isinstance(item, bytes):
            values.append(item)
        elif isinstance(item, str):
            values.append(item.encode("utf-8"))
        else:
            raise InvalidError(
                f"string tensors hold bytes or str, not {type(item).__name__}", key=key
            )
    return values


def _shape_proto(shape: Sequence[int]) -> pb.TensorShapeProto:
    proto = pb.TensorShapeProto()
    for dim in shape:
        proto.dims.add(size=int(dim))
    return proto


def _close_durably(handle: BinaryIO) -> None:
    if handle.closed:
        return
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
