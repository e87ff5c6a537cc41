"""TensorFlow's own checkpoint files, read and written without TensorFlow.

A TensorFlow V2 checkpoint (``tf.train.Checkpoint``, ``tf.compat.v1.train.Saver``,
Keras ``save_weights`` in TF format) is a *tensor bundle* named by a prefix:

``PREFIX.index``
    A LevelDB-style SSTable (ocf.tensorflow.sstable): sorted keys, each
    mapped to a protobuf message. The empty key holds a BundleHeaderProto
    (number of data files, endianness, version); every other key a
    BundleEntryProto (dtype, shape, data file, offset, size, masked
    CRC-32C), or for a partitioned tensor the list of its slices, each
    stored under a binary slice key (ocf.tensorflow.slice_keys).
``PREFIX.data-NNNNN-of-MMMMM``
    The tensors' bytes, densely packed in the order they were added:
    little-endian row-major elements, strings in TensorFlow's layout
    (ocf.tensorflow.strings).
``checkpoint``
    A text-format CheckpointState naming the latest prefix of a directory
    (ocf.tensorflow.state).

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
reader gives it (ocf.tensorflow.dtypes). Big-endian bundles are refused.

Importing this package registers TensorFlow checkpoints as a foreign format
of ocf.objects.sources, so ``ocf.restore``, ``ocf.Saver`` and the name-based
loaders read TensorFlow prefixes; ``import ocf`` does it.
"""

from __future__ import annotations

from ocf.tensorflow.bundle_reader import BundleReader, data_filename, is_tf_checkpoint
from ocf.tensorflow.bundle_writer import BundleWriter
from ocf.tensorflow.entries import BundleHeader, TFEntry
from ocf.tensorflow.source import TFSource, is_tensorflow_checkpoint
from ocf.tensorflow.state import read_checkpoint_state, write_checkpoint_state

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
