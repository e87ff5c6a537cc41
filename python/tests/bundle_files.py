"""Hand-built TensorFlow bundle files for the tests of ocf.tensorflow: a header, entries,
an index table and a data file, byte by byte (tf_support builds the table itself).

Shared by test_tf_bundle_reading.py, test_tf_bundle_hostile.py,
test_tf_bundle_partitioned.py, test_tf_bundle_codecs.py and test_tf_bundle_crash.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tf_support
from tf_support import table

from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb

# The package's sources, for child processes that import ocf.
SRC = Path(__file__).resolve().parents[1] / "src"


def header(num_shards: int = 1, **version: Any) -> bytes:
    return pb.BundleHeaderProto(
        num_shards=num_shards, version=pb.VersionDef(producer=1, **version)
    ).SerializeToString()


def entry(**fields: Any) -> bytes:
    shape = fields.pop("shape", [])
    proto = pb.BundleEntryProto(**fields)
    for dim in shape:
        proto.shape.dims.add(size=dim)
    return proto.SerializeToString()


def sliced(shape: list[int], *extents: dict[str, int]) -> bytes:
    """A partitioned float32 parent entry with one slice of these extents."""
    return entry(dtype=1, shape=shape, slices=[pb.TensorSliceProto(extents=list(extents))])


def write_files(
    tmp_path: Path, entries: list[tuple[bytes, bytes]], data: bytes = b"", **kwargs: Any
) -> Path:
    prefix = tmp_path / "ckpt"
    (tmp_path / "ckpt.index").write_bytes(table([entries], **kwargs))
    (tmp_path / "ckpt.data-00000-of-00001").write_bytes(data)
    return prefix


FLOATS = np.array([1.0, 2.0, 3.0], np.float32).tobytes()


def float_entry(**overrides: Any) -> bytes:
    fields = {"dtype": 1, "shape": [3], "size": 12, "crc32c": tf_support.masked(FLOATS)}
    return entry(**{**fields, **overrides})


# TensorFlow's DataType values of the sub-byte types (types.proto), and bits per value.
SUB_BYTE_CODES = {"int4": (29, 4), "uint4": (30, 4), "int2": (31, 2), "uint2": (32, 2),
                  "float4_e2m1fn": (33, 4)}


def one_tensor_files(tmp_path: Path, code: int, shape: list[int], data: bytes) -> Path:
    value = entry(dtype=code, shape=shape, size=len(data), crc32c=tf_support.masked(data))
    return write_files(tmp_path, [(b"", header()), (b"x", value)], data)
