"""A TensorFlow checkpoint as a :class:`ocf.format.source.Source`.

``TFSource(prefix)`` opens a bundle with :class:`ocf.tensorflow.BundleReader`
(no TensorFlow needed) and presents it as a Source:
its tensor keys are TensorFlow's keys, less ``_CHECKPOINTABLE_OBJECT_GRAPH``,
whose content is the object graph, mapped onto OCF's by
ocf.interop.tensorflow.objects and checked like an OCF graph. This is what lets
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
from ocf.format.pieces import Piece
from ocf.format.source import Source, TensorSummary
from ocf.interop.tensorflow.bundle_reader import BundleReader
from ocf.interop.tensorflow.objects import OBJECT_GRAPH_KEY, read_tf_graph
from ocf.interop.tensorflow.state import read_checkpoint_state

__all__ = ["TFSource", "resolve_prefix"]


def resolve_prefix(path: str | os.PathLike[str], *, allow_outside: bool = False) -> str:
    """The prefix of the checkpoint at ``path``; for a directory, its latest checkpoint,
    which must lie inside it unless ``allow_outside`` [R-TF-001]."""
    text = os.fspath(path)
    if os.path.isdir(text):
        return read_checkpoint_state(text, allow_outside=allow_outside)[0]
    return text


def ocf_dtype(tf_name: str, numpy: np.dtype[np.generic] | None) -> dtypes.Dtype:
    """OCF's dtype of a TensorFlow dtype when OCF has it, else one named as TensorFlow
    names it (``qint8``, ``int4``), read as ``numpy``."""
    if tf_name == "string":
        return dtypes.BYTES
    row = dtypes.BY_NAME.get(tf_name)
    return row if row is not None and row.numpy == numpy else dtypes.foreign(tf_name, numpy)


class TFSource(Source[TensorSummary]):
    """A TensorFlow checkpoint as an :class:`ocf.format.source.Source`.

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
        self.path: str = self.bundle.prefix
        stored = self.bundle.keys()
        self._keys = [k for k in stored if k != OBJECT_GRAPH_KEY]
        self._graph: ObjectGraph | None = None
        self._graph_read = False

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

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key != OBJECT_GRAPH_KEY and key in self.bundle

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def _check_key(self, key: str) -> None:
        if key not in self:
            raise NotFoundError("no tensor with this key", path=self.bundle.index_path, key=key)

    def __getitem__(self, key: str) -> TensorSummary:
        self._check_key(key)
        entry = self.bundle.entry(key)
        return TensorSummary(key, ocf_dtype(entry.dtype_name, entry.dtype), entry.shape)

    def read_tensor(self, key: str) -> np.ndarray:
        self._check_key(key)
        return self.bundle.read(key)

    # get_tensor and verify_tensor read the tensor (Source's defaults): a bundle's bytes
    # are never mapped, and the bundle reader checks the checksum as it reads.

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

