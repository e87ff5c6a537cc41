"""Restore-on-create for Keras objects that build their variables lazily.

A layer called for the first time, or an optimizer applying its first
gradients, runs ``build`` and only then has variables. A restore that
meets such an object before it is built leaves the values of its future
children waiting (:func:`ocf.objects.tracking.defer`); :func:`watch` wraps
the object's ``build`` so that, once Keras has built it, each child is
announced (:func:`ocf.objects.tracking.attached`) and takes its value
before anything uses it. ``after`` callbacks run then too (an optimizer's
slot values, which wait for the lists that hold them). Values are assigned
eagerly even when Keras builds while tracing a step (TensorFlow's ``fit``).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable
from typing import Any

from ocf.keras._framework import keras
from ocf.objects.tracking import attached, track

_WATCHED: weakref.WeakKeyDictionary[Any, list[Callable[[], None]]] = \
    weakref.WeakKeyDictionary()


def watch(obj: Any, after: Callable[[], None] | None = None) -> None:
    """Announce ``obj``'s children when its ``build`` has run, then call ``after``."""
    callbacks = _WATCHED.get(obj)
    if callbacks is None:
        callbacks = _WATCHED[obj] = []
        original = obj.build

        @functools.wraps(original)
        def build_then_announce(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            _built(obj)
            return result

        # object.__setattr__: Keras' own __setattr__ would try to track the function.
        object.__setattr__(obj, "build", build_then_announce)
    if after is not None:
        callbacks.append(after)


def _built(obj: Any) -> None:
    with eagerly():
        announce(obj)
        for callback in _WATCHED.pop(obj, []):
            callback()


def eagerly() -> contextlib.AbstractContextManager[object]:
    """Outside any function being traced: on the TensorFlow backend, Keras builds an
    optimizer (and a layer first called in ``fit``) while tracing the training step,
    and an assignment made there would become part of every step."""
    if keras.backend.backend() != "tensorflow":
        return contextlib.nullcontext()
    import tensorflow as tf  # imported already: it is the backend

    return tf.init_scope()  # type: ignore[no-any-return]


def announce(obj: object) -> None:
    """Announce every child of ``obj``, and the items of the lists and dicts it holds."""
    for name, child in track(obj).children().items():
        attached(obj, name, child)
        if isinstance(child, (list, tuple, dict)):
            announce(child)
