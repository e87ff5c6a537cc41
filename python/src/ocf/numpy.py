"""NumPy arrays in OCF checkpoints: the API every framework adapter mirrors.

Flat mappings, in the spirit of safetensors' API: ``save_file`` writes a
mapping of key to array, ``load_file`` reads one back (all of it or the keys
asked for), ``open`` gives a lazy :class:`ocf.format.source.Source`. Object graphs: ``save``
writes any trackable state (nested dicts and lists of arrays, ``ocf.Module``
objects), ``restore`` copies a checkpoint's values into such a state in
place, strictly unless ``partial``.

``ocf.torch`` and ``ocf.jax`` have the same four functions with the same
arguments, and ``load_file`` a ``device`` as well; their tensors are
converted to arrays and written by the same code (:mod:`ocf.format.flat`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle
from ocf.format.flat import cast, read_arrays, write_arrays
from ocf.format.save_options import WriteOptions, save_file_signature
from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions
from ocf.interop.registry import is_ocf, open_checkpoint
from ocf.objects.restoring import NameMap, Rename, RestoreStatus
from ocf.objects.restoring import restore as restore_objects
from ocf.objects.saving import save_root

__all__ = ["load_file", "open", "restore", "save", "save_file"]

DtypeLike = np.dtype[Any] | type | str

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


@save_file_signature
def save_file(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
              **options: Unpack[WriteOptions]) -> SaveHandle | None:
    """Write ``tensors`` (key -> array) as one checkpoint at ``path``, atomically.

    The options (:class:`ocf.format.save_options.WriteOptions`) go to
    :class:`ocf.Writer`: ``layout`` is ``"file"`` or ``"directory"`` (an
    index and shard files); ``compression`` ``None`` or ``"zstd"``;
    ``storage_options`` go to fsspec for a URL such as ``s3://bucket/ckpt``;
    chunk_size, byte_shuffle, compression_level, max_shard_size, threads.
    With ``blocking=False`` it returns a :class:`ocf.SaveHandle` as soon as
    the tensors are copied to host memory, and writes and commits in the
    background.

    Examples:
        >>> ocf.save_file({"dense/kernel": np.ones((4, 2)), "step": np.array(10)}, "model.ocf",
        ...               metadata={"epoch": 3})
        >>> ocf.save_file(tensors, "ckpt", layout="directory", compression="zstd")
    """
    check_object_then_path("save_file", tensors, path, first_name="tensors")
    return write_arrays(tensors, path, metadata=metadata, blocking=blocking, options=options)


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              dtype: DtypeLike | None = None, verify: bool = True,
              storage_options: StorageOptions | None = None) -> dict[str, np.ndarray]:
    """Read the tensors of ``path`` (all, or ``keys``) into new writable arrays.

    ``path`` is an OCF checkpoint or any other format OCF reads (a TensorFlow
    prefix, a ``.safetensors`` file, an ``.npz`` archive; see :func:`open`).
    Values keep their stored dtype unless ``dtype`` casts them all.

    Examples:
        >>> tensors = ocf.load_file("model.ocf")  # new, writable arrays
        >>> kernel = ocf.load_file("model.ocf", keys=["dense/kernel"])["dense/kernel"]
    """
    if is_ocf(path):
        return read_arrays(path, keys, dtype=dtype, verify=verify,
                           storage_options=storage_options)
    with open_checkpoint(path, verify=verify) as source:
        wanted = source.keys() if keys is None else list(keys)
        for key in wanted:
            source.summary(key)  # NotFoundError naming the key, before anything is read
        arrays = {key: source.read_tensor(key) for key in wanted}
        if dtype is None:
            return arrays
        where = Path(source.path)
        return {key: cast(array, dtype, key, where) for key, array in arrays.items()}


def open(path: str | os.PathLike[str], *, verify: bool = True,
         storage_options: StorageOptions | None = None) -> AnySource:
    """Open the checkpoint at ``path`` for reading tensors by key, whatever its format.

    The result is an :class:`ocf.format.source.Source`, the same interface for
    every format OCF reads: a read-only mapping from key to the tensor's
    ``key``, ``dtype`` (an OCF dtype: ``.name``, ``.numpy``) and ``shape``, with
    ``metadata``, ``get_tensor``, ``read_tensor``, ``get_slice`` and ``summary``.
    An OCF checkpoint (a file, or a directory with index.ocf) opens as an
    :class:`ocf.Reader`; ``path`` may then be a URL of an fsspec filesystem
    (``s3://bucket/ckpt``), whose ``storage_options`` go to fsspec. Other
    formats: a TensorFlow prefix (or a directory with TensorFlow's
    ``checkpoint`` file), a ``.safetensors`` file, an ``.npz`` archive.

    Examples:
        >>> with ocf.open("model.ocf") as checkpoint:  # or .safetensors, .npz, a TF prefix
        ...     print(checkpoint["step"].dtype.name, checkpoint["step"].shape)
        ...     step = int(checkpoint.get_tensor("step"))
        ...     rows = checkpoint.get_slice("dense/kernel", np.s_[:2])
    """
    return open_checkpoint(path, verify=verify, storage_options=storage_options)


@overload
def save(state: object, path: str | os.PathLike[str],
         metadata: Mapping[str, object] | None = None, *, blocking: Literal[True] = True,
         **options: Unpack[WriteOptions]) -> str: ...


@overload
def save(state: object, path: str | os.PathLike[str],
         metadata: Mapping[str, object] | None = None, *, blocking: Literal[False],
         **options: Unpack[WriteOptions]) -> SaveHandle: ...


def save(state: object, path: str | os.PathLike[str],
         metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
         **options: Unpack[WriteOptions]) -> str | SaveHandle:
    """Write ``state`` (a trackable object, or a dict or list of them and of arrays)
    as the root of an object-based checkpoint at ``path``; return the path.

    The options are those of :func:`save_file`.

    Examples:
        >>> state = {"params": {"w": np.ones((4, 2))}, "step": np.array(10)}
        >>> ocf.numpy.save(state, "state.ocf")
        >>> # ocf.torch.save is this function:
        >>> ocf.torch.save({"model": net, "optimizer": opt}, "ckpt.ocf")
    """
    check_object_then_path("save", state, path)
    return save_root(state, path, metadata=metadata, blocking=blocking, options=options)


def restore(target: object, path: str | os.PathLike[str], *, start: str = "",
            partial: bool = False, cast: bool = False, name_map: NameMap | None = None,
            rename: Rename | None = None, verify: bool = True,
            storage_options: StorageOptions | None = None) -> RestoreStatus:
    """Copy the values of the checkpoint at ``path`` into ``target`` in place.

    ``target`` is what :func:`save` was given, or a state of the same
    structure; ``start`` names the checkpoint object to match with it.
    Unless ``partial``, every object of the target holding tensors must receive
    them and every checkpoint tensor must find its object
    (:meth:`ocf.RestoreStatus.assert_values_matched`).
    Every value is checked before the first is copied, so a failed restore
    changes nothing; a stored dtype other than the target's is an error
    unless ``cast``; objects renamed since the save are found through
    ``rename`` (``{"model/fc1": "model/encoder"}``; see :func:`ocf.restore`).

    Examples:
        >>> state = {"params": {"w": np.zeros((4, 2))}, "step": np.array(0)}
        >>> ocf.numpy.restore(state, "state.ocf")  # in place, strict
        >>> # ocf.torch.restore is this function:
        >>> ocf.torch.restore({"model": net}, "ckpt.ocf")
    """
    check_object_then_path("restore", target, path, first_name="target")
    return restore_objects(target, path, start=start, partial=partial, cast=cast,
                           name_map=name_map, rename=rename, verify=verify,
                           storage_options=storage_options)
