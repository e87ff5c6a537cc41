"""Flat mappings of Keras tensors, in the spirit of safetensors' ``save_file`` /
``load_file``.

The same names and arguments as every framework adapter: a dict of key ->
tensor (a backend tensor, a ``keras.Variable`` or a NumPy array) goes to a
name-based checkpoint, and comes back as a dict of key -> tensor of the
current Keras backend (``keras.ops.convert_to_tensor``).
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
from ocf.keras._framework import keras

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


def to_numpy(tensor: Any, key: str) -> np.ndarray:
    """A Keras tensor or variable as a NumPy array (copied from a device if needed)."""
    return np.asarray(keras.ops.convert_to_numpy(tensor))


@save_file_signature
def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
              **options: Unpack[WriteOptions]) -> SaveHandle | None:
    """Write ``tensors`` (key -> Keras tensor, variable or NumPy array) as one
    checkpoint at ``path``, atomically. The options are those of
    :func:`ocf.numpy.save_file`.

    Examples:
        >>> ocf.keras.save_file({v.path: v for v in model.weights}, "weights.ocf")
    """
    check_object_then_path("ocf.keras.save_file", tensors, path, first_name="tensors")
    return write_arrays(Converted(tensors, to_numpy), path, metadata=metadata,
                        blocking=blocking, options=options)


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              dtype: Any = None, verify: bool = True,
              storage_options: StorageOptions | None = None) -> dict[str, Any]:
    """The tensors of ``path`` (all, or ``keys``) as tensors of the Keras backend.

    Values keep their stored dtype unless ``dtype`` casts them all; a dtype the
    backend would hold as another (64 bits on JAX without x64; bfloat16, uint16
    and uint32 on torch; byte strings) is an InvalidError naming the key, where
    the conversion would change the values.

    Examples:
        >>> weights = ocf.keras.load_file("weights.ocf")  # tensors of the Keras backend
    """
    arrays = ocf_numpy.load_file(path, keys, dtype=dtype, verify=verify,
                                 storage_options=storage_options)
    return {key: backend_tensor(value, key, path) for key, value in arrays.items()}


def backend_tensor(array: np.ndarray, key: str, path: str | os.PathLike[str]) -> Any:
    """``array`` as a tensor of the Keras backend; InvalidError when the backend
    would hold its values in another dtype."""
    if array.dtype == object:
        raise InvalidError("OCF dtype bytes has no Keras counterpart; read it with "
                           "ocf.load_file or ocf.open instead", path=path, key=key)
    try:
        tensor = keras.ops.convert_to_tensor(array)
    except (TypeError, ValueError) as error:  # a dtype the backend lacks (float8 on torch)
        raise InvalidError(f"the {keras.backend.backend()} backend of Keras cannot hold "
                           f"{array.dtype}: {error}", path=path, key=key) from error
    held = keras.backend.standardize_dtype(tensor.dtype)
    if held != array.dtype.name:
        raise InvalidError(f"the checkpoint holds {array.dtype.name}, which the "
                           f"{keras.backend.backend()} backend of Keras would hold as {held}; "
                           "load with dtype=... to cast", path=path, key=key)
    return tensor
