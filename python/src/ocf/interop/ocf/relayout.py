"""An OCF checkpoint rewritten as another OCF checkpoint with other storage options.

``ocf convert a.ocf b --layout directory --compression zstd --chunk-size
4194304`` keeps every tensor (values, dtype, shape), the metadata and the
object graph, and changes how they are stored. One tensor is held in memory
at a time. A tensor stored in slices is written whole.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ocf.format.errors import InvalidError, OCFError
from ocf.format.reader import Reader
from ocf.format.writer import Writer
from ocf.interop.output import with_path, written


def relayout(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Write the OCF checkpoint ``src`` to ``dst`` with the :class:`ocf.Writer` ``options``."""
    if Path(src).resolve() == Path(dst).resolve():
        raise InvalidError("source and destination are the same checkpoint; write to a new "
                           "path", path=src)
    with Reader(src) as reader:
        graph = reader.object_graph
        key = None
        try:
            with Writer(dst, metadata=reader.metadata, **options) as writer:
                for key in reader:
                    array = reader.read_tensor(key)
                    writer.write(key, array)
                    written(array.nbytes)
                key = None
                if graph is not None:
                    writer.set_object_graph(graph.nodes)
        except OCFError as exc:
            raise with_path(exc, src, key) from None
