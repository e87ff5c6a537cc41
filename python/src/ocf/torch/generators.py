"""Random number generators in object-based checkpoints.

A ``torch.Generator`` (``torch.default_generator`` among them) is a leaf
node whose tensor ``value`` is its state (``get_state()``, a uint8 tensor);
restoring calls ``set_state``, so dropout masks and shuffles after a resume
are the ones an uninterrupted run would draw:
``ocf.Checkpoint(model=..., rng=torch.default_generator)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ocf.objects.tracking import VALUE
from ocf.torch._framework import torch
from ocf.torch.tensors import from_numpy, to_numpy


class GeneratorNode:
    """A random generator: its state as the tensor ``value``."""

    ocf_type_name = "torch.Generator"

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: to_numpy(self.generator.get_state())}

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE in values:
            self.generator.set_state(from_numpy(values[VALUE]))
