"""TensorFlow checkpoints to OCF checkpoints and back, without TensorFlow.

``to_ocf("train/ckpt-3", "ckpt.ocf")`` (``ocf convert train/ckpt-3
ckpt.ocf``) writes an OCF checkpoint holding every tensor of the TensorFlow
checkpoint under its TensorFlow key, with an object graph that mirrors
TensorFlow's node for node: edges, attributes, slot variables, objects
reachable by several paths (ocf.interop.tensorflow.objects). A partitioned tensor
keeps its slices as an OCF tensor stored in slices [R-SLICE-001]. A
``tf.compat.v1.train.Saver`` checkpoint, which has no object graph, becomes
a name-based OCF checkpoint.

``from_ocf("ckpt.ocf", "export/ckpt")`` (``ocf convert ckpt.ocf --to
tensorflow export/ckpt``) writes ``export/ckpt.index`` and its data files,
which ``tf.train.load_checkpoint`` reads and ``tf.train.Checkpoint.restore``
restores into matching TensorFlow objects, slot variables included: the
object graph becomes a ``_CHECKPOINTABLE_OBJECT_GRAPH``. Keys that came
from TensorFlow are kept; keys OCF derived from its canonical paths become
the keys TensorFlow derives (``model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``),
and OCF's attribute ``value`` becomes ``VARIABLE_VALUE``. TensorFlow has no
place for OCF metadata (the checkpoint's or the objects'), which is dropped
with a warning; no ``checkpoint`` state file is written.

TensorFlow dtypes that OCF lacks are stored as OCF dtypes holding the same
bytes, their TensorFlow dtype recorded in the metadata entry
``tensorflow.dtypes`` (key to TensorFlow's dtype name), from which
:func:`from_ocf` restores them:

- the float8 ``fnuz`` variants as unsigned integers of their width (uint8);
- the sub-byte types int4, uint4, int2, uint2 and float4_e2m1fn as uint8,
  one byte per element as TensorFlow stores it (the value in the low bits,
  the others zero: int4 -2 is 14);
- the quantized types qint8, quint8, qint16, quint16 and qint32 as the plain
  integers TensorFlow's reader returns for them (int8, uint8, int16, uint16,
  int32), so their values read as TensorFlow reads them.

Only a tensor whose OCF dtype would come back as another TensorFlow dtype
gets an entry; converting back checks that the recorded dtype has the
stored width and, for sub-byte types, that every byte is a value of it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError, OCFError
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import Node, ObjectGraph
from ocf.format.reader import Reader
from ocf.format.writer import Writer
from ocf.interop.output import warn_dropped, with_path, written
from ocf.interop.tensorflow.bundle_reader import BundleReader
from ocf.interop.tensorflow.bundle_writer import BundleWriter
from ocf.interop.tensorflow.dtypes import from_numpy, is_supported, numpy_dtype, resolve
from ocf.interop.tensorflow.dtypes import name as tf_name
from ocf.interop.tensorflow.entries import TFEntry
from ocf.interop.tensorflow.objects import (
    FULL_NAMES,
    OBJECT_GRAPH_KEY,
    REGISTERED_SAVER,
    read_tf_graph,
    tensorflow_keys,
    tf_graph,
)
from ocf.interop.tensorflow.source import resolve_prefix

TF_DTYPES = "tensorflow.dtypes"
_OWN_METADATA = (FULL_NAMES, REGISTERED_SAVER)


# -- TensorFlow -> OCF --------------------------------------------------------------


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the TensorFlow checkpoint ``src`` (a prefix, ``PREFIX.index``, or a
    directory with a ``checkpoint`` file) into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    with BundleReader(resolve_prefix(src)) as bundle:
        stored = bundle.keys()
        keys = [k for k in stored if k != OBJECT_GRAPH_KEY]
        graph = read_tf_graph(bundle, keys)
        entries = [bundle.entry(key) for key in keys]
        stand_ins: dict[str, MetadataValue] = {
            e.key: e.dtype_name for e in entries if _needs_record(e)}
        metadata = {TF_DTYPES: stand_ins} if stand_ins else None
        with Writer(dst, metadata=metadata, **options) as writer:
            for entry in entries:
                _copy_tensor(bundle, entry, writer)
            if graph is not None:
                writer.set_object_graph(graph.nodes)


def _needs_record(entry: TFEntry) -> bool:
    """Whether the tensor's OCF dtype would come back as another TensorFlow dtype."""
    if entry.dtype is None:
        return False
    stored = _stand_in_dtype(entry.dtype)
    return from_numpy(stored) != entry.tf_dtype


