"""``ocf.Checkpoint``: the root of an object-based checkpoint (seeds 000, 002, 003).

``Checkpoint(model=model, optimizer=optimizer)`` makes a root with one
named edge per keyword (more can be added as attributes, as with any
:class:`ocf.Module`) plus ``save_counter``. :meth:`Checkpoint.save` writes
the numbered ``prefix-N``; :meth:`Checkpoint.write` writes exactly the path
given; :meth:`Checkpoint.restore` matches by structure and returns a
:class:`ocf.RestoreStatus`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, overload

import numpy as np

from ocf.format.async_save import SaveHandle
from ocf.format.errors import InvalidError
from ocf.format.storage.location import StorageOptions
from ocf.objects.restoring import NameMap, Rename, RestoreStatus, restore
from ocf.objects.saving import write, write_async
from ocf.objects.tracking import Module, Variable, is_metadata, is_trackable

SAVE_COUNTER = "save_counter"

# What to do with an untracked object of a framework, by its top-level package.
_ADVICE_FOR_PACKAGE = {
    "torch": "import ocf.torch first (it makes torch modules, optimizers and tensors "
             "trackable)",
    "keras": "import ocf.keras first (it makes Keras models, layers and optimizers "
             "trackable)",
    **dict.fromkeys(("jax", "jaxlib", "flax", "optax"),
                    "put a JAX pytree in an ocf.jax.TreeState(tree)"),
    "tensorflow": "OCF tracks Keras objects (ocf.keras), not TensorFlow's own; pass a "
                  "Keras model or optimizer, or the variable's value as an array",
}
_ADVICE = "pass an ocf.Module, a Variable, an array, a list or dict of them, or a scalar"


def _refuse_what_would_be_dropped(where: str, value: object) -> None:
    """InvalidError naming the first part of ``value`` (itself, or an item of a plain
    dict, list or tuple in it, at any depth) that would be saved as nothing: neither
    trackable nor a scalar, or under a dict key that is not a string."""
    if is_metadata(value):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidError(f"{where}: the key {key!r} is not a string, so nothing "
                                   "under it would be saved; name it with a string")
            _refuse_what_would_be_dropped(f"{where}[{key!r}]", item)
    elif isinstance(value, (list, tuple)):
        for number, item in enumerate(value):
            _refuse_what_would_be_dropped(f"{where}[{number}]", item)
    elif not is_trackable(value):
        module = type(value).__module__
        advice = _ADVICE_FOR_PACKAGE.get(module.partition(".")[0], _ADVICE)
        raise InvalidError(f"{where}: a {module}.{type(value).__qualname__} is neither "
                           f"trackable nor a scalar, so nothing of it would be saved; "
                           f"{advice}")


class Checkpoint(Module):
    """Groups the objects to save; each keyword becomes a named edge of the root.

    Examples:
        >>> checkpoint = ocf.Checkpoint(model=model, optimizer=optimizer)
        >>> path = checkpoint.save("training/ckpt")  # training/ckpt-1, then -2, ...
        >>> checkpoint.restore(path).assert_consumed()
    """

    ocf_type_name = "ocf.Checkpoint"

    def __init__(self, **objects: object) -> None:
        self._save_counter = Variable(np.array(0, dtype=np.int64))
        for name, value in objects.items():
            if name == SAVE_COUNTER:
                raise InvalidError(f"{SAVE_COUNTER!r} is the checkpoint's own counter; name "
                                   "the object otherwise")
            _refuse_what_would_be_dropped(f"Checkpoint({name}=...)", value)
            setattr(self, name, value)

    def ocf_children(self) -> Mapping[str, object]:
        return {**super().ocf_children(), SAVE_COUNTER: self._save_counter}

    @property
    def save_counter(self) -> int:
        """How many numbered checkpoints :meth:`save` has written (restored too)."""
        return int(self._save_counter.value)

    @overload
    def save(self, prefix: str | os.PathLike[str], *, blocking: Literal[True] = True,
             **options: object) -> str: ...

    @overload
    def save(self, prefix: str | os.PathLike[str], *, blocking: Literal[False],
             **options: object) -> SaveHandle: ...

    def save(self, prefix: str | os.PathLike[str], *, blocking: bool = True,
             **options: object) -> str | SaveHandle:
        """Write the numbered checkpoint ``prefix-N``, N = save_counter + 1; return its path.

        ``options`` go to :class:`ocf.Writer` (layout, compression,
        storage_options for a URL prefix such as ``s3://bucket/run/ckpt``, ...).
        With ``blocking=False``, return a :class:`ocf.format.async_save.SaveHandle`
        once the tensors are copied to host memory; the write and commit run in
        the background, and the counter stays advanced even if they fail.
        """
        self._save_counter.value[...] = self.save_counter + 1
        path = f"{os.fspath(prefix)}-{self.save_counter}"
        try:
            if not blocking:
                return write_async(self, path, **options)  # type: ignore[arg-type]
            return write(self, path, **options)  # type: ignore[arg-type]
        except BaseException:
            self._save_counter.value[...] = self.save_counter - 1
            raise

    @overload
    def write(self, path: str | os.PathLike[str], *, blocking: Literal[True] = True,
              **options: object) -> str: ...

    @overload
    def write(self, path: str | os.PathLike[str], *, blocking: Literal[False],
              **options: object) -> SaveHandle: ...

    def write(self, path: str | os.PathLike[str], *, blocking: bool = True,
              **options: object) -> str | SaveHandle:
        """Write a checkpoint of everything this root reaches at exactly ``path``.

        ``blocking=False`` as for :meth:`save`.
        """
        if not blocking:
            return write_async(self, path, **options)  # type: ignore[arg-type]
        return write(self, path, **options)  # type: ignore[arg-type]

    def restore(self, path: str | os.PathLike[str], *, start: str = "", partial: bool = False,
                cast: bool = False, name_map: NameMap | None = None,
                rename: Rename | None = None, verify: bool = True,
                storage_options: StorageOptions | None = None) -> RestoreStatus:
        """Restore by structure from ``path``, strictly unless ``partial``, with objects
        renamed since the save found through ``rename``; see :func:`ocf.restore`."""
        return restore(self, path, start=start, partial=partial, cast=cast,
                       name_map=name_map, rename=rename, verify=verify,
                       storage_options=storage_options)
