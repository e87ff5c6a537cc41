"""Orbax checkpoints (JAX's checkpointing library): read as a Source through
orbax-checkpoint when it is installed (:mod:`.source`), converted to OCF."""

from __future__ import annotations

from collections.abc import Iterator
from math import prod
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.source import AnySource
from ocf.interop.base import LocalFormat
from ocf.interop.orbax.source import OrbaxSource, item_directory
from ocf.interop.source_writing import write_source
from ocf.interop.text import format_table

# Bytes of tensors restored by one call of orbax while converting.
BATCH_BYTES = 256 << 20


class OrbaxFormat(LocalFormat):
    """A directory saved by ``ocp.StandardCheckpointer`` / ``PyTreeCheckpointer`` (or a
    CheckpointManager step directory holding one such item)."""

    name = "orbax"
    title = "Orbax"
    checks = "none OCF can check: orbax restores each tensor"
    checksums = False
    source = OrbaxSource

    def detect(self, path: str) -> bool:
        return item_directory(path) is not None

    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        with OrbaxSource(src) as source:
            write_source(source, dst, _batched(source), **options)

    def from_ocf(self, src: str, dst: str) -> None:
        raise InvalidError("OCF does not write Orbax checkpoints; restore the OCF checkpoint "
                           "with ocf.jax and save it with orbax", path=dst)


    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        rows = [("KEY", "DTYPE", "SHAPE")]
        rows += [(key, view.dtype.name, str(list(view.shape))) for key, view in opened.items()]
        lines = [f"checkpoint: {opened.path}",
                 f"Orbax checkpoint (tree in {opened.item}), {len(opened)} tensors, keyed "
                 "by tree path; read through orbax-checkpoint, no checksums OCF can check"]
        lines += [f"metadata {key} = {value!r}" for key, value in opened.metadata.items()]
        return [*lines, format_table(rows)]


def _opened(source: AnySource) -> OrbaxSource:
    assert isinstance(source, OrbaxSource), "an Orbax checkpoint opens as OrbaxSource"
    return source


def _batched(source: OrbaxSource) -> Iterator[tuple[str, np.ndarray]]:
    """Every tensor of ``source``, restored BATCH_BYTES at a time."""
    batch: list[str] = []
    size = 0
    for key in source:
        view = source[key]
        batch.append(key)
        size += view.dtype.itemsize * max(1, prod(view.shape))
        if size >= BATCH_BYTES:
            yield from source.read_tensors(batch).items()
            batch, size = [], 0
    if batch:
        yield from source.read_tensors(batch).items()


ORBAX = OrbaxFormat()
