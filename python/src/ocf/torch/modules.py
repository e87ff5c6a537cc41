"""``nn.Module`` and tensors in object-based checkpoints (spec/objects.md).

The object graph of a module, kept simple so other programs can read it:

- a module is a node whose child edges are, in this order, its parameters,
  its persistent buffers and its submodules, each under the name the
  module registered it by (``weight``, ``running_mean``, ``0``, ``fc1``);
- a parameter or buffer is a leaf node, like ``ocf.Variable``, with one
  tensor attribute ``value``.

So ``model.fc1.weight`` saved as ``Checkpoint(model=model)`` is the tensor
``model/fc1/weight/.value``. Module names escape ``/`` and a leading ``.``
as dict keys do (``ocf.objects.tracking.escape_name``). A tensor reached by several
edges (tied weights) is one node. A module overriding ``get_extra_state``
keeps that state on its own node (:mod:`ocf.torch.extra_state`).
Restoring copies into the existing tensors in place, so optimizers keep
pointing at them; like ``load_state_dict`` it requires equal shapes and
casts dtypes.

Restore-on-create. A lazy module (``nn.LazyLinear`` and friends) lists no
parameter before it materialises, so a restore waits on it; a forward
pre-hook, run right after the module's own materialising hook, announces
the new tensors (:func:`ocf.objects.tracking.attached`), which receive their
values, and optimizer slots for them, before the forward pass uses them.
Materialising still draws the module's random initial values first, which
moves the global random generator: a program that restores
``torch.default_generator`` too and needs its stream exact runs one forward
pass (materialising) before restoring.
Submodules, parameters and buffers registered after a restore started
(``model.head = nn.Linear(...)``) are announced through torch's global
registration hooks, installed the first time a module is tracked.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.objects.tracking import VALUE, Expected, attached, escape_name
from ocf.torch import extra_state
from ocf.torch._framework import torch
from ocf.torch.tensors import TORCH_TO_OCF, from_numpy, is_uninitialized, ocf_dtype, to_numpy

nn = torch.nn
_NAMESPACES = (("torch.nn", torch.nn), ("torch.optim", torch.optim))


def type_name(cls: type) -> str:
    """``torch.nn.Linear`` for classes torch exports there, else module.qualname."""
    for public, namespace in _NAMESPACES:
        if getattr(namespace, cls.__name__, None) is cls:
            return f"{public}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


class TensorNode:
    """A parameter, buffer or any tensor: a leaf holding ``value``, restored in place."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor
        self.ocf_type_name = type_name(type(tensor)) if isinstance(tensor, nn.Parameter) \
            else "torch.Tensor"

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: to_numpy(self.tensor)}

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)  # without to_numpy: a GPU tensor is not copied to the host

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE in values:
            assign(self.tensor, from_numpy(values[VALUE]))

    def ocf_expected_tensors(self) -> Mapping[str, Expected]:
        if is_uninitialized(self.tensor) or self.tensor.dtype not in TORCH_TO_OCF:
            return {}  # a lazy parameter takes its shape from the checkpoint
        numpy = ocf_dtype(self.tensor.dtype).numpy
        if numpy is None:
            return {}
        return {VALUE: (tuple(self.tensor.shape), numpy, type(self.tensor).__name__)}


def assign(target: torch.Tensor, value: torch.Tensor) -> None:
    """Copy ``value`` into ``target`` in place: equal shapes, dtype cast as torch does."""
    if is_uninitialized(target):
        raise InvalidError("cannot restore into a lazy module's parameter before it is "
                           "materialised")
    if tuple(target.shape) != tuple(value.shape):
        raise InvalidError(f"cannot restore a tensor of shape {list(value.shape)} into a "
                           f"{type(target).__name__} of shape {list(target.shape)}")
    with torch.no_grad():
        target.copy_(value)


