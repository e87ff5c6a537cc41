"""Keras optimizers in object-based checkpoints (spec/objects.md).

An optimizer is a node whose child edges are its attributes holding
variables (:mod:`ocf.keras.structure`): the iteration counter
``_iterations``, ``_learning_rate`` when it is a variable, and each list
of per-variable state (Adam's ``_momentums`` and ``_velocities``), item
``i`` belonging to the i-th variable the optimizer updates. The same
state is also linked to its variable: for every variable ``v`` the
optimizer updates and every kind of state, a slot variable of ``v``'s
node, named as Keras names it (``momentum``, ``velocity``: the suffix of
the state variable's name after ``v``'s path; the list's name without its
underscore when that suffix is not found). Its metadata is its class
(``class``): a restore into an optimizer of another class is refused
(:mod:`ocf.objects.identity`), as the state of one means nothing to another.

Both links are kept on purpose. The list edges are what
``tf.train.Checkpoint`` writes and restores for a Keras 3 optimizer (its
graph has no slot variables), so a TensorFlow checkpoint restores here and
a converted OCF one restores in TensorFlow. The slot variables tie the
state to the variable itself: a restore hands slots over after the list
items, so an optimizer built over the same variables in another order
still ends with each variable's own state. (Lists are matched by position
first, so a reordering that puts variables of other shapes at the same
positions fails the restore's shape check; ``partial=True`` does not help
there, and neither does TensorFlow.)

An optimizer not built yet (it builds on its first ``apply``, or when
``model.fit`` starts) has no per-variable state. A restore keeps its slot
values and hands them over when Keras builds it, before the first update
(restore-on-create, :mod:`ocf.keras.builds`); the iteration counter exists
from the start and is restored at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ocf.format.metadata import MetadataValue
from ocf.keras import builds
from ocf.keras._framework import keras
from ocf.keras.structure import (
    OPTIMIZER_ALIASES,
    attribute_children,
    is_built,
    per_variable_state,
    type_name,
    updated_variables,
    variable_index,
)
from ocf.keras.variables import assign
from ocf.objects.identity import CLASS, refuse_other_class
from ocf.objects.tracking import VALUE

# Slot values a restore handed to an optimizer before it was built: applied by its build.
_WAITING: weakref.WeakKeyDictionary[Any, list[tuple[object, str, Mapping[str, np.ndarray]]]] = \
    weakref.WeakKeyDictionary()


class OptimizerNode:
    """A Keras optimizer: its variables as children, per-variable state also as slots."""

    def __init__(self, optimizer: keras.optimizers.Optimizer) -> None:
        self.optimizer = optimizer
        self.ocf_type_name = type_name(type(optimizer))

    def ocf_children(self) -> Mapping[str, object]:
        if not is_built(self.optimizer):
            builds.watch(self.optimizer)
        return attribute_children(self.optimizer, skip=OPTIMIZER_ALIASES)

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {CLASS: self.ocf_type_name}  # its identity (ocf.objects.identity)

    def ocf_check_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        refuse_other_class(values, self.ocf_type_name, "an optimizer")

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        self.ocf_check_restore_metadata(values)  # the rest of its state is variables

    def ocf_slots(self) -> Iterable[tuple[object, str, object]]:
        if not is_built(self.optimizer):
            return []
        variables = updated_variables(self.optimizer)
        return [(variable, name, state)
                for name, states in slot_lists(self.optimizer).items()
                for variable, state in zip(variables, states) if state is not None]

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        if VALUE not in values:
            return
        if not is_built(self.optimizer):
            waiting = _WAITING.setdefault(self.optimizer, [])
            if not waiting:
                builds.watch(self.optimizer, after=self._restore_waiting)
            waiting.append((variable, name, values))
            return
        states = slot_lists(self.optimizer).get(name)
        index = variable_index(self.optimizer, variable)
        if states is None or index is None or states[index] is None:
            return  # state this optimizer does not keep, or a variable it does not update
        assign(states[index], values[VALUE])

    def _restore_waiting(self) -> None:
        for variable, name, values in _WAITING.pop(self.optimizer, []):
            self.ocf_restore_slot(variable, name, values)


def slot_lists(optimizer: keras.optimizers.Optimizer) -> dict[str, Sequence[Any]]:
    """A built optimizer's per-variable state lists by slot name (see the module
    docstring for the names)."""
    variables = updated_variables(optimizer)
    named: dict[str, Sequence[Any]] = {}
    by_attribute = dict(per_variable_state(optimizer))
    for attribute, states in by_attribute.items():
        name = _keras_slot_name(variables, states) or attribute.lstrip("_")
        if name in named:  # two lists with one Keras name: both by attribute name
            return {a.lstrip("_"): s for a, s in by_attribute.items()}
        named[name] = states
    return named


def _keras_slot_name(variables: Sequence[Any], states: Sequence[Any]) -> str | None:
    """The name Keras gave this kind of state (``add_variable_from_reference(v,
    "momentum")`` names it ``<v.path with _ for />_momentum``), if every entry agrees."""
    found: set[str] = set()
    for variable, state in zip(variables, states):
        if state is None:
            continue
        prefix = variable.path.replace("/", "_") + "_"
        if not state.name.startswith(prefix) or len(state.name) == len(prefix):
            return None
        found.add(state.name[len(prefix):])
    return found.pop() if len(found) == 1 else None
