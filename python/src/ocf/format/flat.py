"""A flat mapping of arrays as one name-based checkpoint: the one path every adapter uses.

``ocf.numpy.save_file``, ``ocf.torch.save_file``, ``ocf.jax.save_file`` and
the name-based :class:`ocf.Saver` all end in :func:`write_arrays`; the
framework adapters hand it a :class:`Converted` view of their tensors, so
that each tensor becomes a NumPy array only when the writer reaches it (a
model on an accelerator is copied to the host one tensor at a time).
:func:`read_arrays` is the matching read, with the one dtype policy of every
``load_file``: values keep their stored dtype unless ``dtype`` asks for a cast.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ocf.format.async_save import SaveHandle, Snapshot, frozen_metadata, submit, wait_for_pending
from ocf.format.errors import InvalidError
from ocf.format.reader import Reader
from ocf.format.storage.location import Location, StorageOptions
from ocf.format.writer import Writer

_WRITER_OPTIONS = inspect.signature(Writer)


class Converted(Mapping[str, np.ndarray]):
    """``tensors`` seen as NumPy arrays, each converted by ``convert(value, key)`` when read."""

    def __init__(self, tensors: Mapping[str, Any],
                 convert: Callable[[Any, str], np.ndarray]) -> None:
        self._tensors = tensors
        self._convert = convert

    def __getitem__(self, key: str) -> np.ndarray:
        return self._convert(self._tensors[key], key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def check_writer_options(options: Mapping[str, object]) -> None:
    """TypeError at the call for an option :class:`ocf.Writer` does not take, so that a
    background save never fails later on a typo."""
    _WRITER_OPTIONS.bind("path", **options)


def write_arrays(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str], *,
                 metadata: Mapping[str, object] | None, blocking: bool,
                 options: Mapping[str, object]) -> SaveHandle | None:
    """Write ``tensors`` as one checkpoint at ``path`` with the Writer ``options``
    (:class:`ocf.format.save_options.WriteOptions`); in the background when not
    ``blocking``, once the tensors are copied (:mod:`ocf.format.async_save`)."""
    settings = dict(options)
    check_writer_options(settings)
    if not blocking:
        frozen = frozen_metadata(metadata)

        def job(snapshot: Snapshot) -> str:
            _write(snapshot, path, frozen, settings)
            return os.fspath(path)

        return submit(tensors, job, os.fspath(path))
    wait_for_pending()
    _write(tensors, path, metadata, settings)
    return None


def _write(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str],
           metadata: Mapping[str, object] | None, settings: Mapping[str, object]) -> None:
    with Writer(path, metadata=metadata, **settings) as writer:  # type: ignore[arg-type]
        writer.write_many(tensors)


def read_arrays(path: str | os.PathLike[str], keys: Iterable[str] | None, *,
                dtype: np.dtype[Any] | type | str | None, verify: bool,
                storage_options: StorageOptions | None) -> dict[str, np.ndarray]:
    """The tensors of ``path`` (all, or ``keys``) as new writable arrays, cast to
    ``dtype`` when one is given."""
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        arrays = reader.read_tensors(reader if keys is None else keys)
        if dtype is None:
            return arrays
        return {key: cast(array, dtype, key, reader.path) for key, array in arrays.items()}


def cast(array: np.ndarray, dtype: np.dtype[Any] | type | str, key: str,
         path: Location) -> np.ndarray:
    """``array`` as ``dtype``, asked for explicitly; INVALID naming the key if it cannot be."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise InvalidError(f"dtype={dtype!r} is not a NumPy dtype", path=path, key=key) from None
    if (array.dtype.kind == "O") != (target.kind == "O"):
        raise InvalidError(f"cannot cast a {array.dtype} tensor to {target}", path=path, key=key)
    return array.astype(target, copy=False)
