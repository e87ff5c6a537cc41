"""``torch.optim`` optimizers in object-based checkpoints (spec/objects.md).

An optimizer is a node with no child edges. Its per-parameter state
(``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq``, ``momentum_buffer``,
``step``, ...) becomes slot variables: for parameter ``p`` and state entry
``name``, a slot ``name`` of ``p``'s node, a leaf holding ``value``. Slots
are tied to the parameter objects, not to positions in ``param_groups`` as
``Optimizer.state_dict`` does, so state reaches the right parameter in a
model whose modules were registered in another order or an optimizer built
over the parameters in another order, and waits for a lazy module's
parameters until they exist.

Torch keeps ``step`` per parameter, as a 0-dim float32 tensor, so it is a
slot like the others, restored exactly. The node's metadata holds the rest,
typed:

- ``class``: the optimizer's class (``torch.optim.AdamW``), its identity: a
  restore refuses an optimizer of another class (the node's ``type_name``
  says the same, but is informative only, spec/objects.md);
- ``param_groups``: one map per group of its hyperparameters (all but
  ``params``): numbers, bools, None and strings as they are, tuples as
  lists, tensor hyperparameters (a tensor ``lr``) as their numbers;
- ``python_state``: present only when some per-parameter state is a Python
  number (SparseAdam's ``step``): slot name to ``"int"``, ``"float"`` or
  ``"bool"``, so a restore gives back the same Python type.

Restoring follows ``Optimizer.load_state_dict``: groups are matched by
position (their number must agree) and take the saved hyperparameters;
before anything is restored, the class must be the checkpoint's and every
saved hyperparameter one the live group has (an AdamW checkpoint never
gives SGD its ``betas`` or its ``exp_avg``), whatever ``partial`` and
``cast`` say. A hyperparameter the live group has and the checkpoint lacks
keeps its value, as ``load_state_dict`` does for one a newer torch added
(``initial_lr``, which a scheduler adds, is not compared);
floating state is cast to its parameter's dtype and device, ``step`` stays
float32 (on the parameter's device when the group is capturable or fused).
State for a parameter this optimizer does not update is ignored.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.objects.identity import CLASS, refuse_other_class
from ocf.objects.tracking import VALUE
from ocf.torch._framework import torch
from ocf.torch.modules import type_name
from ocf.torch.tensors import from_numpy

Optimizer = torch.optim.Optimizer
GROUPS = "param_groups"
PYTHON_STATE = "python_state"
_PYTHON_TYPES: dict[str, type] = {"bool": bool, "int": int, "float": float}

# Per optimizer, the 0-dim arrays standing for Python-number state: the same
# array each time, so a restore status recognises the slot objects it restored.
_HOLDERS: weakref.WeakKeyDictionary[Optimizer, dict[tuple[int, str], np.ndarray]] = \
    weakref.WeakKeyDictionary()
# Per optimizer, id(parameter) -> (parameter, its group), for restoring slots.
_GROUP_INDEX: weakref.WeakKeyDictionary[
    Optimizer, dict[int, tuple[torch.Tensor, dict[str, Any]]]] = weakref.WeakKeyDictionary()
# Per optimizer, the Python types a restore's metadata announced for slots.
_RESTORED_TYPES: weakref.WeakKeyDictionary[Optimizer, dict[str, type]] = \
    weakref.WeakKeyDictionary()


class OptimizerNode:
    """An optimizer: hyperparameters as metadata, per-parameter state as slots."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.ocf_type_name = type_name(type(optimizer))

    def _parameters(self) -> Iterator[torch.Tensor]:
        seen: set[int] = set()
        for group in self.optimizer.param_groups:
            for parameter in group["params"]:
                if id(parameter) not in seen:
                    seen.add(id(parameter))
                    yield parameter

    def _group_of(self, parameter: object) -> dict[str, Any] | None:
        """The group updating ``parameter``; an index kept per optimizer makes a
        restore of n slots O(n), rebuilt when the groups changed."""
        index = _GROUP_INDEX.get(self.optimizer, {})
        entry = index.get(id(parameter))
        if entry is None or entry[0] is not parameter:
            index = {id(p): (p, group) for group in self.optimizer.param_groups
                     for p in group["params"]}
            _GROUP_INDEX[self.optimizer] = index
            entry = index.get(id(parameter))
        return None if entry is None or entry[0] is not parameter else entry[1]

    # -- saving ---------------------------------------------------------------

    def ocf_slots(self) -> Iterable[tuple[object, str, object]]:
        holders = _HOLDERS.get(self.optimizer, {})
        kept: dict[tuple[int, str], np.ndarray] = {}
        slots: list[tuple[object, str, object]] = []
        for parameter in self._parameters():
            # .get: indexing the state defaultdict would add an empty entry.
            for name, value in self.optimizer.state.get(parameter, {}).items():
                # State names are the slot names, checked by the writer [R-GRAPH-003].
                if isinstance(value, torch.Tensor):
                    slots.append((parameter, name, value))
                elif isinstance(value, (bool, int, float)):
                    holder = _holder(holders.get((id(parameter), name)), value)
                    kept[(id(parameter), name)] = holder
                    slots.append((parameter, name, holder))
                elif value is not None:  # None means "not created yet" (SGD's buffer)
                    raise InvalidError(f"{self.ocf_type_name} keeps per-parameter state "
                                       f"{name!r} as a {type(value).__name__}; ocf.torch stores "
                                       "tensors and Python numbers only")
        _HOLDERS[self.optimizer] = kept
        return slots

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        metadata: dict[str, MetadataValue] = {
            CLASS: self.ocf_type_name,
            GROUPS: [{key: as_metadata(value, key, self.ocf_type_name)
                      for key, value in group.items() if key != "params"}
                     for group in self.optimizer.param_groups]}
        python = {name: type(value).__name__ for state in self.optimizer.state.values()
                  for name, value in state.items() if isinstance(value, (bool, int, float))}
        if python:
            metadata[PYTHON_STATE] = dict(python)
        return metadata

    # -- restoring ------------------------------------------------------------

    def ocf_check_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        refuse_other_class(values, self.ocf_type_name, "an optimizer",
                           _foreign_keys(values.get(GROUPS), self.optimizer))
        saved = values.get(GROUPS)
        groups = self.optimizer.param_groups
        if isinstance(saved, list) and len(saved) != len(groups):
            raise InvalidError(f"the checkpoint's {self.ocf_type_name} has {len(saved)} parameter "
                               f"groups, this one {len(groups)}; they are matched by position")
        foreign = _foreign_keys(saved, self.optimizer)
        if foreign:
            raise InvalidError(f"the checkpoint's optimizer is not this {self.ocf_type_name}"
                               f"{foreign}; an optimizer restores only into its own class")

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        self.ocf_check_restore_metadata(values)
        python = values.get(PYTHON_STATE)
        if isinstance(python, dict):
            _RESTORED_TYPES[self.optimizer] = {
                name: _PYTHON_TYPES[kind] for name, kind in python.items()
                if isinstance(kind, str) and kind in _PYTHON_TYPES}
        saved = values.get(GROUPS)
        if not isinstance(saved, list):
            return
        for group, hyperparameters in zip(self.optimizer.param_groups, saved):
            if isinstance(hyperparameters, dict):
                for key, value in hyperparameters.items():
                    if key != "params":  # checked above: every key is the group's
                        group[key] = restored_like(group.get(key), value)

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        group = self._group_of(variable)
        if group is None or VALUE not in values or not isinstance(variable, torch.Tensor):
            return  # not a parameter this optimizer updates
        python_type = _RESTORED_TYPES.get(self.optimizer, {}).get(name)
        state = self.optimizer.state[variable]
        if python_type is not None:
            state[name] = python_type(values[VALUE].item())
        else:
            state[name] = _placed(variable, name, from_numpy(values[VALUE]), group)


