"""Flat mappings of arrays, in the spirit of safetensors' ``save_file`` / ``load_file``.

The same names exist in every framework adapter (``ocf.torch`` has them
for tensors): a dict of key -> array goes to a name-based checkpoint and
comes back as a dict of key -> ``jax.Array``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Literal, overload

from ocf import numpy as ocf_numpy
from ocf.format.async_save import SaveHandle
from ocf.format.flat import Converted, write_arrays
from ocf.format.storage.backend import Layout
from ocf.format.storage.location import StorageOptions
from ocf.jax._framework import jax
from ocf.jax.tree_view import to_numpy


@overload
def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, layout: Layout = "file",
              compression: str | None = None, blocking: Literal[True] = True,
              storage_options: StorageOptions | None = None, **options: object) -> None: ...


@overload
def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, layout: Layout = "file",
              compression: str | None = None, blocking: Literal[False],
              storage_options: StorageOptions | None = None,
              **options: object) -> SaveHandle: ...


def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, layout: Layout = "file",
              compression: str | None = None, blocking: bool = True,
              storage_options: StorageOptions | None = None,
              **options: object) -> SaveHandle | None:
    """Write ``tensors`` (key -> JAX or NumPy array) as one checkpoint, atomically.

    The options are those of :func:`ocf.numpy.save_file`.

    Examples:
        >>> ocf.jax.save_file({"w": jnp.ones((4, 2))}, "model.ocf", metadata={"step": 10})
    """
    return write_arrays(Converted(tensors, to_numpy), path, metadata=metadata, layout=layout,
                        compression=compression, blocking=blocking,
                        storage_options=storage_options, options=options)


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              device: Any = None, dtype: Any = None, verify: bool = True,
              storage_options: StorageOptions | None = None) -> dict[str, jax.Array]:
    """The tensors of ``path`` (all, or ``keys``) as JAX arrays on ``device``.

    ``device`` is a ``jax.Device`` or sharding; the default device when None.
    Values keep their stored dtype unless ``dtype`` casts them all.

    Examples:
        >>> arrays = ocf.jax.load_file("model.ocf")  # dict[str, jax.Array]
    """
    arrays = ocf_numpy.load_file(path, keys, dtype=dtype, verify=verify,
                                 storage_options=storage_options)
    return {key: jax.device_put(value, device) for key, value in arrays.items()}
