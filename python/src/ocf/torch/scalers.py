"""Gradient scalers of mixed-precision training (``torch.amp.GradScaler``) in checkpoints.

A GradScaler is a node with no tensors: its ``state_dict()`` (``scale``,
``growth_factor``, ``backoff_factor``, ``growth_interval``,
``_growth_tracker``) is its metadata, one number per key. Restoring hands
them back through ``load_state_dict``, so a resumed run skips and grows
steps exactly as the uninterrupted one would. A disabled scaler saves
nothing and restores nothing, as torch's own state_dict does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocf.format.metadata import MetadataValue
from ocf.torch._framework import torch
from ocf.torch.optim import as_metadata, restored_like

GradScaler = torch.amp.GradScaler


class ScalerNode:
    """A gradient scaler: its state_dict as typed metadata."""

    ocf_type_name = "torch.amp.GradScaler"

    def __init__(self, scaler: GradScaler) -> None:
        self.scaler = scaler

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {key: as_metadata(value, key, self.ocf_type_name)
                for key, value in self.scaler.state_dict().items()}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        state = self.scaler.state_dict()
        if not state or not values:
            return  # a disabled scaler on either side: nothing to carry over
        for key, value in values.items():
            state[key] = restored_like(state.get(key), value)
        self.scaler.load_state_dict(state)
