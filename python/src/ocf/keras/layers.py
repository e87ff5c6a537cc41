"""Keras layers and models in object-based checkpoints (spec/objects.md).

A layer (a model is one) is a node whose child edges are its attributes
holding Keras objects, under the attribute's name (:mod:`ocf.keras.structure`):
its variables (Dense's ``_kernel`` and ``bias``, BatchNormalization's
``moving_mean``), its sublayers (``self.encoder``; a functional model's
``_operations``, a list whose item ``i`` is an edge ``i``), its seed
generators, and a compiled model's ``optimizer``. A variable is a leaf
holding ``value`` (:mod:`ocf.keras.variables`). So ``model.layers[0].kernel``
of a functional model saved as ``Checkpoint(model=model)`` is the tensor
``model/_operations/1/_kernel/.value``, the same path as in a
``tf.train.Checkpoint`` of that model: layer names (``dense_1``) play no
part, so a model whose layers are named otherwise restores by structure.

Restore-on-create: a layer not built yet (a subclassed model not called,
a Sequential model without input shape) has no variables; the restore
waits, and the layer's values arrive when Keras builds it
(:mod:`ocf.keras.builds`). A built model compiled with an optimizer not
built yet builds it (:func:`build_compiled_optimizer`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ocf.keras import builds
from ocf.keras._framework import keras
from ocf.keras.structure import attribute_children, is_built, type_name


class AttributeNode:
    """A layer, model or seed generator: its attributes holding Keras objects as
    children."""

    def __init__(self, obj: object) -> None:
        self.obj = obj
        self.ocf_type_name = type_name(type(obj))

    def ocf_children(self) -> Mapping[str, object]:
        if not is_built(self.obj):
            builds.watch(self.obj)
        else:
            build_compiled_optimizer(self.obj)
        return attribute_children(self.obj)


def build_compiled_optimizer(model: object) -> None:
    """Build the optimizer a built model was compiled with, over the model's trainable
    variables, as ``fit`` does first: so its per-variable state exists for a restore to
    fill (a TensorFlow checkpoint has it only by position, ``_momentums/0``, with no
    slot to wait on). A save builds it too, and saves the state as zeros."""
    optimizer = getattr(model, "optimizer", None)
    if isinstance(model, keras.Model) and isinstance(optimizer, keras.optimizers.Optimizer) \
            and not is_built(optimizer):
        with builds.eagerly():
            optimizer.build(model.trainable_variables)
