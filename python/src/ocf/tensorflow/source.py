"""A TensorFlow checkpoint read the way OCF reads its own (see ocf.objects.sources).

``TFSource(prefix)`` opens a bundle with :class:`ocf.tensorflow.BundleReader`
(no TensorFlow needed) and presents it as an :class:`ocf.objects.sources.Source`:
its tensor keys are TensorFlow's keys, less ``_CHECKPOINTABLE_OBJECT_GRAPH``,
whose content is the object graph, mapped onto OCF's by
ocf.tensorflow.objects and checked like an OCF graph. This is what lets
``ocf.restore(root, "train/ckpt-3")`` restore a ``tf.train.Checkpoint`` by
structure into NumPy objects, and ``ocf.load_variable("model.ckpt-5",
"dense/kernel")`` read a ``tf.compat.v1.train.Saver`` checkpoint by name.

The path may be the prefix, ``PREFIX.index``, or a directory holding
TensorFlow's ``checkpoint`` state file (its latest checkpoint is opened, if
it lies inside the directory [R-TF-001]).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import NotFoundError
from ocf.format.memory import needing
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.objects.pieces import Piece
from ocf.objects.sources import (
    ForeignFormat,
    TensorSummary,
    foreign_format,
    register_foreign_format,
)
from ocf.tensorflow.bundle_reader import BundleReader, is_tf_checkpoint
from ocf.tensorflow.objects import OBJECT_GRAPH_KEY, read_tf_graph
from ocf.tensorflow.state import STATE_FILENAME, read_checkpoint_state

__all__ = ["TFSource", "is_tensorflow_checkpoint", "is_tf_checkpoint", "resolve_prefix"]


def resolve_prefix(path: str | os.PathLike[str], *, allow_outside: bool = False) -> str:
    """The prefix of the checkpoint at ``path``; for a directory, its latest checkpoint,
    which must lie inside it unless ``allow_outside`` [R-TF-001]."""
    text = os.fspath(path)
    if os.path.isdir(text):
        return read_checkpoint_state(text, allow_outside=allow_outside)[0]
    return text


def ocf_dtype_name(tf_name: str) -> str:
    """OCF's name of a TensorFlow dtype when OCF has it, else TensorFlow's."""
    if tf_name == "string":
        return dtypes.BYTES.name
    return tf_name


class TFSource:
    """A TensorFlow checkpoint as an :class:`ocf.objects.sources.Source`.

    Examples:
        >>> with ocf.tensorflow.TFSource("train/ckpt-3") as source:
        ...     graph = source.object_graph  # TensorFlow's, mapped onto OCF's
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True,
                 allow_outside: bool = False) -> None:
        # A directory's state file may name a prefix outside it: refused unless the
        # caller trusts the file [R-TF-001].
        self.bundle = BundleReader(resolve_prefix(path, allow_outside=allow_outside),
                                   verify=verify)
        stored = self.bundle.keys()
        self._keys = [k for k in stored if k != OBJECT_GRAPH_KEY]
        self._graph: ObjectGraph | None = None
        self._graph_read = False

    @property
    def path(self) -> str:
        return self.bundle.prefix

    @property
    def object_graph(self) -> ObjectGraph | None:
        """The checked OCF view of the stored object graph; None for a name-based
        checkpoint (a tf.compat.v1 Saver's)."""
        if not self._graph_read:
            with needing(self.bundle.index_identity[0], "the object graph of this checkpoint",
                         path=self.bundle.index_path):
                self._graph = read_tf_graph(self.bundle, self._keys)
            self._graph_read = True
        return self._graph

    def keys(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, key: object) -> bool:
        return key != OBJECT_GRAPH_KEY and key in self.bundle

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def _check_key(self, key: str) -> None:
        if key not in self:
            raise NotFoundError("no tensor with this key", path=self.bundle.index_path, key=key)

    def summary(self, key: str) -> TensorSummary:
        self._check_key(key)
        entry = self.bundle.entry(key)
        return TensorSummary(ocf_dtype_name(entry.dtype_name), entry.shape, entry.dtype)

    def read_tensor(self, key: str) -> np.ndarray:
        self._check_key(key)
        return self.bundle.read(key)

    def get_tensor(self, key: str) -> np.ndarray:
        return self.read_tensor(key)  # a bundle's bytes are read, never mapped

    def verify_tensor(self, key: str) -> None:
        self.read_tensor(key)  # the bundle reader checks the checksum as it reads

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        self._check_key(key)
        return self.bundle.read_elements(key, piece.begin, piece.end).reshape(piece.shape)

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return {}  # TensorFlow checkpoints hold none

    format_name = "TensorFlow"

    @property
    def identity(self) -> tuple[int, int]:
        return self.bundle.index_identity

    def close(self) -> None:
        self.bundle.close()

    def __enter__(self) -> TFSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_tensorflow_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether local ``path`` is a TensorFlow checkpoint and not an OCF one.

    A TensorFlow prefix (``PREFIX.index`` exists), ``PREFIX.index`` itself, or
    a directory holding TensorFlow's ``checkpoint`` state file. Imports no
    TensorFlow; URLs are never TensorFlow checkpoints here.

    Examples:
        >>> ocf.tensorflow.is_tensorflow_checkpoint("train/ckpt-3")  # train/ckpt-3.index exists
        True
    """
    return foreign_format(path) is TENSORFLOW


def _open(path: str, verify: bool) -> TFSource:
    return TFSource(path, verify=verify)


def _latest(directory: str) -> str | None:
    """The prefix TensorFlow's ``checkpoint`` file in ``directory`` names, if it exists
    (as tf.train.latest_checkpoint answers)."""
    if not os.path.isfile(os.path.join(directory, STATE_FILENAME)):
        return None
    prefix = read_checkpoint_state(directory)[0]
    return prefix if is_tf_checkpoint(prefix) else None


TENSORFLOW = ForeignFormat("TensorFlow", is_tf_checkpoint, _open, _latest)
register_foreign_format(TENSORFLOW)
