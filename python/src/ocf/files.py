"""Whole-file convenience functions, in the spirit of safetensors' API.

``save_file`` writes a mapping of arrays, ``load_file`` reads one back (all
of it or the keys asked for), ``open`` gives a lazy :class:`Reader`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import numpy as np

from ocf.reader import Reader
from ocf.writer import Layout, Writer


def save_file(
    tensors: Mapping[str, np.ndarray],
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, object] | None = None,
    layout: Layout = "file",
    compression: str | None = None,
    **options: object,
) -> None:
    """Write ``tensors`` (key -> array) as one checkpoint at ``path``, atomically.

    ``options`` go to :class:`Writer` (chunk_size, byte_shuffle,
    compression_level, max_shard_size, threads).
    """
    with Writer(path, layout=layout, compression=compression, metadata=metadata,
                **options) as writer:  # type: ignore[arg-type]
        for key, array in tensors.items():
            writer.write(key, array)


def load_file(
    path: str | os.PathLike[str],
    keys: Iterable[str] | None = None,
    *,
    verify: bool = True,
) -> dict[str, np.ndarray]:
    """Read the tensors of ``path`` (all, or ``keys``) into new writable arrays."""
    with Reader(path, verify=verify) as reader:
        return reader.read_tensors(reader if keys is None else keys)


def open(path: str | os.PathLike[str], *, verify: bool = True) -> Reader:
    """Open the checkpoint at ``path`` (a file, or a directory with index.ocf)."""
    return Reader(path, verify=verify)
