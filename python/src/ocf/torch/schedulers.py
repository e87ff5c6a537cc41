"""Learning-rate schedulers in object-based checkpoints.

An ``LRScheduler`` (``ReduceLROnPlateau`` included) is a node with no
tensors: the entries of its ``state_dict()`` (``last_epoch``,
``base_lrs``, ``_last_lr``, ``_step_count``, a plateau's ``best``, ...) are
its metadata, one key each, typed, with ``class``, the scheduler's class
(no attribute of a scheduler has that name, a Python keyword). Restoring
refuses a scheduler of another class (a StepLR's state would give a
CosineAnnealingLR a ``step_size``), then hands the entries back through
``load_state_dict``, tuples and tensor entries in their live form. The
optimizer the scheduler drives is saved as its own object, not through the
scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocf.format.metadata import MetadataValue
from ocf.objects.identity import CLASS, refuse_other_class
from ocf.torch._framework import torch
from ocf.torch.modules import type_name
from ocf.torch.optim import as_metadata, restored_like

LRScheduler = torch.optim.lr_scheduler.LRScheduler


class SchedulerNode:
    """A learning-rate scheduler: its state_dict as typed metadata."""

    def __init__(self, scheduler: LRScheduler) -> None:
        self.scheduler = scheduler
        self.ocf_type_name = type_name(type(scheduler))

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {CLASS: self.ocf_type_name,
                **{key: as_metadata(value, key, self.ocf_type_name)
                   for key, value in self.scheduler.state_dict().items()}}

    def ocf_check_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        refuse_other_class(values, self.ocf_type_name, "a scheduler")

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        self.ocf_check_restore_metadata(values)
        state = self.scheduler.state_dict()
        for key, value in values.items():
            if key != CLASS:
                state[key] = restored_like(state.get(key), value)
        self.scheduler.load_state_dict(state)
