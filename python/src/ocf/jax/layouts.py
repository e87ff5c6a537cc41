"""Mappings for restoring a checkpoint written by another framework into a JAX tree.

Restoring matches edge names, and checks every array's shape and dtype.
A model written by PyTorch names and lays out its weights differently from
the same model in Flax: a ``torch.nn.Linear`` keeps ``weight`` of shape
(out, in), a ``flax.linen.Dense`` keeps ``kernel`` of shape (in, out). A
:class:`Layout` bridges the two on restore: for every leaf of the target
named in its rules, it looks up the checkpoint edge of another name and
converts the stored array before the check; its module names map the
target's other edge names (``Dense_0``) to the checkpoint's (``fc1``, or
``0`` for a ``torch.nn.Sequential``).

:data:`TORCH_TO_FLAX`, the mapping of PyTorch modules to their Flax linen
and NNX equivalents:

=========================  ==============  ============================================
Flax leaf                  PyTorch tensor  conversion
=========================  ==============  ============================================
``kernel`` (Dense)         ``weight``      (out, in) -> (in, out): transposed
``kernel`` (Conv, N-d)     ``weight``      (out, in, k1..kN) -> (k1..kN, in, out)
``bias``                   ``bias``        none
``scale`` (LayerNorm, BN)  ``weight``      none
``embedding`` (Embed)      ``weight``      none
``mean`` / ``var`` (BN)    ``running_mean`` / ``running_var``  none
=========================  ==============  ============================================

Not covered: transposed convolutions (PyTorch stores (in, out, k...)),
grouped convolutions, and the different default epsilons of normalization
layers, which change outputs but not weights. Flax convolutions take NHWC
inputs where PyTorch takes NCHW: a model that flattens conv features into
a Dense layer must flatten in the same order (transpose to NCHW first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ocf.errors import InvalidError
from ocf.jax.pytree import Container, Leaf


def identity(array: np.ndarray) -> np.ndarray:
    return array


def torch_kernel(array: np.ndarray) -> np.ndarray:
    """A PyTorch Linear or ConvNd weight as a Flax Dense or Conv kernel."""
    if array.ndim < 2:
        return array  # not a kernel; the shape check reports the mismatch
    axes = (*range(2, array.ndim), 1, 0)
    return np.ascontiguousarray(array.transpose(axes))


@dataclass(frozen=True)
class Layout:
    """Edge renames and array conversions applied to a restore target."""

    # target leaf name -> (checkpoint edge name, stored array -> target array)
    leaves: Mapping[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = \
        field(default_factory=dict)
    # target edge name of any other node -> checkpoint edge name
    modules: Mapping[str, str] = field(default_factory=dict)

    def rename(self, modules: Mapping[str, str]) -> Layout:
        """This layout with more module names mapped (``{"Dense_0": "fc1"}``)."""
        return Layout(self.leaves, {**self.modules, **modules})

    def apply(self, root: Container | Leaf) -> None:
        """Rename the edges under ``root`` and set the leaves' conversions."""
        if not isinstance(root, Container):
            return
        for node in list(root.walk()):
            if isinstance(node, Container):
                renamed = {self._edge(name, child): child
                           for name, child in node.children.items()}
                if len(renamed) != len(node.children):
                    raise InvalidError(f"{node.path or '(root)'}: the layout maps two edges "
                                       f"of {sorted(node.children)} to one name")
                node.children = renamed

    def _edge(self, name: str, child: Container | Leaf) -> str:
        if isinstance(child, Leaf) and name in self.leaves:
            stored, convert = self.leaves[name]
            child.transform = convert
            return stored
        return self.modules.get(name, name)


TORCH_TO_FLAX = Layout(leaves={
    "kernel": ("weight", torch_kernel),
    "bias": ("bias", identity),
    "scale": ("weight", identity),
    "embedding": ("weight", identity),
    "mean": ("running_mean", identity),
    "var": ("running_var", identity),
})