def _stand_in_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype OCF stores ``dtype`` as: itself, or unsigned integers of its width."""
    return np.dtype(f"<u{dtype.itemsize}") if _ocf_lacks(dtype) else dtype


def _ocf_lacks(dtype: np.dtype[Any]) -> bool:
    try:
        dtypes.for_array(np.empty(0, dtype))
    except InvalidError:
        return True
    return False


def _stand_in(array: np.ndarray) -> np.ndarray:
    """``array`` as OCF can store it: the same bits as unsigned integers when OCF has no
    dtype for it."""
    if array.dtype == object:
        return array
    return array.view(_stand_in_dtype(array.dtype))


def _copy_tensor(bundle: BundleReader, entry: TFEntry, writer: Writer) -> None:
    try:
        # A slice OCF cannot store (an empty one) makes the tensor stored whole.
        if entry.slices is None or any(n == 0 for box in entry.slices for _, n in box):
            array = _stand_in(bundle.read(entry.key))
            writer.write(entry.key, array)
            written(array.nbytes)
            return
        for i, extents in enumerate(entry.slices):
            start = [s for s, _ in extents]
            array = _stand_in(bundle.read_slice(entry.key, i))
            writer.write_slice(entry.key, array, start, entry.shape)
            written(array.nbytes)
    except OCFError as exc:
        raise with_path(exc, bundle.prefix, entry.key) from None


# -- OCF -> TensorFlow --------------------------------------------------------------


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
             max_shard_bytes: int | None = None) -> None:
    """Write the OCF checkpoint ``src`` as the TensorFlow checkpoint with prefix ``dst``.

    ``max_shard_bytes`` spreads the tensors over several data files.
    """
    with Reader(src) as reader:
        graph = reader.object_graph
        try:  # everything that can refuse the checkpoint, before any file is written
            keys = tensorflow_keys(graph, reader)
            graph_data = None if graph is None else \
                tf_graph(graph, keys).SerializeToString(deterministic=True)
            codes = _recorded_dtypes(reader)
        except OCFError as exc:
            raise with_path(exc, reader.path) from None
        _warn_dropped(reader, graph)
        # TensorFlow creates the prefix's directory too.
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        with BundleWriter(os.fspath(dst), max_shard_bytes=max_shard_bytes) as bundle:
            for key in reader:
                try:
                    _write_tensor(reader, key, keys[key], codes.get(key), bundle)
                except OCFError as exc:
                    raise with_path(exc, reader.path, key) from None
            if graph_data is not None:
                bundle.add(OBJECT_GRAPH_KEY, np.array(graph_data, dtype=object))


def _write_tensor(reader: Reader, key: str, tf_key: str, code: int | None,
                  bundle: BundleWriter) -> None:
    """Add OCF tensor ``key`` to ``bundle`` under ``tf_key``, as TensorFlow dtype ``code``
    when one is recorded, slice by slice when it is stored in slices."""
    info = reader[key]
    if not info.slices:
        array = reader.read_tensor(key)
        bundle.add(tf_key, _tf_array(array, code, key), tf_dtype=code)
        written(array.nbytes)
        return
    for piece in info.slices:
        region = tuple(slice(s, s + n) for s, n in zip(piece.start, piece.extent))
        array = reader.get_slice(key, region, mapped=False)
        bundle.add_slice(tf_key, info.shape, piece.start, _tf_array(array, code, key),
                         tf_dtype=code)
        written(array.nbytes)


def _recorded_dtypes(reader: Reader) -> dict[str, int]:
    """The TensorFlow DataType recorded by :func:`to_ocf` per tensor key."""
    restored = reader.metadata.get(TF_DTYPES)
    recorded = restored if isinstance(restored, dict) else {}
    codes = {key: _recorded_dtype(recorded.get(key), key) for key in reader}
    return {key: code for key, code in codes.items() if code is not None}


def _recorded_dtype(name: MetadataValue, key: str) -> int | None:
    """The TensorFlow DataType that :func:`to_ocf` recorded for ``key``, if any."""
    if name is None:
        return None
    code = resolve(name) if isinstance(name, str) else None
    if code is None or not is_supported(code) or numpy_dtype(code) is None:
        raise InvalidError(f"metadata {TF_DTYPES} names {name!r}, which is no fixed-width "
                           "TensorFlow dtype", key=key)
    return code


def _tf_array(array: np.ndarray, code: int | None, key: str) -> np.ndarray:
    """``array`` holding its bytes as TensorFlow's reader returns dtype ``code``, if any
    is recorded (the writer then checks the bytes are values of it)."""
    if code is None:
        return array
    kind = numpy_dtype(code)
    assert kind is not None  # checked by _recorded_dtype
    if array.dtype == object or kind.itemsize != array.dtype.itemsize:
        raise InvalidError(f"metadata {TF_DTYPES} names dtype {tf_name(code)!r}, which cannot "
                           f"hold the stored {array.dtype} values", key=key)
    return array.view(kind)


def _warn_dropped(reader: Reader, graph: ObjectGraph | None) -> None:
    warn_dropped("checkpoint metadata", [k for k in reader.metadata if k != TF_DTYPES],
                 "TensorFlow")
    if graph is not None:
        warn_dropped("object metadata", sorted(_object_metadata(graph.nodes)), "TensorFlow")


def _object_metadata(nodes: list[Node]) -> set[str]:
    return {name for node in nodes for name in node.metadata if name not in _OWN_METADATA}
