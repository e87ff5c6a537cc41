"""Converting checkpoints between OCF and other formats (``ocf convert``).

Each foreign format is one :class:`Format` row of :data:`FORMATS`: a name,
a function telling whether a path holds that format, the file suffixes
that select it as a target, and the module implementing it. That module is
imported only when the format is used (a format may need a framework) and
exposes two functions::

    to_ocf(src: str, dst: str, **options) -> None   # foreign src -> OCF dst (Writer options)
    from_ocf(src: str, dst: str) -> None   # OCF checkpoint src -> foreign dst

Adding a format is one row appended to FORMATS. Converting between two
foreign formats goes through a temporary OCF file.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from ocf.format.errors import InvalidError, NotFoundError, OCFError
from ocf.formats.relayout import relayout
from ocf.objects.sources import is_ocf_checkpoint
from ocf.tensorflow.source import is_tensorflow_checkpoint

OCF = "ocf"


class FormatModule(Protocol):
    """What a format's module provides."""

    def to_ocf(self, src: str, dst: str, **options: Any) -> None: ...

    def from_ocf(self, src: str, dst: str) -> None: ...


@dataclass(frozen=True)
class Format:
    """One convertible format."""

    name: str
    detect: Callable[[Path], bool]  # does this existing path hold the format?
    suffixes: tuple[str, ...]  # a destination ending so is written in this format
    module: str | None  # import path of the module with to_ocf / from_ocf; None for OCF

    def load(self) -> FormatModule:
        if self.module is None:
            raise InvalidError(f"{self.name} is the format others convert to and from")
        return cast(FormatModule, importlib.import_module(self.module))


def _has_suffix(*suffixes: str) -> Callable[[Path], bool]:
    return lambda path: path.is_file() and path.suffix.lower() in suffixes


# Checked in order; the first whose detect() accepts a source wins.
FORMATS: list[Format] = [
    Format(OCF, is_ocf_checkpoint, (".ocf",), None),
    Format("safetensors", _has_suffix(".safetensors"), (".safetensors",),
           "ocf.formats.safetensors"),
    Format("npz", _has_suffix(".npz"), (".npz",), "ocf.formats.npz"),
    Format("tensorflow", is_tensorflow_checkpoint, (), "ocf.formats.tensorflow"),
]


def names() -> list[str]:
    return [f.name for f in FORMATS]


def by_name(name: str) -> Format:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise InvalidError(f"unknown checkpoint format {name!r}; known: {', '.join(names())}")


# Formats that are Python pickles: loading one runs code the file chooses, so OCF never
# reads or writes them.
PICKLED_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle")
_PICKLE_ADVICE = ("it is a pickle, which runs code when loaded; OCF does not read or write "
                  "pickles. Load it yourself with torch.load(path, weights_only=True) and "
                  "save the tensors with ocf.torch.save_file")


def _refuse_pickle(path: Path) -> None:
    if path.suffix.lower() in PICKLED_SUFFIXES:
        raise InvalidError(_PICKLE_ADVICE, path=path)


def detect_source(path: str | os.PathLike[str]) -> Format:
    """The format of the existing checkpoint at ``path``."""
    target = Path(path)
    _refuse_pickle(target)
    if not target.exists() and not any(f.detect(target) for f in FORMATS):
        raise NotFoundError("nothing to convert at this path", path=target)
    for fmt in FORMATS:
        if fmt.detect(target):
            return fmt
    raise InvalidError(f"cannot tell the format of this file; known formats: "
                       f"{', '.join(names())} (give --from)", path=target)


def target_for(path: str | os.PathLike[str]) -> Format:
    """The format to write at ``path``, by its suffix: OCF for ``.ocf`` or none (a
    directory, a TensorFlow-style prefix); INVALID, listing the formats, for others."""
    target = Path(path)
    _refuse_pickle(target)
    suffix = target.suffix.lower()
    for fmt in FORMATS:
        if suffix in fmt.suffixes:
            return fmt
    if suffix and not suffix[1:].isdigit():  # "ckpt-3" or "model.ckpt-3" name no format
        raise InvalidError(f"no format writes {suffix!r} files; known formats: "
                           f"{', '.join(names())} (give --to)", path=target)
    return by_name(OCF)


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
            to: str | None = None, source_format: str | None = None,
            **options: Any) -> tuple[str, str]:
    """Convert the checkpoint ``src`` into ``dst``; return (source, target) format names.

    The source format is detected unless given; the target is ``to``, else
    the one ``dst``'s suffix names, else OCF. ``options`` (layout,
    compression, chunk_size, ...) go to :class:`ocf.Writer` and need an OCF
    target; OCF to OCF rewrites the checkpoint with them (ocf.formats.relayout).
    """
    source = by_name(source_format) if source_format else detect_source(src)
    target = by_name(to) if to else target_for(dst)
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    if options and target.name != OCF:
        raise InvalidError(f"{', '.join(sorted(options))} set how OCF stores tensors; the "
                           f"target format is {target.name}", path=dst_s)
    if source.name == OCF and target.name == OCF:
        if not options:
            raise InvalidError("source and target are both OCF and no storage option "
                               "(--layout, --compression, --chunk-size) is given; nothing "
                               "to convert", path=src_s)
        relayout(src_s, dst_s, **options)
    elif source.name == OCF:
        target.load().from_ocf(src_s, dst_s)
    elif target.name == OCF:
        source.load().to_ocf(src_s, dst_s, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="ocf-convert-") as tmp:
            middle = os.path.join(tmp, "middle.ocf")
            source.load().to_ocf(src_s, middle)
            try:
                target.load().from_ocf(middle, dst_s)
            except OCFError as exc:  # name the user's file, not the temporary one
                raise exc.located(src_s, exc.key) from None
    return source.name, target.name
