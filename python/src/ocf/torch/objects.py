"""Registration of the torch adapters: torch objects as parts of object graphs.

Importing ``ocf.torch`` registers adapters (``ocf.objects.tracking.register_adapter``)
for ``torch.Tensor`` (parameters and buffers included), ``nn.Module``,
``torch.optim.Optimizer``, learning-rate schedulers, ``torch.amp.GradScaler``
and ``torch.Generator``,
so ``ocf.Checkpoint``, ``ocf.write``, ``ocf.restore`` and ``ocf.torch.save`` /
``ocf.torch.restore`` (which are :func:`ocf.numpy.save` / :func:`ocf.numpy.restore`)
take them directly.
"""

from __future__ import annotations

from ocf.objects.tracking import register_adapter
from ocf.torch._framework import torch
from ocf.torch.generators import GeneratorNode
from ocf.torch.modules import ModuleNode, TensorNode
from ocf.torch.optim import OptimizerNode
from ocf.torch.scalers import GradScaler, ScalerNode
from ocf.torch.schedulers import LRScheduler, SchedulerNode


def register() -> None:
    """Make tensors, modules, optimizers, schedulers, gradient scalers and generators
    trackable."""
    register_adapter(torch.Tensor, TensorNode)
    register_adapter(torch.nn.Module, ModuleNode)
    register_adapter(torch.optim.Optimizer, OptimizerNode)
    register_adapter(LRScheduler, SchedulerNode)
    register_adapter(torch.Generator, GeneratorNode)
    register_adapter(GradScaler, ScalerNode)
