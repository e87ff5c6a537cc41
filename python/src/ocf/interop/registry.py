"""The one registry of checkpoint formats: every format OCF reads, found by name or by path.

Every entry point that reads a checkpoint (``ocf.open``, ``ocf.load_file``,
restoring, loading by name, the framework adapters, every ``ocf`` command)
opens it with :func:`open_checkpoint`, which asks :data:`FORMATS` in order
which one holds it. The built-in formats are imported here, by this module
itself, so no entry point depends on what else was imported first.

Adding a format: a folder ``ocf/interop/NAME/`` whose ``__init__`` defines a
:class:`ocf.interop.base.Format` object (a one-file format: an
:class:`ocf.interop.file_source.FileFormat` naming its suffix, its
FileSource and its ``convert`` module), its import here and its entry in
:data:`FORMATS`; then a subclass of ``ocf.testing.SourceTests`` in
tests/interop/test_source_contract.py.
"""

from __future__ import annotations

import os

from ocf.format.errors import InvalidError
from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions, url_scheme
from ocf.interop.base import Format
from ocf.interop.dcp import DCP
from ocf.interop.gguf import GGUF
from ocf.interop.npz import NPZ
from ocf.interop.ocf import OCF
from ocf.interop.orbax import ORBAX
from ocf.interop.pytorch import PYTORCH
from ocf.interop.safetensors import SAFETENSORS
from ocf.interop.sharded_safetensors import SHARDED_SAFETENSORS
from ocf.interop.tensorflow import TENSORFLOW

# Detection asks them in this order; OCF (its magic bytes, or index.ocf) first.
FORMATS: tuple[Format, ...] = (
    OCF,
    SAFETENSORS,
    NPZ,
    TENSORFLOW,
    GGUF,
    SHARDED_SAFETENSORS,
    ORBAX,
    PYTORCH,
    DCP,
)


def names() -> list[str]:
    """Every format's name, as ``ocf convert --to/--from`` take them."""
    return [f.name for f in FORMATS]


def by_name(name: str) -> Format:
    """The format called ``name`` (in any case); INVALID listing the known ones."""
    for found in FORMATS:
        if found.name == name.lower():
            return found
    raise InvalidError(f"unknown checkpoint format {name!r}; known: {', '.join(names())}")


def detected(path: str | os.PathLike[str]) -> Format | None:
    """The format of the existing local checkpoint at ``path``; None when no format
    recognizes it (nothing there, or a file of no known format). URLs are OCF."""
    if url_scheme(path) is not None:
        return OCF
    text = os.fspath(path)
    return next((f for f in FORMATS if f.detect(text)), None)


def format_of(path: str | os.PathLike[str]) -> Format:
    """The format to read ``path`` as: the one detected, else OCF, whose reader then
    says what is missing or wrong."""
    return detected(path) or OCF


def is_ocf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is read as OCF: an OCF checkpoint, a URL, or nothing any format
    recognizes (the OCF reader then says what is missing)."""
    return format_of(path) is OCF


def open_checkpoint(path: str | os.PathLike[str], *, verify: bool = True,
                    storage_options: StorageOptions | None = None) -> AnySource:
    """The checkpoint at ``path``, of any format OCF reads, open as a Source.

    ``storage_options`` go to fsspec when ``path`` is a URL (``s3://...``, always OCF).
    """
    return format_of(path).open(path, verify=verify, storage_options=storage_options)


def latest_in(directory: str) -> str | None:
    """The latest checkpoint a format's own state file in ``directory`` names
    (TensorFlow's ``checkpoint``), if one does."""
    return next((found for f in FORMATS if (found := f.latest(directory)) is not None), None)
