"""PyTorch support: flat state dicts and object-based checkpoints in OCF.

Flat, like safetensors.torch: :func:`save_file` / :func:`load_file` for a
mapping of tensors (zero-copy CPU loads, a ``map_location``-like
``device``), :func:`save_model` / :func:`load_model` for a module's
``state_dict``.

Object-based: importing this package makes ``torch.Tensor``, ``nn.Module``
and ``torch.optim.Optimizer`` trackable, so ``ocf.Checkpoint(model=model,
optimizer=optimizer).save(prefix)`` and ``.restore(path)`` work with them
(graph layout in :mod:`ocf.torch.modules` and :mod:`ocf.torch.optim`);
:func:`save` / :func:`restore` do it in one call, for a model, a dict
``{"model": model, "optimizer": optimizer}`` or any other trackable state
(they are :func:`ocf.numpy.save` / :func:`ocf.numpy.restore`: the same
functions as in :mod:`ocf.jax`, where a restore returns a new tree instead).

Needs the ``torch`` extra: ``pip install 'ocf[torch]'``.
"""

from __future__ import annotations

from ocf.numpy import restore, save
from ocf.torch import _framework
from ocf.torch.files import load_file, load_model, save_file, save_model
from ocf.torch.objects import register
from ocf.torch.tensors import from_numpy, to_numpy

register()
del _framework

__all__ = ["from_numpy", "load_file", "load_model", "restore", "save", "save_file", "save_model",
           "to_numpy"]
