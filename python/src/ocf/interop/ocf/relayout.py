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


def export(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
           layout: str = "file", **options: Any) -> None:
    """Write the OCF checkpoint ``src`` as a standalone checkpoint at ``dst``.

    A checkpoint of an incremental save (``ocf.CheckpointManager(...,
    incremental=True)``) keeps its blocks in the pool of its directory,
    outside its own file: copying the file alone copies an index whose blocks
    are missing. The export has every byte in it and no pool shard. Every
    pool object ``src`` references is checked against its SHA-256 first
    (spec/pool.md, [R-POOL-004]), and every chunk against its CRC-32C as it
    is read. ``options`` go to :class:`ocf.Writer` (compression, chunk_size).

    Examples:
        >>> ocf.export("run/ckpt-42", "ckpt-42-standalone.ocf")
    """
    relayout(src, dst, layout=layout, check_pool=True, **options)


def relayout(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
             check_pool: bool = False, **options: Any) -> None:
    """Write the OCF checkpoint ``src`` to ``dst`` with the :class:`ocf.Writer` ``options``;
    ``check_pool`` first checks the identity of every pool object it references."""
    if Path(src).resolve() == Path(dst).resolve():
        raise InvalidError("source and destination are the same checkpoint; write to a new "
                           "path", path=src)
    with Reader(src) as reader:
        if check_pool:
            reader.check_pool_identities()
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
