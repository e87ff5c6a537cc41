"""Flat mappings of arrays, in the spirit of safetensors' ``save_file`` / ``load_file``.

The same names exist in every framework adapter (``ocf.torch`` has them
for tensors): a dict of key -> array goes to a name-based checkpoint and
comes back as a dict of key -> ``jax.Array``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ocf import numpy as ocf_numpy
from ocf.format.writer import Writer
from ocf.jax._framework import jax
from ocf.jax.pytree import to_numpy


def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, **options: object) -> None:
    """Write ``tensors`` (key -> JAX or NumPy array) as one checkpoint, atomically.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    with Writer(path, metadata=metadata, **options) as writer:  # type: ignore[arg-type]
        for key, value in tensors.items():
            writer.write(key, to_numpy(value, key))


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              device: Any = None, verify: bool = True) -> dict[str, jax.Array]:
    """The tensors of ``path`` (all, or ``keys``) as JAX arrays on ``device``.

    ``device`` is a ``jax.Device`` or sharding; the default device when None.
    """
    arrays = ocf_numpy.load_file(path, keys, verify=verify)
    return {key: jax.device_put(value, device) for key, value in arrays.items()}
