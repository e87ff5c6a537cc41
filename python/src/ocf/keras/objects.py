"""Registration of the Keras adapters: Keras objects as parts of object graphs.

Importing ``ocf.keras`` registers adapters (``ocf.objects.tracking.register_adapter``)
for ``keras.Variable``, ``keras.layers.Layer`` (models included),
``keras.optimizers.Optimizer`` and ``keras.random.SeedGenerator``, so
``ocf.Checkpoint``, ``ocf.write``, ``ocf.restore`` and ``ocf.keras.save`` /
``ocf.keras.restore`` take them directly, on any Keras backend.
"""

from __future__ import annotations

from ocf.keras._framework import keras
from ocf.keras.layers import AttributeNode
from ocf.keras.optimizers import OptimizerNode
from ocf.keras.variables import VariableNode
from ocf.objects.tracking import register_adapter


def register() -> None:
    """Make Keras variables, layers, models, optimizers and seed generators trackable."""
    register_adapter(keras.Variable, VariableNode)
    register_adapter(keras.layers.Layer, AttributeNode)
    register_adapter(keras.random.SeedGenerator, AttributeNode)
    register_adapter(keras.optimizers.Optimizer, OptimizerNode)