# Hyperparameters not compared: a scheduler adds initial_lr to the groups it drives.
_NOT_COMPARED = frozenset({"params", "initial_lr"})


def _foreign_keys(saved: MetadataValue, optimizer: Optimizer) -> str:
    """', its hyperparameters a, b are not this one's (which has c, d)' when a saved
    group holds hyperparameters the live group lacks; '' otherwise."""
    if not isinstance(saved, list):
        return ""
    for stored, group in zip(saved, optimizer.param_groups):
        if not isinstance(stored, dict):
            continue
        extra = sorted(set(stored) - set(group) - _NOT_COMPARED)
        if extra:
            missing = sorted(set(group) - set(stored) - _NOT_COMPARED)
            theirs = f" (which has {', '.join(missing)})" if missing else ""
            return (f": its hyperparameters {', '.join(extra)} are not this one's"
                    f"{theirs}")
    return ""


def _holder(holder: np.ndarray | None, value: bool | int | float) -> np.ndarray:
    fresh = np.array(value, dtype=np.bool_ if isinstance(value, bool) else
                     np.int64 if isinstance(value, int) else np.float64)
    if holder is None or holder.dtype != fresh.dtype:
        return fresh
    holder[...] = fresh
    return holder


def _placed(parameter: torch.Tensor, name: str, value: torch.Tensor, group: Mapping[str, Any]
            ) -> torch.Tensor:
    """Cast and move restored state as Optimizer.load_state_dict does."""
    if name == "step":
        if group.get("capturable") or group.get("fused"):
            return value.to(dtype=torch.float32, device=parameter.device)
        return value
    if parameter.is_floating_point():
        return value.to(dtype=parameter.dtype, device=parameter.device)
    return value.to(device=parameter.device)


def as_metadata(value: object, key: str, owner: str) -> MetadataValue:
    """A hyperparameter or scheduler entry as typed metadata: tensors as their
    numbers, tuples as lists, dicts with str keys as maps."""
    if isinstance(value, torch.Tensor):
        number: MetadataValue = value.detach().cpu().tolist()
        return number
    if isinstance(value, (tuple, list)):
        return [as_metadata(item, key, owner) for item in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: as_metadata(v, key, owner) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise InvalidError(f"{owner} entry {key!r} is a {type(value).__name__}; storable are "
                       "numbers, bools, None, strings, tensors, and tuples, lists and "
                       "str-keyed dicts of these")


def restored_like(current: object, saved: MetadataValue) -> object:
    """The saved value in the live one's form: tensors filled in place, tuples kept."""
    if isinstance(current, torch.Tensor):
        with torch.no_grad():
            current.copy_(torch.tensor(saved, dtype=current.dtype))
        return current
    if isinstance(current, (tuple, list)) and isinstance(saved, list) and \
            len(current) == len(saved):
        return type(current)(restored_like(c, s) for c, s in zip(current, saved))
    if isinstance(current, dict) and isinstance(saved, dict):
        return {**current, **{k: restored_like(current.get(k), v) for k, v in saved.items()}}
    return saved
