"""Converting checkpoints between OCF and other formats (``ocf convert``).

Each format of :mod:`ocf.interop.registry` converts itself to OCF and back
(:meth:`ocf.interop.base.Format.to_ocf`, :meth:`~ocf.interop.base.Format.from_ocf`);
converting between two foreign formats goes through a temporary OCF file,
and OCF to OCF rewrites the checkpoint with other storage options
(ocf.interop.ocf.relayout).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ocf.format.errors import InvalidError, NotFoundError, OCFError
from ocf.interop.base import Format
from ocf.interop.ocf import OCF
from ocf.interop.registry import FORMATS, by_name, detected, names

# Plain Python pickles: loading one runs code the file chooses, so OCF never reads or
# writes them (PyTorch's .pt files are read, by torch.load(weights_only=True) only:
# ocf.interop.pytorch).
PICKLED_SUFFIXES = (".pkl", ".pickle")
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
    found = detected(target)
    if found is not None:
        return found
    if not target.exists():
        raise NotFoundError("nothing to convert at this path", path=target)
    raise InvalidError(f"cannot tell the format of this file; known formats: "
                       f"{', '.join(names())} (give --from)", path=target)


def target_for(path: str | os.PathLike[str]) -> Format:
    """The format to write at ``path``, by its suffix: OCF for ``.ocf`` or none (a
    directory, a TensorFlow-style prefix); INVALID, listing the formats, for others."""
    target = Path(path)
    _refuse_pickle(target)
    suffix = target.suffix.lower()
    for found in FORMATS:
        if suffix in found.suffixes:
            return found
    if suffix and not suffix[1:].isdigit():  # "ckpt-3" or "model.ckpt-3" name no format
        raise InvalidError(f"no format writes {suffix!r} files; known formats: "
                           f"{', '.join(names())} (give --to)", path=target)
    return OCF


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
            to: str | None = None, source_format: str | None = None,
            **options: Any) -> tuple[str, str]:
    """Convert the checkpoint ``src`` into ``dst``; return (source, target) format names.

    The source format is detected unless given; the target is ``to``, else
    the one ``dst``'s suffix names, else OCF. ``options`` (layout,
    compression, chunk_size, ...) go to :class:`ocf.Writer` and need an OCF
    target; OCF to OCF rewrites the checkpoint with them.
    """
    source = by_name(source_format) if source_format else detect_source(src)
    target = by_name(to) if to else target_for(dst)
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    if options and target is not OCF:
        raise InvalidError(f"{', '.join(sorted(options))} set how OCF stores tensors; the "
                           f"target format is {target.name}", path=dst_s)
    if source is OCF and target is OCF:
        if not options:
            raise InvalidError("source and target are both OCF and no storage option "
                               "(--layout, --compression, --chunk-size) is given; nothing "
                               "to convert", path=src_s)
        OCF.to_ocf(src_s, dst_s, **options)
    elif source is OCF:
        target.from_ocf(src_s, dst_s)
    elif target is OCF:
        source.to_ocf(src_s, dst_s, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="ocf-convert-") as tmp:
            middle = os.path.join(tmp, "middle.ocf")
            source.to_ocf(src_s, middle)
            try:
                target.from_ocf(middle, dst_s)
            except OCFError as exc:  # name the user's file, not the temporary one
                raise exc.located(src_s, exc.key) from None
    return source.name, target.name
