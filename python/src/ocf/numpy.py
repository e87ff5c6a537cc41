"""Whole-file convenience functions, in the spirit of safetensors' API.

``save_file`` writes a mapping of arrays, ``load_file`` reads one back (all
of it or the keys asked for), ``open`` gives a lazy :class:`Reader`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Literal, overload

import numpy as np

from ocf.format.async_save import SaveHandle, Snapshot, frozen_metadata, submit, wait_for_pending
from ocf.format.reader import Reader
from ocf.format.storage.location import StorageOptions
from ocf.format.writer import Layout, Writer


@overload
def save_file(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str], *,
              metadata: Mapping[str, object] | None = None, layout: Layout = "file",
              compression: str | None = None, blocking: Literal[True] = True,
              **options: object) -> None: ...


@overload
def save_file(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str], *,
              metadata: Mapping[str, object] | None = None, layout: Layout = "file",
              compression: str | None = None, blocking: Literal[False],
              **options: object) -> SaveHandle: ...


def save_file(
    tensors: Mapping[str, np.ndarray],
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, object] | None = None,
    layout: Layout = "file",
    compression: str | None = None,
    blocking: bool = True,
    **options: object,
) -> SaveHandle | None:
    """Write ``tensors`` (key -> array) as one checkpoint at ``path``, atomically.

    ``options`` go to :class:`Writer` (chunk_size, byte_shuffle,
    compression_level, max_shard_size, threads, storage_options for a URL
    such as ``s3://bucket/ckpt``). With ``blocking=False`` it returns a
    :class:`ocf.format.async_save.SaveHandle` as soon as the tensors are copied to
    host memory, and writes and commits in the background.
    """
    if not blocking:
        frozen = frozen_metadata(metadata)

        def job(snapshot: Snapshot) -> str:
            _write(snapshot, path, frozen, layout, compression, options)
            return os.fspath(path)

        return submit(tensors, job, os.fspath(path))
    wait_for_pending()
    _write(tensors, path, metadata, layout, compression, options)
    return None


def _write(tensors: Mapping[str, np.ndarray], path: str | os.PathLike[str],
           metadata: Mapping[str, object] | None, layout: Layout, compression: str | None,
           options: Mapping[str, object]) -> None:
    with Writer(path, layout=layout, compression=compression, metadata=metadata,
                **options) as writer:  # type: ignore[arg-type]
        for key, array in tensors.items():
            writer.write(key, array)


def load_file(
    path: str | os.PathLike[str],
    keys: Iterable[str] | None = None,
    *,
    verify: bool = True,
    storage_options: StorageOptions | None = None,
) -> dict[str, np.ndarray]:
    """Read the tensors of ``path`` (all, or ``keys``) into new writable arrays."""
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        return reader.read_tensors(reader if keys is None else keys)


def open(path: str | os.PathLike[str], *, verify: bool = True,
         storage_options: StorageOptions | None = None) -> Reader:
    """Open the checkpoint at ``path`` (a file, or a directory with index.ocf).

    ``path`` may be a URL of an fsspec filesystem (``s3://bucket/ckpt``), whose
    ``storage_options`` go to fsspec.
    """
    return Reader(path, verify=verify, storage_options=storage_options)
