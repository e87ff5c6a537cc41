"""The name-based API: the ``tf.compat.v1.train.Saver`` workflow without TensorFlow.

A :class:`Saver` holds a mapping from checkpoint names to NumPy arrays. It
saves them under those names and restores into the same arrays in place,
so a dict renames in both directions and a partial dict saves or restores a
subset. :func:`list_variables` and :func:`load_variable` inspect a
checkpoint without a Saver.

All three also read TensorFlow checkpoints (the prefix a
``tf.compat.v1.train.Saver`` or ``tf.train.Checkpoint`` wrote), through
:mod:`ocf.interop.registry`, without TensorFlow: a partitioned variable is read
whole, and a string tensor as an object array of ``bytes``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.flat import write_arrays
from ocf.format.save_options import WriteOptions
from ocf.format.storage.location import StorageOptions
from ocf.interop.registry import open_checkpoint

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


class Saver:
    """Saves and restores a fixed set of arrays by name.

    Examples:
        >>> saver = ocf.Saver({"dense/kernel": kernel, "dense/bias": bias})
        >>> path = saver.save("training/model", global_step=100)  # training/model-100
        >>> ocf.Saver({"dense/kernel": kernel}).restore(path)  # a subset, in place
    """

    def __init__(self, var_list: Mapping[str, np.ndarray]) -> None:
        for name, array in var_list.items():
            if not isinstance(array, np.ndarray):
                raise InvalidError(f"Saver needs NumPy arrays; {name!r} is a "
                                   f"{type(array).__name__}")
        self.var_list = dict(var_list)

    def save(
        self,
        path: str | os.PathLike[str],
        global_step: int | None = None,
        *,
        metadata: Mapping[str, object] | None = None,
        blocking: bool = True,
        **options: Unpack[WriteOptions],
    ) -> str:
        """Write every array under its name; returns the path written.

        With ``global_step`` the path gets the suffix ``-<step>``, as
        TensorFlow's Saver numbers its checkpoints. The options are those of
        :func:`ocf.numpy.save_file`.
        """
        target = os.fspath(path) + ("" if global_step is None else f"-{int(global_step)}")
        write_arrays(self.var_list, target, metadata=metadata, blocking=blocking,
                     options=options)
        return target

    def restore(self, path: str | os.PathLike[str], *, verify: bool = True,
                storage_options: StorageOptions | None = None) -> None:
        """Copy each saved value into its array in place; dtypes and shapes must match.

        Every value is checked and read before any array is changed, so a
        failed restore leaves all arrays as they were. ``storage_options``
        go to fsspec for a URL such as ``s3://bucket/model``.
        """
        reader = open_checkpoint(path, verify=verify, storage_options=storage_options)
        try:
            for name, target in self.var_list.items():
                info = reader.summary(name)
                if info.dtype.numpy != target.dtype.newbyteorder("<") and not (
                    info.dtype.numpy is None and target.dtype == object
                ):
                    raise InvalidError(f"checkpoint has dtype {info.dtype.name}, the array "
                                       f"{target.dtype}", path=reader.path, key=name)
                if info.shape != target.shape:
                    raise InvalidError(f"checkpoint has shape {list(info.shape)}, the array "
                                       f"{list(target.shape)}", path=reader.path, key=name)
            # Read (and verify) everything before changing anything.
            values = {name: reader.get_tensor(name) for name in self.var_list}
        finally:
            reader.close()
        for name, target in self.var_list.items():
            np.copyto(target, values[name])


def list_variables(path: str | os.PathLike[str], *,
                   storage_options: StorageOptions | None = None
                   ) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype name, shape) of every tensor, sorted by name.

    Examples:
        >>> for name, dtype, shape in ocf.list_variables("model.ocf"):
        ...     print(name, dtype, shape)
    """
    reader = open_checkpoint(path, storage_options=storage_options)
    try:
        summaries = {key: reader.summary(key) for key in reader}
    finally:
        reader.close()
    return sorted((key, s.dtype.name, s.shape) for key, s in summaries.items())


def load_variable(path: str | os.PathLike[str], name: str, *,
                  storage_options: StorageOptions | None = None) -> np.ndarray:
    """The value of one tensor as a new array.

    Examples:
        >>> step = ocf.load_variable("model.ocf", "step")
    """
    reader = open_checkpoint(path, storage_options=storage_options)
    try:
        return reader.read_tensor(name)
    finally:
        reader.close()
