"""Where the structure of Keras objects comes from: their attributes.

Keras has no public mapping from a name to a layer's sublayers and own
variables: ``layer.variables`` and ``layer.weights`` flatten the whole
tree, ``Variable.path`` follows layer names (``dense_1/kernel``), which
change with the order objects were created, and a layer's tracker keeps
its direct sublayers and variables in unnamed lists. The names a program
gives are its attributes (``self.encoder = ...``, Dense's ``_kernel``,
a functional model's ``_operations`` list), which is also how
``tf.train.Checkpoint`` names the edges of a Keras 3 model. So OCF's graph
of a Keras model uses them too, and a TensorFlow checkpoint of a Keras
model and an OCF one have the same edges (spec/tensorflow.md).

Everything here reads Keras internals (``vars(obj)``, the tracker's list
names, the optimizer's per-variable lists, the stateless scope of a
symbolic build); it is the one module that does, so a Keras release that
moves them changes only this file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ocf.keras._framework import keras

# What the graph takes from a Keras object's attributes: these, and lists, tuples and
# dicts holding them.
KERAS_TYPES: tuple[type, ...] = (keras.Variable, keras.layers.Layer, keras.optimizers.Optimizer,
                                 keras.random.SeedGenerator)

# A layer's tracker keeps every sublayer and variable it holds in these lists, which
# repeat what its named attributes hold (TensorFlow's tracking skips them too).
_TRACKER_LISTS = frozenset({"_tracker", "_trainable_variables", "_non_trainable_variables",
                            "_layers", "_metrics", "_seed_generators"})
# On the torch backend a layer is also a torch.nn.Module, which keeps the attributes
# holding sublayers in this registry instead of the instance's dict.
_TORCH_REGISTRY = "_modules"
# An optimizer's list of all its variables repeats its named ones, and the variables it
# updates belong to the model: neither is the optimizer's own structure.
OPTIMIZER_ALIASES = frozenset({"_variables", "_trainable_variables"})
# Attributes TensorFlow's tracking adds to objects (on the TensorFlow backend).
_TENSORFLOW_PREFIX = "_self_"


def holds_keras_objects(value: object) -> bool:
    """Whether ``value`` is a Keras object of the graph, or a container holding one."""
    if isinstance(value, KERAS_TYPES):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_keras_objects(item) for item in value)
    if isinstance(value, dict):
        return any(isinstance(key, str) and holds_keras_objects(item)
                   for key, item in value.items())
    return False


def attribute_children(obj: object, skip: frozenset[str] = frozenset()) -> dict[str, object]:
    """The attributes of a Keras object that hold Keras objects, in assignment order."""
    return {name: value for name, value in _attributes(obj).items()
            if name not in _TRACKER_LISTS and name not in skip
            and not name.startswith(_TENSORFLOW_PREFIX) and holds_keras_objects(value)}


def _attributes(obj: object) -> dict[str, object]:
    attributes = dict(vars(obj))
    registry = attributes.pop(_TORCH_REGISTRY, None)
    if isinstance(registry, dict):
        attributes.update(registry)
    return attributes


def updated_variables(optimizer: keras.optimizers.Optimizer) -> Sequence[keras.Variable]:
    """The variables a built optimizer updates, in the order it was built with."""
    variables: Sequence[keras.Variable] = optimizer._trainable_variables
    return variables


def per_variable_state(optimizer: keras.optimizers.Optimizer
                       ) -> Iterator[tuple[str, Sequence[Any]]]:
    """Each list of a built optimizer's per-variable state (Adam's ``_momentums``),
    with its attribute name: Keras keeps the state of ``_trainable_variables[i]`` at
    index i of lists named by each optimizer class; an entry may be None."""
    updated = updated_variables(optimizer)
    own = {id(v) for v in optimizer.variables}
    for name, value in vars(optimizer).items():
        if name in OPTIMIZER_ALIASES or not isinstance(value, (list, tuple)) or \
                len(value) != len(updated) or not value:
            continue
        if all(item is None or (isinstance(item, keras.Variable) and id(item) in own)
               for item in value) and any(item is not None for item in value):
            yield name, value


def variable_index(optimizer: keras.optimizers.Optimizer, variable: object) -> int | None:
    """Where a built optimizer keeps the state of ``variable``; None if it does not
    update it."""
    try:
        index: int = optimizer._get_variable_index(variable)
    except (KeyError, AttributeError):
        return None
    return index


def type_name(cls: type) -> str:
    """``keras.layers.Dense`` for classes Keras exports there, else module.qualname."""
    for public, namespace in (("keras.layers", keras.layers), ("keras.optimizers",
                                                                 keras.optimizers),
                              ("keras", keras), ("keras.random", keras.random)):
        if getattr(namespace, cls.__name__, None) is cls:
            return f"{public}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def is_built(obj: object) -> bool:
    """Whether a layer or optimizer has created its variables (other objects always
    have)."""
    return bool(getattr(obj, "built", True))


def initialize_later(variable: keras.Variable, value: np.ndarray) -> bool:
    """Make ``value`` the initial value of a variable created in a stateless scope.

    Keras builds a model inside a stateless scope when ``fit`` or
    ``train_on_batch`` builds it symbolically (the JAX backend does); a
    variable created there has no value yet, only an initializer, run when
    the scope ends, and an ``assign`` in the scope is discarded. So a value
    restored on creation replaces the initializer. Both the scope and the
    initializer are Keras internals, read here only.
    """
    from keras.src.backend.common.stateless_scope import in_stateless_scope

    if not in_stateless_scope() or getattr(variable, "_value", True) is not None or \
            getattr(variable, "_initializer", None) is None:
        return False
    restored = np.array(value, copy=True)

    def restored_value(shape: object, dtype: object = None) -> Any:
        return keras.ops.convert_to_tensor(restored, dtype=dtype)

    variable._initializer = restored_value
    return True
