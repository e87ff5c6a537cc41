"""Decoding and validating the values of a bundle index: the header and tensor entries.

A hostile index can say anything, so every field is checked before it is
used: dtype codes, shapes (no unknown rank, no negative dimension, bounded
rank and element count), shard ids against the header, offsets and sizes
against the largest exact file offset, and slices against the full shape.
Unsupported dtypes are not an error here: TFEntry records the code and the
reader refuses the tensor only when it is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    UnsupportedVersionError,
)
from ocf.format.limits import MAX_ELEMENTS, MAX_FILE_OFFSET, MAX_SHARDS, nonzero_product
from ocf.interop.tensorflow import dtypes
from ocf.interop.tensorflow.encoding import Path
from ocf.interop.tensorflow.slice_keys import FULL_EXTENT
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb

# TensorFlow's kTensorBundleVersion: the consumer version this reader is.
CONSUMER_VERSION = 1
# TensorFlow's TensorShape allows at most 254 dimensions.
MAX_RANK = 254
MAX_SLICES = 1 << 16

Extent = tuple[int, int]
# One slice of a partitioned tensor: (start, length) per dimension, as TensorSliceProto.
SliceExtents = tuple[Extent, ...]


@dataclass(frozen=True)
class BundleHeader:
    """The header entry (empty key) of a bundle index.

    Examples:
        >>> with ocf.tensorflow.BundleReader("train/ckpt-3") as bundle:
        ...     print(bundle.header.num_shards, bundle.header.producer)
    """

    num_shards: int
    endianness: str  # "little" or "big"
    producer: int
    min_consumer: int
    bad_consumers: tuple[int, ...]


@dataclass(frozen=True)
class TFEntry:
    """One tensor of a bundle, decoded and validated.

    ``slices`` is None for a tensor stored whole; for a partitioned tensor it
    gives per stored slice the (start, length) of each dimension, a length
    absent from the file resolved to the whole dimension. ``shard_id``,
    ``offset``, ``size`` and ``crc32c`` locate the stored bytes of a tensor
    stored whole (they mean nothing for a partitioned one).

    Examples:
        >>> with ocf.tensorflow.BundleReader("train/ckpt-3") as bundle:
        ...     entry = bundle.entry("dense/kernel/.ATTRIBUTES/VARIABLE_VALUE")
        ...     print(entry.tf_dtype, entry.shape, entry.size)
    """

    key: str
    dtype: np.dtype[np.generic] | None  # None for DT_STRING and for unsupported dtypes
    tf_dtype: int
    shape: tuple[int, ...]
    slices: tuple[SliceExtents, ...] | None
    shard_id: int = 0
    offset: int = 0
    size: int = 0
    crc32c: int = 0
    # Per slice, the extents as stored: length -1 where the file gives none.
    # The slice's index key is built from these.
    raw_slices: tuple[SliceExtents, ...] | None = None

    @property
    def dtype_name(self) -> str:
        """A short dtype name: "float32", "bfloat16", "string", "resource", ..."""
        return dtypes.name(self.tf_dtype)

    @property
    def is_string(self) -> bool:
        return self.tf_dtype == dtypes.DT_STRING

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape, dtype=object))


def decode_header(value: bytes, path: Path) -> BundleHeader:
    """The validated header; refuses big-endian data and incompatible versions."""
    try:
        header = pb.BundleHeaderProto.FromString(value)
    except DecodeError as error:
        raise MalformedError(f"undecodable bundle header: {error}", path=path) from None
    if header.num_shards < 1:
        raise InvalidError(f"bundle header has num_shards {header.num_shards}", path=path)
    if header.num_shards > MAX_SHARDS:
        raise LimitExceededError(
            f"bundle header has {header.num_shards} shards, the limit is {MAX_SHARDS}", path=path
        )
    endianness = {
        pb.BundleHeaderProto.ENDIANNESS_UNSPECIFIED: "little",
        pb.BundleHeaderProto.ENDIANNESS_BIG: "big",
    }.get(header.endianness)
    if endianness is None:
        raise InvalidError(f"bundle header has unknown endianness {header.endianness}", path=path)
    if endianness == "big":
        raise UnsupportedVersionError("big-endian tensor data is not supported", path=path)
    version = header.version
    if version.min_consumer > CONSUMER_VERSION or CONSUMER_VERSION in version.bad_consumers:
        raise UnsupportedVersionError(
            f"bundle needs consumer version >= {version.min_consumer} and not in "
            f"{list(version.bad_consumers)}; this reader is version {CONSUMER_VERSION}",
            path=path,
        )
    return BundleHeader(
        header.num_shards,
        endianness,
        version.producer,
        version.min_consumer,
        tuple(version.bad_consumers),
    )


def decode_entry(key: str, value: bytes, num_shards: int, path: Path) -> TFEntry:
    """The validated entry stored under ``key``."""
    try:
        proto = pb.BundleEntryProto.FromString(value)
    except DecodeError as error:
        raise MalformedError(f"undecodable bundle entry: {error}", path=path, key=key) from None
    shape = _shape(proto.shape, path, key)
    dtype = dtypes.numpy_dtype(proto.dtype) if dtypes.is_supported(proto.dtype) else None
    if proto.slices:
        raw = _slices(proto, shape, path, key)
        resolved = tuple(
            tuple((s, dim if n == FULL_EXTENT else n) for (s, n), dim in zip(sl, shape))
            for sl in raw
        )
        return TFEntry(key, dtype, proto.dtype, shape, resolved, raw_slices=raw)
    _location(proto, num_shards, path, key)
    return TFEntry(
        key,
        dtype,
        proto.dtype,
        shape,
        None,
        proto.shard_id,
        proto.offset,
        proto.size,
        proto.crc32c,
    )


def _shape(shape: pb.TensorShapeProto, path: Path, key: str) -> tuple[int, ...]:
    if shape.unknown_rank:
        raise InvalidError("stored tensor has an unknown rank", path=path, key=key)
    if len(shape.dims) > MAX_RANK:
        raise LimitExceededError(
            f"rank {len(shape.dims)} exceeds the limit of {MAX_RANK}", path=path, key=key
        )
    dims = tuple(d.size for d in shape.dims)
    if any(d < 0 for d in dims):
        raise InvalidError(f"shape {list(dims)} has a negative dimension", path=path, key=key)
    if nonzero_product(dims) > MAX_ELEMENTS:
        raise LimitExceededError(
            f"shape {list(dims)} has more than {MAX_ELEMENTS} elements", path=path, key=key
        )
    return dims


def _location(proto: pb.BundleEntryProto, num_shards: int, path: Path, key: str) -> None:
    if not 0 <= proto.shard_id < num_shards:
        raise InvalidError(
            f"shard_id {proto.shard_id} is outside the {num_shards} data files", path=path, key=key
        )
    if proto.offset < 0 or proto.size < 0:
        raise InvalidError(
            f"negative offset {proto.offset} or size {proto.size}", path=path, key=key
        )
    if proto.offset + proto.size > MAX_FILE_OFFSET:
        raise LimitExceededError(
            f"offset {proto.offset} + size {proto.size} exceeds {MAX_FILE_OFFSET}",
            path=path,
            key=key,
        )


def _slices(
    proto: pb.BundleEntryProto, shape: tuple[int, ...], path: Path, key: str
) -> tuple[SliceExtents, ...]:
    if len(proto.slices) > MAX_SLICES:
        raise LimitExceededError(
            f"{len(proto.slices)} slices exceed the limit of {MAX_SLICES}", path=path, key=key
        )
    out: list[SliceExtents] = []
    for i, sl in enumerate(proto.slices):
        if len(sl.extents) != len(shape):
            raise InvalidError(
                f"slice {i} has {len(sl.extents)} extents for a rank-{len(shape)} tensor",
                path=path,
                key=key,
            )
        out.append(tuple(_extent(e, dim, i, path, key) for e, dim in zip(sl.extents, shape)))
    return tuple(out)


def _extent(
    extent: pb.TensorSliceProto.Extent, dim: int, index: int, path: Path, key: str
) -> Extent:
    start = extent.start
    length = extent.length if extent.HasField("length") else FULL_EXTENT
    if length == FULL_EXTENT:
        if start != 0:
            raise InvalidError(
                f"slice {index} covers a whole dimension from start {start}", path=path, key=key
            )
        return (0, FULL_EXTENT)
    if start < 0 or length < 0 or start + length > dim:
        raise InvalidError(
            f"slice {index} extent (start {start}, length {length}) is outside "
            f"the dimension of size {dim}",
            path=path,
            key=key,
        )
    return (start, length)
