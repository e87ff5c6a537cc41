"""TensorFlow's own checkpoint files, read and written without TensorFlow.

A TensorFlow V2 checkpoint (``tf.train.Checkpoint``, ``tf.compat.v1.train.Saver``,
Keras ``save_weights`` in TF format) is a *tensor bundle* named by a prefix:

``PREFIX.index``
    A LevelDB-style SSTable (ocf.interop.tensorflow.sstable): sorted keys, each
    mapped to a protobuf message. The empty key holds a BundleHeaderProto
    (number of data files, endianness, version); every other key a
    BundleEntryProto (dtype, shape, data file, offset, size, masked
    CRC-32C), or for a partitioned tensor the list of its slices, each
    stored under a binary slice key (ocf.interop.tensorflow.slice_keys).
``PREFIX.data-NNNNN-of-MMMMM``
    The tensors' bytes, densely packed in the order they were added:
    little-endian row-major elements, strings in TensorFlow's layout
    (ocf.interop.tensorflow.strings).
``checkpoint``
    A text-format CheckpointState naming the latest prefix of a directory
    (ocf.interop.tensorflow.state).

The messages are declared by OCF with TensorFlow's field numbers in
proto/ocf/tensorflow/v1 (generated into ocf.tensorflow.v1). Everything here
runs on OCF's own dependencies (NumPy, protobuf, crc32c, ml-dtypes):
TensorFlow is never imported. Every file is treated as hostile; errors are
the categories of ocf.format.errors (MALFORMED, INTEGRITY, NOT_FOUND, ...).

Supported dtypes: every one TensorFlow stores in a bundle except resource
and variant (listed, refused when read): float16/32/64, bfloat16, the float8
variants, int8..int64, uint8..uint64, complex64/128, bool, string, the
sub-byte int4, uint4, int2, uint2 and float4_e2m1fn (one byte per element,
ml_dtypes arrays) and the quantized qint8, quint8, qint16, quint16 and
qint32 (plain integer arrays, written with ``BundleWriter.add(...,
tf_dtype="qint8")``). Each is read with the NumPy dtype TensorFlow's own
reader gives it (ocf.interop.tensorflow.dtypes). Big-endian bundles are refused.

The code lives in ocf.interop.tensorflow, one of the formats of
ocf.interop.registry, through which ``ocf.open``, ``ocf.restore``,
``ocf.Saver``, the name-based loaders and every adapter read TensorFlow
prefixes whatever was imported first. This package is its public face: the
names below load on first use (so that the generated messages in
ocf.tensorflow.v1, which the bundle code imports, load without it).
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing: type checkers read it as True.
TYPE_CHECKING = False

# Each public name and the module that defines it, loaded on first use (PEP 562).
_PUBLIC_MODULES = {
    "BundleHeader": "ocf.interop.tensorflow.entries",
    "BundleReader": "ocf.interop.tensorflow.bundle_reader",
    "BundleWriter": "ocf.interop.tensorflow.bundle_writer",
    "TFEntry": "ocf.interop.tensorflow.entries",
    "TFSource": "ocf.interop.tensorflow.source",
    "data_filename": "ocf.interop.tensorflow.bundle_reader",
    "is_tensorflow_checkpoint": "ocf.interop.tensorflow.bundle_reader",
    "is_tf_checkpoint": "ocf.interop.tensorflow.bundle_reader",
    "read_checkpoint_state": "ocf.interop.tensorflow.state",
    "write_checkpoint_state": "ocf.interop.tensorflow.state",
}

# Spelled out for tools that read it without running the code (linters, mkdocstrings).
__all__ = [
    "BundleHeader",
    "BundleReader",
    "BundleWriter",
    "TFEntry",
    "TFSource",
    "data_filename",
    "is_tensorflow_checkpoint",
    "is_tf_checkpoint",
    "read_checkpoint_state",
    "write_checkpoint_state",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ loads these
    from ocf.interop.tensorflow.bundle_reader import (
        BundleReader,
        data_filename,
        is_tensorflow_checkpoint,
    )
    from ocf.interop.tensorflow.bundle_reader import (
        is_tensorflow_checkpoint as is_tf_checkpoint,
    )
    from ocf.interop.tensorflow.bundle_writer import BundleWriter
    from ocf.interop.tensorflow.entries import BundleHeader, TFEntry
    from ocf.interop.tensorflow.source import TFSource
    from ocf.interop.tensorflow.state import read_checkpoint_state, write_checkpoint_state


def __getattr__(name: str) -> object:
    module_name = _PUBLIC_MODULES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ocf.tensorflow' has no attribute {name!r}")
    # is_tf_checkpoint: the name is_tensorflow_checkpoint had before 0.2.0, kept working.
    defined = "is_tensorflow_checkpoint" if name == "is_tf_checkpoint" else name
    value = getattr(importlib.import_module(module_name), defined)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
