"""Optimizer moments as slot variables of the parameters they belong to.

An optax optimizer state holds, per parameter, values such as Adam's
first and second moments: ``ScaleByAdamState(count, mu, nu)`` where ``mu``
and ``nu`` are trees shaped like the parameters. When a tree holds both the
parameters and such a state (a dict ``{"params": ..., "opt_state": ...}``,
a Flax ``TrainState``), each leaf of ``mu`` is stored as the slot ``mu`` of
the parameter leaf it belongs to, owned by the ``ScaleByAdamState`` node,
as TensorFlow stores an optimizer's slots (spec/objects.md, "Slot
variables"). The slot names are the state's field names: ``mu`` and ``nu``
for Adam, AdamW, Lion (``mu``), ``nu`` for RMSProp, ``trace`` for SGD with
momentum, and so on.

The rule, applied the same way on saving and restoring so both sides agree:

- an optimizer state is a NamedTuple whose class comes from optax (module
  ``optax`` or ``optax.*``);
- a field of it is linked when it is a pytree node (not a single array)
  with the same tree structure, leaf shapes and dtypes as exactly one
  subtree outside every optimizer state, the parameters; when several
  subtrees qualify, the one under an edge named ``params`` is taken, and if
  that does not decide, the field stays plain children;
- a linked field's node disappears from the graph; its leaves become slot
  nodes with paths ``<state>/.slot/<parameter>/<field>``.

Anything else of the state (step counts, masked or partial moments) stays
ordinary children.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ocf.jax._framework import jax
from ocf.jax.tree_view import Container, Leaf

OPTIMIZER_MODULES = ("optax",)
PARAMS_EDGE = "params"


def is_optimizer_state(value: object) -> bool:
    cls = type(value)
    return isinstance(value, tuple) and hasattr(cls, "_fields") and \
        cls.__module__.split(".")[0] in OPTIMIZER_MODULES


def _signature(proxy: Container | Leaf) -> tuple[Any, ...] | None:
    """Structure, shapes and dtypes of a subtree; None when it has a non-array leaf."""
    leaves, treedef = jax.tree_util.tree_flatten(proxy.source)
    shapes = []
    for leaf in leaves:
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            return None
        shapes.append((tuple(leaf.shape), np.dtype(leaf.dtype).name))
    return treedef, tuple(shapes)


def _array_leaves(proxy: Container) -> list[Leaf]:
    return [p for p in proxy.walk() if isinstance(p, Leaf)]


def link(root: Container | Leaf) -> None:
    """Turn the moment fields of optimizer states under ``root`` into slots."""
    if not isinstance(root, Container):
        return
    states: list[Container] = []
    candidates: list[tuple[str, Container | Leaf]] = []  # (edge name, subtree)
    work: list[tuple[str, Container | Leaf]] = [("", root)]
    while work:  # separate optimizer states from what may be parameters
        name, proxy = work.pop()
        if isinstance(proxy, Container) and is_optimizer_state(proxy.source):
            states.append(proxy)
            continue
        candidates.append((name, proxy))
        if isinstance(proxy, Container):
            work.extend(proxy.children.items())
    if not states:
        return
    signatures = [(name, proxy, _signature(proxy)) for name, proxy in candidates]
    for state in _nested_states(states):
        for field, child in list(state.children.items()):
            params = _params_for(child, signatures)
            if params is not None and isinstance(child, Container):
                _make_slots(state, field, child, params)


def _nested_states(states: list[Container]) -> list[Container]:
    """Every optimizer state, those inside other states (a chain's) included."""
    found: list[Container] = []
    work = list(states)
    while work:
        state = work.pop()
        found.append(state)
        work.extend(p for p in state.walk() if p is not state and isinstance(p, Container)
                    and is_optimizer_state(p.source) and p not in found and p not in work)
    return found


def _params_for(field: Container | Leaf,
                signatures: list[tuple[str, Container | Leaf, tuple[Any, ...] | None]]
                ) -> Container | None:
    if not isinstance(field, Container) or is_optimizer_state(field.source):
        return None
    wanted = _signature(field)
    if wanted is None or not wanted[1]:
        return None
    matches = [(name, proxy) for name, proxy, signature in signatures if signature == wanted]
    if len(matches) > 1:
        matches = [(name, proxy) for name, proxy in matches if name == PARAMS_EDGE]
    if len(matches) != 1 or not isinstance(matches[0][1], Container):
        return None
    return matches[0][1]


def _make_slots(state: Container, field: str, moments: Container, params: Container) -> None:
    variables, slots = _array_leaves(params), _array_leaves(moments)
    if len(variables) != len(slots):  # pragma: no cover - equal signatures
        return
    del state.children[field]
    for variable, slot in zip(variables, slots):
        state.add_slot(variable, field, slot)
