"""``keras.Variable`` in object-based checkpoints: a leaf holding ``value``.

A Keras variable is a node like ``ocf.Variable``: one tensor attribute,
``value``, read with ``Variable.numpy()`` and restored with
``Variable.assign``, so the same node serves every backend (a TensorFlow
``tf.Variable``, a JAX array, a torch ``Parameter`` underneath). A restore
checks the stored shape and dtype against the variable's before any value
is assigned (``ocf_expected_tensors``); ``cast=True`` converts another dtype.
A variable that Keras created in a stateless scope, without a value yet,
takes the restored value as its initial value (:func:`ocf.keras.structure.initialize_later`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError
from ocf.keras._framework import keras
from ocf.keras.structure import initialize_later
from ocf.objects.tracking import VALUE, Expected

TYPE_NAME = "keras.Variable"


def numpy_dtype(variable: keras.Variable) -> np.dtype[Any]:
    """The NumPy dtype of a variable's values (ml_dtypes for bfloat16 and friends),
    from its dtype name: reading the value to learn it would copy it."""
    name = keras.backend.standardize_dtype(variable.dtype)
    row = dtypes.BY_NAME.get(name)
    if row is not None and row.numpy is not None:
        return row.numpy
    return np.asarray(variable.numpy()).dtype


class VariableNode:
    """A Keras variable: a leaf whose tensor ``value`` is restored by ``assign``."""

    ocf_type_name = TYPE_NAME

    def __init__(self, variable: keras.Variable) -> None:
        self.variable = variable

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: np.asarray(self.variable.numpy())}

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE in values:
            assign(self.variable, values[VALUE])

    def ocf_expected_tensors(self) -> Mapping[str, Expected]:
        return {VALUE: (tuple(self.variable.shape), numpy_dtype(self.variable), TYPE_NAME)}


def assign(variable: keras.Variable, value: np.ndarray) -> None:
    """Give ``variable`` the value ``value`` (same shape; checked by the restore first)."""
    if tuple(value.shape) != tuple(variable.shape):
        raise InvalidError(f"cannot restore a value of shape {list(value.shape)} into the "
                           f"Keras variable {variable.path!r} of shape "
                           f"{list(variable.shape)}")
    if not initialize_later(variable, value):
        variable.assign(value)