def _state_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's own parameters and persistent buffers, lazy ones included.

    Read from the registries state_dict uses: the public iterators skip a
    tensor registered under two names, which the graph keeps as two edges.
    """
    found: dict[str, torch.Tensor] = {}
    for name, parameter in module._parameters.items():
        if parameter is not None:
            found[name] = parameter
    for name, buffer in module._buffers.items():
        if buffer is not None and name not in module._non_persistent_buffers_set:
            found[name] = buffer
    return found


class ModuleNode:
    """An ``nn.Module``: its tensors and submodules as named children."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.ocf_type_name = type_name(type(module))
        # One node serves one save or one restore: the extra state is taken
        # apart once for its tensors and metadata, and its restored tensors
        # wait here for the metadata that says where they go.
        self._extra: extra_state.Parts | None = None
        self._restored: Mapping[str, np.ndarray] = {}

    def ocf_children(self) -> Mapping[str, object]:
        _install_registration_hooks()
        children: dict[str, object] = {}
        lazy = False
        for name, tensor in _state_tensors(self.module).items():
            if is_uninitialized(tensor):
                lazy = True  # no value yet: a restore waits for it
            else:
                children[escape_name(name)] = tensor
        for name, submodule in self.module._modules.items():
            if submodule is not None:
                children[escape_name(name)] = submodule
        if lazy:
            _watch_materialisation(self.module)
        return children

    def _extra_state(self) -> extra_state.Parts:
        if self._extra is None:
            self._extra = extra_state.take_apart(self.module) \
                if extra_state.saves(self.module) else extra_state.Parts()
        return self._extra

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return self._extra_state().tensors

    def ocf_tensor_names(self) -> Iterable[str]:
        return self._extra_state().tensors.keys()

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return self._extra_state().metadata

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        self._restored = values  # restoring.py hands over tensors before metadata

    def ocf_check_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        if extra_state.VALUE in values and extra_state.restores(self.module):
            extra_state.check_places(values, self.ocf_type_name)

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        if extra_state.VALUE in values and extra_state.restores(self.module):
            self.module.set_extra_state(extra_state.put_together(
                values, self._restored, self.ocf_type_name))


# -- restore-on-create ----------------------------------------------------------

_WATCHED: weakref.WeakKeyDictionary[nn.Module, Any] = weakref.WeakKeyDictionary()


def _watch_materialisation(module: nn.Module) -> None:
    """Announce a lazy module's tensors when its first forward pass creates them.

    Forward pre-hooks run in registration order; the lazy module registered
    its materialising hook in its constructor, so this one runs after it.
    """
    if module not in _WATCHED:
        _WATCHED[module] = module.register_forward_pre_hook(_announce_materialised)


def _announce_materialised(module: nn.Module, args: object) -> None:
    tensors = _state_tensors(module)
    for name, tensor in tensors.items():
        if not is_uninitialized(tensor):
            attached(module, escape_name(name), tensor)
    if not any(is_uninitialized(t) for t in tensors.values()):
        handle = _WATCHED.pop(module, None)
        if handle is not None:
            handle.remove()
        else:  # a copy of a watched module (copy.deepcopy copies hooks)
            for key, hook in list(module._forward_pre_hooks.items()):
                if hook is _announce_materialised:
                    del module._forward_pre_hooks[key]


_HOOKS_INSTALLED = False


def _install_registration_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    registration = torch.nn.modules.module
    registration.register_module_module_registration_hook(_announce_registered)
    registration.register_module_parameter_registration_hook(_announce_registered)
    registration.register_module_buffer_registration_hook(_announce_registered)
    _HOOKS_INSTALLED = True


def _announce_registered(module: nn.Module, name: str, value: object) -> None:
    """Torch calls this just before it stores ``value`` under ``name``; a restore
    waiting for that child fills it now (lazy tensors wait for materialisation)."""
    if value is not None and not is_uninitialized(value):
        attached(module, escape_name(name), value)
