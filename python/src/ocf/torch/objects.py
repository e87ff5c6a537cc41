"""Registration of the torch adapters and one-call object-based save and restore.

Importing ``ocf.torch`` registers adapters (``ocf.objects.tracking.register_adapter``)
for ``torch.Tensor`` (parameters and buffers included), ``nn.Module``,
``torch.optim.Optimizer``, learning-rate schedulers and ``torch.Generator``,
so ``ocf.Checkpoint``, ``ocf.write`` and ``ocf.restore`` take them directly.
"""

from __future__ import annotations

import os

from ocf.objects.checkpoint import Checkpoint
from ocf.objects.restoring import RestoreStatus
from ocf.objects.tracking import register_adapter
from ocf.torch._framework import torch
from ocf.torch.generators import GeneratorNode
from ocf.torch.modules import ModuleNode, TensorNode
from ocf.torch.optim import OptimizerNode
from ocf.torch.schedulers import LRScheduler, SchedulerNode


def register() -> None:
    """Make tensors, modules, optimizers, schedulers and generators trackable."""
    register_adapter(torch.Tensor, TensorNode)
    register_adapter(torch.nn.Module, ModuleNode)
    register_adapter(torch.optim.Optimizer, OptimizerNode)
    register_adapter(LRScheduler, SchedulerNode)
    register_adapter(torch.Generator, GeneratorNode)


def save(path: str | os.PathLike[str], **objects: object) -> str:
    """Write ``ocf.Checkpoint(**objects)`` at exactly ``path``; return the path.

    ``ocf.torch.save("ckpt.ocf", model=model, optimizer=optimizer)``.
    """
    return Checkpoint(**objects).write(path)


def restore(path: str | os.PathLike[str], **objects: object) -> RestoreStatus:
    """Restore ``objects`` by structure from a checkpoint written with the same keywords."""
    return Checkpoint(**objects).restore(path)
