"""DCP checkpoint directories to OCF checkpoints and back.

To OCF: every tensor, assembled from its chunks by torch's reader, under
DCP's own key; the non-tensor values and the report of what was not read
become the checkpoint's metadata (``pytorch.values``, ``pytorch.unread``,
as for a ``.pt`` file: ocf.interop.pytorch.flatten).

From OCF: ``torch.distributed.checkpoint.save`` writes the tensors, in this
process and without a process group, as one flat state dict under their
OCF keys, with the plain values of ``pytorch.values`` beside them (so a DCP
checkpoint converted to OCF and back holds what it held). Other metadata
and an object graph have no place in DCP: dropped with a warning. The
directory is written under a temporary name beside ``dst`` and renamed into
place once every file in it is on disk (:mod:`ocf.format.folder_commit`);
``dst`` must not exist yet.
"""

from __future__ import annotations

import os
from typing import Any

from ocf.format.errors import InvalidError
from ocf.format.folder_commit import StagedFolder
from ocf.interop.dcp.reading import quiet_single_process
from ocf.interop.dcp.source import WHAT, DcpSource
from ocf.interop.pytorch.convert import torch_state, write_ocf
from ocf.interop.pytorch.flatten import UNREAD_KEY
from ocf.interop.pytorch.torch_needed import import_dcp


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the DCP checkpoint directory ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    with DcpSource(src) as source:
        unread = source.metadata.get(UNREAD_KEY)
        write_ocf(source, unread if isinstance(unread, dict) else {}, dst, **options)


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write the OCF checkpoint ``src`` as the DCP checkpoint directory ``dst``."""
    target = os.fspath(dst)
    torch = import_dcp(target, f"writing {WHAT}")
    if os.path.lexists(target):
        raise InvalidError("a DCP checkpoint is a new directory; this path exists",
                           path=target)
    state = torch_state(torch, src, "DCP")
    staged = StagedFolder(target)
    staged.create()
    try:
        writer = torch.distributed.checkpoint.FileSystemWriter(staged.folder)
        with quiet_single_process():
            torch.distributed.checkpoint.save(state, storage_writer=writer, no_dist=True)
        staged.commit(replace=False)  # dst did not exist: nothing of the user's is replaced
    except BaseException:
        staged.discard()
        raise
