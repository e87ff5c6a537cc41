"""Translations between a JAX tree and a checkpoint in another framework's names and array layouts.

Restoring matches edge names, and checks every array's shape and dtype.
A model written by PyTorch names and lays out its weights differently from
the same model in Flax: a ``torch.nn.Linear`` keeps ``weight`` of shape
(out, in), a ``flax.linen.Dense`` keeps ``kernel`` of shape (in, out). A
:class:`Translation` bridges the two, in both directions:

- restoring (``ocf.jax.restore(target, path, translation=...)``): for every leaf
  of the target named in its rules, it looks up the checkpoint edge of
  another name and converts the stored array before the check;
- saving (``ocf.jax.save(tree, path, translation=...)``): every such leaf is
  written under the other name, converted into the other layout, so the
  checkpoint restores by structure into the other framework's model
  (``ocf.restore(torch_model, path)``).

Its module names map the tree's other edge names (``Dense_0``) to the
checkpoint's (``fc1``, or ``0`` for a ``torch.nn.Sequential``), both ways.

:data:`TORCH_TO_FLAX`, the mapping of PyTorch modules to their Flax linen
and NNX equivalents, and :data:`FLAX_TO_TORCH`, the same translation named for
saving Flax parameters for PyTorch:

=========================  ==============  ============================================
Flax leaf                  PyTorch tensor  conversion (Flax <- PyTorch; saving inverts)
=========================  ==============  ============================================
``kernel`` (Dense)         ``weight``      (out, in) -> (in, out): transposed
``kernel`` (Conv, N-d)     ``weight``      (out, in, k1..kN) -> (k1..kN, in, out)
``bias``                   ``bias``        none
``scale`` (LayerNorm, BN)  ``weight``      none
``embedding`` (Embed)      ``weight``      none
``mean`` / ``var`` (BN)    ``running_mean`` / ``running_var``  none
=========================  ==============  ============================================

Optimizer state (restoring only): when the target holds optax states
whose moments are slots of the parameters (:mod:`ocf.jax.slots`), the
slots a torch optimizer saved for the same parameters fill them, from the
optimizer's node or any node above the states (``opt_state`` mapped to
``optimizer`` by a rename), converted as their parameters are:

=====================  ====================  =======================================
optax state field      torch state           conversion
=====================  ====================  =======================================
``mu`` (Adam, AdamW)   ``exp_avg``           as the parameter's (kernels transposed)
``nu`` (Adam, AdamW)   ``exp_avg_sq``        as the parameter's
``count``              ``step``              one count: every parameter's step must
                                             be the same number (float32 in torch)
=====================  ====================  =======================================

torch's Adam and ``optax.adam`` then take the same next step, given equal
hyperparameters (both default to b1 0.9, b2 0.999, eps 1e-8; AMSGrad's
``max_exp_avg_sq`` has no optax field). Hyperparameters are not carried
over: optax keeps them in the update function, not in the state.

Not covered: transposed convolutions (PyTorch stores (in, out, k...)),
grouped convolutions, and the different default epsilons of normalization
layers, which change outputs but not weights. Flax convolutions take NHWC
inputs where PyTorch takes NCHW: a model that flattens conv features into
a Dense layer must flatten in the same order (transpose to NCHW first).
Flax keeps BatchNorm's ``mean`` and ``var`` in the ``batch_stats``
collection, apart from ``params``: a tree saved for PyTorch must hold them
next to ``scale`` and ``bias`` (one dict per layer), where PyTorch's
BatchNorm keeps them, and PyTorch's ``num_batches_tracked`` has no Flax
counterpart (restore with ``partial=True``, or expect it unmatched).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ocf.format.errors import InvalidError
from ocf.jax.slots import is_optimizer_state
from ocf.jax.tree_view import Container, Leaf, Receiver, exact_scalar
from ocf.objects.tracking import VALUE


def identity(array: np.ndarray) -> np.ndarray:
    return array


def torch_kernel(array: np.ndarray) -> np.ndarray:
    """A PyTorch Linear or ConvNd weight as a Flax Dense or Conv kernel."""
    if array.ndim < 2:
        return array  # not a kernel; the shape check reports the mismatch
    axes = (*range(2, array.ndim), 1, 0)
    return np.ascontiguousarray(array.transpose(axes))


def flax_kernel(array: np.ndarray) -> np.ndarray:
    """A Flax Dense or Conv kernel as a PyTorch Linear or ConvNd weight (torch_kernel's
    inverse): (in, out) -> (out, in), (k1..kN, in, out) -> (out, in, k1..kN)."""
    if array.ndim < 2:
        return array  # not a kernel; the restoring side's shape check reports it
    axes = (array.ndim - 1, array.ndim - 2, *range(array.ndim - 2))
    return np.ascontiguousarray(array.transpose(axes))


Convert = Callable[[np.ndarray], np.ndarray]
# A leaf rule: (checkpoint edge name, stored array -> tree array), and for
# saving through the translation, tree array -> stored array as a third item.
LeafRule = tuple[str, Convert] | tuple[str, Convert, Convert]


@dataclass(frozen=True)
class Translation:
    """Edge renames and array conversions applied to a tree that is saved or restored.

    Examples:
        >>> rename = ocf.jax.TORCH_TO_FLAX.rename({"Dense_0": "fc1"})
        >>> params = ocf.jax.restore(flax_params, "torch_model.ocf", translation=rename)
    """

    # tree leaf name -> its rule (LeafRule)
    leaves: Mapping[str, LeafRule] = field(default_factory=dict)
    # tree edge name of any other node -> checkpoint edge name
    modules: Mapping[str, str] = field(default_factory=dict)
    # restoring only: optimizer slot name in the tree (an optax state's field,
    # "mu") -> the checkpoint's slot name ("exp_avg")
    slots: Mapping[str, str] = field(default_factory=dict)
    # restoring only: a step-count field of an optax state ("count") -> the
    # checkpoint's per-variable slot holding the count ("step"), equal for all
    counts: Mapping[str, str] = field(default_factory=dict)

    def rename(self, modules: Mapping[str, str]) -> Translation:
        """This translation with more module names mapped (``{"Dense_0": "fc1"}``)."""
        return replace(self, modules={**self.modules, **modules})

    def apply(self, root: Container | Leaf, *, saving: bool = False) -> None:
        """Rename the edges under ``root`` and set the leaves' conversions, for a
        restore or, when ``saving``, for a save."""
        if not isinstance(root, Container):
            return
        for node in list(root.walk()):
            if isinstance(node, Container):
                renamed = {self._edge(name, child, saving): child
                           for name, child in node.children.items()}
                if len(renamed) != len(node.children):
                    raise InvalidError(f"{node.path or '(root)'}: the translation maps two edges "
                                       f"of {sorted(node.children)} to one name")
                node.children = renamed

    def _edge(self, name: str, child: Container | Leaf, saving: bool) -> str:
        if isinstance(child, Leaf) and name in self.leaves:
            rule = self.leaves[name]
            if not saving:
                child.transform = rule[1]
            elif len(rule) == 3:
                child.to_stored = rule[2]
            else:
                raise InvalidError(f"{child.path!r}: the translation's rule for {name!r} converts "
                                   "only on restore; give it a third item, the conversion "
                                   "of a tree array to the stored one, to save through it")
            return rule[0]
        return self.modules.get(name, name)

    def route_slots(self, root: Container | Leaf) -> None:
        """Let the optimizer states under ``root`` take, on restore, slots saved under
        this translation's slot names, and step counts saved as slots; owned by the state
        or by any node above it (a torch optimizer is one node, an optax chain a
        tuple of states). Call after the moments are linked as slots."""
        if not isinstance(root, Container) or not (self.slots or self.counts):
            return
        for state, owners in _states(root, []):
            routes = self._routes(state)
            for owner in owners:
                for key, target in routes.items():
                    owner.slot_targets.setdefault(key, target)

    def _routes(self, state: Container) -> dict[tuple[int, str], Receiver]:
        routes: dict[tuple[int, str], Receiver] = {}
        variables = {id(v): v for v, _, _ in state.slots}
        for variable, name, slot in state.slots:
            if name in self.slots:
                routes[(id(variable), self.slots[name])] = slot
        for name, stored in self.counts.items():
            count = state.children.get(name)
            if isinstance(count, Leaf):
                counter = _Count(count)
                routes.update({(key, stored): counter for key in variables})
        return routes


def _states(node: Container, above: list[Container]) -> list[tuple[Container, list[Container]]]:
    """The optimizer states with slots under ``node``, each with itself and the nodes
    above it."""
    found: list[tuple[Container, list[Container]]] = []
    path = [*above, node]
    if is_optimizer_state(node.source) and node.slots:
        found.append((node, path))
    for child in node.children.values():
        if isinstance(child, Container):
            found.extend(_states(child, path))
    return found


class _Count:
    """An optax step count fed by a per-variable slot (torch's ``step``): every
    variable's must be the same number, which the count's dtype holds exactly."""

    def __init__(self, leaf: Leaf) -> None:
        self.leaf = leaf
        self.seen: float | None = None

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE not in values:
            return
        stored = values[VALUE]
        if stored.shape != ():
            raise InvalidError(f"{self.leaf.path!r}: the checkpoint's step count has shape "
                               f"{list(stored.shape)}, not a single number",
                               path=self.leaf.view.file)
        number = stored.item()
        if self.seen is not None and number != self.seen:
            raise InvalidError(f"{self.leaf.path!r}: the checkpoint's per-variable step counts "
                               f"differ ({self.seen} and {number}); optax keeps one for all",
                               path=self.leaf.view.file)
        self.seen = number
        self.leaf.ocf_restore_tensors({VALUE: exact_scalar(number, self.leaf)})


TORCH_TO_FLAX = Translation(leaves={
    "kernel": ("weight", torch_kernel, flax_kernel),
    "bias": ("bias", identity, identity),
    "scale": ("weight", identity, identity),
    "embedding": ("weight", identity, identity),
    "mean": ("running_mean", identity, identity),
    "var": ("running_var", identity, identity),
}, slots={"mu": "exp_avg", "nu": "exp_avg_sq"}, counts={"count": "step"})
"""Restores a PyTorch model's checkpoint into the equivalent Flax tree: kernels
transposed, ``weight``/``running_mean``/``running_var`` mapped to Flax's names, Adam's
``exp_avg``/``exp_avg_sq`` into optax's ``mu``/``nu``.

Examples:
    >>> params = ocf.jax.restore(flax_params, "trained_in_torch.ocf",
    ...                          translation=ocf.jax.TORCH_TO_FLAX)
"""
# The same translation, named for its other use: ocf.jax.save(params, path,
# translation=FLAX_TO_TORCH) writes Flax parameters as PyTorch names and lays them out.
FLAX_TO_TORCH = TORCH_TO_FLAX
"""The same translation as :data:`TORCH_TO_FLAX`, named for saving: a Flax tree written
with it restores into the equivalent PyTorch model.

Examples:
    >>> ocf.jax.save({"model": params}, "for_torch.ocf", translation=ocf.jax.FLAX_TO_TORCH)
    >>> ocf.torch.restore({"model": torch_model}, "for_torch.ocf")
"""
