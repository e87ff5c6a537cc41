"""Flat mappings of arrays, in the spirit of safetensors' ``save_file`` / ``load_file``.

The same names exist in every framework adapter (``ocf.torch`` has them
for tensors): a dict of key -> array goes to a name-based checkpoint and
comes back as a dict of key -> ``jax.Array``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ocf import numpy as ocf_numpy
from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle
from ocf.format.errors import InvalidError
from ocf.format.flat import Converted, write_arrays
from ocf.format.save_options import WriteOptions, save_file_signature
from ocf.format.storage.location import StorageOptions
from ocf.jax._framework import jax
from ocf.jax.tree_view import to_numpy

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


@save_file_signature
def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
              **options: Unpack[WriteOptions]) -> SaveHandle | None:
    """Write ``tensors`` (key -> JAX or NumPy array) as one checkpoint, atomically.

    The options are those of :func:`ocf.numpy.save_file`.

    Examples:
        >>> ocf.jax.save_file({"w": jnp.ones((4, 2))}, "model.ocf", metadata={"step": 10})
    """
    check_object_then_path("ocf.jax.save_file", tensors, path, first_name="tensors")
    return write_arrays(Converted(tensors, to_numpy), path, metadata=metadata,
                        blocking=blocking, options=options)


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              device: Any = None, dtype: Any = None, verify: bool = True,
              storage_options: StorageOptions | None = None) -> dict[str, jax.Array]:
    """The tensors of ``path`` (all, or ``keys``) as JAX arrays on ``device``.

    ``device`` is a ``jax.Device`` or sharding; the default device when None.
    Values keep their stored dtype unless ``dtype`` casts them all; a dtype JAX
    would hold as another (64 bits without ``jax_enable_x64``, byte strings) is
    an InvalidError naming the key, where ``jax.device_put`` would change the
    values.

    Examples:
        >>> arrays = ocf.jax.load_file("model.ocf")  # dict[str, jax.Array]
    """
    arrays = ocf_numpy.load_file(path, keys, dtype=dtype, verify=verify,
                                 storage_options=storage_options)
    for key, value in arrays.items():
        check_jax_holds(value, key, path, requested=dtype is not None)
    return {key: jax.device_put(value, device) for key, value in arrays.items()}


def check_jax_holds(array: np.ndarray, key: str, path: str | os.PathLike[str], *,
                    requested: bool = False) -> None:
    """InvalidError unless JAX holds ``array``'s dtype as it is (JAX without x64
    turns 64-bit values into 32-bit ones, losing what does not fit); ``requested``
    when the dtype is the caller's ``dtype=``, not the checkpoint's."""
    if array.dtype == object:
        raise InvalidError("OCF dtype bytes has no JAX counterpart; read it with "
                           "ocf.load_file or ocf.open instead", path=path, key=key)
    held = jax.dtypes.canonicalize_dtype(array.dtype)
    if held != array.dtype:
        if requested:
            raise InvalidError(f"dtype={array.dtype} was asked for, which JAX would hold as "
                               f"{held} (jax_enable_x64 is off): enable it, or ask for "
                               f"{held}", path=path, key=key)
        raise InvalidError(f"the checkpoint holds {array.dtype}, which JAX would hold as "
                           f"{held} (jax_enable_x64 is off): enable it, or load with "
                           f"dtype=jnp.{held}, a cast that loses what does not fit",
                           path=path, key=key)
