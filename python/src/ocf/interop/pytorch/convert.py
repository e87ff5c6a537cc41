"""``torch.save`` files to OCF checkpoints and back.

To OCF: the file is read as :class:`ocf.interop.pytorch.source.PyTorchSource`
reads it (``torch.load(weights_only=True)``, flattened with ``.``-joined
keys: ocf.interop.pytorch.flatten); each tensor is written under its key,
the plain values and the report of what was not read become the
checkpoint's metadata (``pytorch.values``, ``pytorch.unread``), and a warning
names what was not read.

From OCF: the tensors are written with ``torch.save`` as one flat dict
``{key: tensor}`` (``model.load_state_dict`` takes a state dict as it is),
with the plain values of ``pytorch.values`` beside them under their flat
keys. Other metadata and an object graph have no place
there: dropped with a warning.
Byte-string tensors have no torch dtype and are refused.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ocf.format.errors import InvalidError, OCFError
from ocf.format.metadata import MetadataValue
from ocf.format.reader import Reader
from ocf.format.source import AnySource
from ocf.format.storage.local import atomic_output
from ocf.interop.output import warn_dropped, with_path, written
from ocf.interop.pytorch.flatten import VALUES_KEY, plain_values
from ocf.interop.pytorch.source import PyTorchSource
from ocf.interop.pytorch.tensors import from_numpy
from ocf.interop.pytorch.torch_needed import import_torch
from ocf.interop.source_writing import write_source


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the ``torch.save`` file ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    path = os.fspath(src)
    with PyTorchSource(path) as source:
        write_ocf(source, source.flat.unread, dst, **options)


def write_ocf(source: AnySource, unread: Mapping[str, MetadataValue],
              dst: str | os.PathLike[str], **options: Any) -> None:
    """Write every tensor and the metadata of ``source`` as the OCF checkpoint ``dst``,
    warning first of what was not read (``unread``: key -> what it is)."""
    warn_unread(unread, os.fspath(source.path))
    write_source(source, dst, **options)


def warn_unread(unread: Mapping[str, MetadataValue], path: str) -> None:
    """Tell the user what of the checkpoint at ``path`` was not read, and what it is."""
    if unread:
        listed = "; ".join(f"{key!r}: {what!s}" for key, what in sorted(unread.items())[:20])
        more = f" (and {len(unread) - 20} more)" if len(unread) > 20 else ""
        warnings.warn(f"{path}: not read (kept as a report in the metadata): {listed}{more}",
                      stacklevel=3)


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write the tensors of the OCF checkpoint ``src`` as a flat state dict at ``dst``."""
    torch = import_torch(dst, "writing a PyTorch checkpoint (torch.save)")
    state = torch_state(torch, src, "a PyTorch state dict")
    with atomic_output(dst) as out:
        torch.save(state, out)


def torch_state(torch: ModuleType, src: str | os.PathLike[str], target: str
                ) -> dict[str, Any]:
    """The OCF checkpoint ``src`` as one flat dict of torch tensors and plain values, for
    ``target`` (named in warnings of what it cannot hold)."""
    with Reader(src) as reader:
        for key, info in reader.items():
            if info.dtype.is_bytes:
                raise InvalidError(f"byte-string tensors have no torch dtype; {target} "
                                   "cannot hold them", path=reader.path, key=key)
        state: dict[str, Any] = plain_values(reader.metadata)
        warn_dropped("metadata", [k for k in reader.metadata if k != VALUES_KEY], target)
        if reader.object_graph is not None:
            warn_dropped("an object graph", ["(object graph)"], target)
        for key in reader:
            array = reader.read_tensor(key)
            try:
                state[key] = from_numpy(torch, array)
            except OCFError as exc:  # a dtype this torch lacks
                raise with_path(exc, reader.path, key) from None
            written(array.nbytes)
    return state
