"""What ``ocf inspect`` prints of a TensorFlow checkpoint before its tensors' values.

The prefix, the bundle header (data files, producer version) and a table of
every tensor (key, dtype, shape, bytes stored, and the number of slices of a
partitioned one). ``_CHECKPOINTABLE_OBJECT_GRAPH`` is not listed as a
tensor: it is the object graph, which ``ocf tree PREFIX`` draws.
"""

from __future__ import annotations

from ocf.cli.textformat import format_size, format_table
from ocf.tensorflow.objects import OBJECT_GRAPH_KEY
from ocf.tensorflow.source import TFSource, ocf_dtype_name


def print_tensorflow_summary(source: TFSource) -> None:
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
