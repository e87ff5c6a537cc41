"""``ocf inspect`` for a TensorFlow checkpoint, read without TensorFlow.

Prints the prefix, the bundle header (data files, producer version), a
table of every tensor (key, dtype, shape, bytes stored, and the number of
slices of a partitioned one), and with ``--tensor``/``--all`` the values.
``_CHECKPOINTABLE_OBJECT_GRAPH`` is not listed as a tensor: it is the object
graph, which ``ocf tree PREFIX`` draws.
"""

from __future__ import annotations

import os

from ocf.cli.textformat import format_size, format_table
from ocf.tensorflow.objects import OBJECT_GRAPH_KEY
from ocf.tensorflow.source import TFSource, ocf_dtype_name


def inspect_tensorflow(path: str | os.PathLike[str], *, tensor: str | None = None,
                       show_all: bool = False, verify: bool = True) -> int:
    """Print what the TensorFlow checkpoint at ``path`` holds; the exit status."""
    with TFSource(path, verify=verify) as source:
        if tensor is not None:
            print(f"tensor_name: {tensor}")
            print(source.read_tensor(tensor))
            return 0
        bundle = source.bundle
        header = bundle.header
        graph = "object-based" if OBJECT_GRAPH_KEY in bundle else "name-based (no object graph)"
        print(f"checkpoint: {bundle.prefix}")
        print(f"TensorFlow checkpoint, {graph}, producer version {header.producer}, "
              f"{len(source.keys())} tensors in {header.num_shards} data file(s)")
        rows = [("KEY", "DTYPE", "SHAPE", "STORED")]
        for key in source:
            entry = bundle.entry(key)
            stored = (f"{len(entry.slices)} slices" if entry.slices is not None
                      else format_size(entry.size))
            rows.append((key, ocf_dtype_name(entry.dtype_name), str(list(entry.shape)), stored))
        print(format_table(rows))
        if show_all:
            for key in source:
                print(f"\ntensor_name: {key}")
                print(source.read_tensor(key))
    return 0
