"""Multi-writer checkpoints: parts written separately, merged into one (spec/parts.md).

Every process writes its part (:class:`PartWriter`, :func:`write_part`) into
the shared checkpoint directory; once all are written, one process merges
them (:func:`merge_parts`) into the checkpoint's single index, without
copying any tensor bytes. These functions do not communicate: the engine
that runs the processes (``ocf.distributed.torch``, JAX, MPI, Ray) shares
the save id and says when every part is done.
"""

from __future__ import annotations

from ocf.distributed.parts.merging import merge_parts
from ocf.distributed.parts.naming import MAX_PARTS, new_save_id, part_file_name
from ocf.distributed.parts.writing import LocalBox, PartWriter, seal_part, write_part
from ocf.distributed.parts.writing import Slice as Slice

# Slice, LocalBox's name before 0.3.0, stays importable but is not documented as a name of its own.
__all__ = ["MAX_PARTS", "LocalBox", "PartWriter", "merge_parts", "new_save_id", "part_file_name",
           "seal_part", "write_part"]
