"""OCF as a storage backend of ``torch.distributed.checkpoint`` (DCP).

An FSDP2 / DTensor training loop switches to OCF by passing the storage
writer and reader, and changes nothing else::

    import torch.distributed.checkpoint as dcp
    from ocf.distributed.dcp import StorageReader, StorageWriter

    dcp.save(state, storage_writer=StorageWriter("run/ckpt-100"))
    dcp.load(state, storage_reader=StorageReader("run/ckpt-100"))

What is written is an ordinary OCF checkpoint (spec/parts.md: one part per
rank, merged by the coordinator), with no pickle in any file: ``ocf inspect``,
``ocf verify`` and ``ocf.load_file`` read it in a plain process, and a load on
another mesh or world size reads only the bytes each rank needs.
"""

from __future__ import annotations

from ocf.distributed.dcp.reading import StorageReader
from ocf.distributed.dcp.writing import StorageWriter

__all__ = ["StorageReader", "StorageWriter"]
