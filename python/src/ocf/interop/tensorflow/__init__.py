"""TensorFlow checkpoints (tensor bundles), read and written without TensorFlow.

The bundle format (:mod:`.bundle_reader`, :mod:`.bundle_writer`, with
:mod:`.sstable`, :mod:`.entries`, :mod:`.strings`, ...) is described in
``ocf.tensorflow``'s docstring, the public face of this package;
:mod:`.source` reads a bundle as a Source, :mod:`.objects` maps its object
graph onto OCF's, :mod:`.convert` converts to OCF and back.
"""

from __future__ import annotations

import os

from ocf.format.source import AnySource
from ocf.interop.base import LocalFormat
from ocf.interop.tensorflow import convert
from ocf.interop.tensorflow.bundle_reader import is_tensorflow_checkpoint
from ocf.interop.tensorflow.objects import OBJECT_GRAPH_KEY
from ocf.interop.tensorflow.source import TFSource
from ocf.interop.tensorflow.state import STATE_FILENAME, read_checkpoint_state
from ocf.interop.text import format_size, format_table


class TensorFlowFormat(LocalFormat):
    """A TensorFlow V2 checkpoint: ``PREFIX.index`` and its data files, or a directory
    whose ``checkpoint`` state file names one."""

    name = "tensorflow"
    title = "TensorFlow"
    checks = "CRC-32C of every tensor"
    source = TFSource
    converter = convert

    def detect(self, path: str) -> bool:
        return is_tensorflow_checkpoint(path)

    def latest(self, directory: str) -> str | None:
        """The prefix TensorFlow's ``checkpoint`` file in ``directory`` names, if it
        exists (as tf.train.latest_checkpoint answers)."""
        if not os.path.isfile(os.path.join(directory, STATE_FILENAME)):
            return None
        prefix = read_checkpoint_state(directory)[0]
        return prefix if is_tensorflow_checkpoint(prefix) else None

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        found = _opened(source).bundle.entry(key)
        return (found.size if found.slices is None else None), None

    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        bundle = opened.bundle
        header = bundle.header
        graph = "object-based" if OBJECT_GRAPH_KEY in bundle else "name-based (no object graph)"
        rows = [("KEY", "DTYPE", "SHAPE", "STORED")]
        for key, view in opened.items():
            entry = bundle.entry(key)
            stored = (f"{len(entry.slices)} slices" if entry.slices is not None
                      else format_size(entry.size))
            rows.append((key, view.dtype.name, str(list(entry.shape)), stored))
        return [f"checkpoint: {bundle.prefix}",
                f"TensorFlow checkpoint, {graph}, producer version {header.producer}, "
                f"{len(opened)} tensors in {header.num_shards} data file(s)",
                format_table(rows)]


def _opened(source: AnySource) -> TFSource:
    assert isinstance(source, TFSource), "a TensorFlow checkpoint opens as a TFSource"
    return source


TENSORFLOW = TensorFlowFormat()
