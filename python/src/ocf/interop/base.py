"""What a checkpoint format is to OCF: one :class:`Format` object per format.

A format knows how to tell its checkpoints (:meth:`Format.detect`), open
one as an :class:`ocf.format.source.Source` (:meth:`Format.open`), convert
it to OCF and back (:meth:`Format.to_ocf`, :meth:`Format.from_ocf`), and
describe it in its own terms for ``ocf inspect`` and ``ocf verify``
(:meth:`Format.overview`, :meth:`Format.storage`, :attr:`Format.checks`).
Each lives in its own folder of ocf.interop and is listed once in
:mod:`ocf.interop.registry`. Most read local paths only, through one Source
class, and convert through their ``convert`` module: :class:`LocalFormat`
says that once.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Protocol

from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions
from ocf.interop.text import format_table


class Format(ABC):
    """One checkpoint format OCF reads (and converts to and from)."""

    #: The format's one name: what ``ocf convert --to/--from`` take and the registry
    #: finds it by (in any case): "ocf", "safetensors", "npz", "tensorflow".
    name: str
    #: The name people read (``Source.format_name``, ``--json`` output): "TensorFlow".
    title: str
    #: A conversion target ending so is written in this format (".safetensors").
    suffixes: tuple[str, ...] = ()
    #: What reading every byte checks, for ``ocf verify``.
    checks: str = "what the format holds"
    #: Whether the format stores checksums of tensor bytes (else only the structure
    #: can be checked).
    checksums: bool = True

    @abstractmethod
    def detect(self, path: str) -> bool:
        """Whether the existing local ``path`` holds a checkpoint of this format."""

    @abstractmethod
    def open(self, path: str | os.PathLike[str], *, verify: bool = True,
             storage_options: StorageOptions | None = None) -> AnySource:
        """The checkpoint at ``path`` as a Source. Only OCF reads URLs, whose
        ``storage_options`` go to fsspec; the registry gives other formats local paths."""

    @abstractmethod
    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        """Convert ``src`` of this format into the OCF checkpoint ``dst`` (``options``
        go to :class:`ocf.Writer`)."""

    @abstractmethod
    def from_ocf(self, src: str, dst: str) -> None:
        """Write the OCF checkpoint ``src`` in this format at ``dst``."""

    def latest(self, directory: str) -> str | None:
        """The latest checkpoint a state file of this format in ``directory`` names
        (TensorFlow's ``checkpoint``), for ocf.latest_checkpoint; None if there is none."""
        del directory
        return None

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        """The bytes stored for ``key`` and their codec, where the format says."""
        del source, key
        return None, None

    def values_readable(self, source: AnySource, key: str) -> bool:
        """Whether ``ocf verify`` can read the values of ``key`` (False: a GGUF tensor of a
        quantized type, which OCF lists but does not dequantize; its structure was checked
        when the checkpoint opened)."""
        del source, key
        return True

    def checked_bytes(self, source: AnySource, values: int) -> int:
        """What ``ocf verify`` reports as checked, given the bytes of values it read."""
        del source
        return values

    def overview(self, source: AnySource) -> list[str]:
        """What ``ocf inspect`` prints of the checkpoint before any value: its path,
        what it is, and a table of its tensors."""
        rows = [("KEY", "DTYPE", "SHAPE")]
        rows += [(key, view.dtype.name, str(list(view.shape))) for key, view in source.items()]
        return [f"checkpoint: {source.path}", f"{self.title} file, {len(source)} tensors",
                format_table(rows)]


class OpensLocally(Protocol):
    """A Source class of a local format: ``source(path, verify=verify)`` opens one."""

    def __call__(self, path: str | os.PathLike[str], *, verify: bool = True) -> AnySource: ...


class Converter(Protocol):
    """A format's conversion module (``convert.py``)."""

    def to_ocf(self, src: str, dst: str, **options: Any) -> None: ...

    def from_ocf(self, src: str, dst: str) -> None: ...


class LocalFormat(Format):
    """A format read from local paths only (the registry gives URLs to OCF), opened as
    its :attr:`source` and converted by its :attr:`converter` module, unless it says
    otherwise."""

    #: What a checkpoint of the format opens as.
    source: OpensLocally
    #: The module converting it to OCF and back; None in a format that overrides
    #: :meth:`to_ocf` and :meth:`from_ocf` itself.
    converter: Converter | None = None

    def open(self, path: str | os.PathLike[str], *, verify: bool = True,
             storage_options: StorageOptions | None = None) -> AnySource:
        del storage_options  # a local path: the registry gives URLs to OCF
        return self.source(path, verify=verify)

    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        self._converter().to_ocf(src, dst, **options)

    def from_ocf(self, src: str, dst: str) -> None:
        self._converter().from_ocf(src, dst)

    def _converter(self) -> Converter:
        if self.converter is None:  # a mistake in the format's class, not in the input
            raise TypeError(f"{type(self).__name__} sets no converter and does not "
                            "override to_ocf/from_ocf")
        return self.converter
