"""One write id for every process of a save, so they all write into one staging folder."""

from __future__ import annotations

from ocf.format.commit import new_write_id
from ocf.huggingface._framework import accelerate


def shared_write_id(accelerator: accelerate.Accelerator) -> str:
    """A new write id drawn by the main process and given to every other one."""
    ids = [new_write_id()]
    if accelerator.num_processes > 1:
        accelerate.utils.broadcast_object_list(ids, from_process=0)
    return ids[0]
