"""Keras 3 support: models and optimizers in OCF checkpoints, on any backend.

Object-based: importing this package makes ``keras.Variable``, layers and
models, optimizers and seed generators trackable, so
``ocf.Checkpoint(model=model, optimizer=optimizer).save(prefix)`` and
``.restore(path)`` work with them, on the TensorFlow, JAX and torch
backends alike, without Keras' own checkpoint code (graph layout in
:mod:`ocf.keras.layers` and :mod:`ocf.keras.optimizers`). :func:`save` /
:func:`restore` do it in one call, for a model, a dict ``{"model": model,
"optimizer": optimizer}`` or any other trackable state (they are
:func:`ocf.numpy.save` / :func:`ocf.numpy.restore`, as in :mod:`ocf.torch`).

The graph has the edges ``tf.train.Checkpoint`` gives a Keras 3 model
(attribute names, :mod:`ocf.keras.structure`), and the optimizer's
per-variable state is also linked to its variables as slot variables. So a
TensorFlow checkpoint of a Keras model restores into Keras on any backend
through ``ocf.Checkpoint(...).restore(prefix)`` (TensorFlow is not needed),
and ``ocf convert model.ocf --to tensorflow prefix`` writes files that
``tf.train.Checkpoint(model=..., optimizer=...).restore`` takes.

Layers and optimizers that build their variables lazily receive their
values when Keras builds them (:mod:`ocf.keras.builds`); a restore into a
model not built yet needs ``partial=True`` and ``status.assert_consumed()``
once it is, as for any restore-on-create.

A checkpoint written on one backend restores on another with
``cast=True``: Keras keeps the optimizer's iteration counter in int64 on
TensorFlow and torch and in int32 on JAX (without x64), and a restore
refuses a value of another dtype unless told to cast it.

Flat: :func:`save_file` / :func:`load_file` for a mapping of tensors.

Needs the ``keras`` extra: ``pip install 'ocf[keras]'`` (and a backend).
"""

from __future__ import annotations

from ocf.keras import _framework
from ocf.keras.files import load_file, save_file
from ocf.keras.objects import register
from ocf.numpy import restore, save

register()
del _framework

__all__ = ["load_file", "restore", "save", "save_file"]
