"""Reading a DCP checkpoint's values with torch's own reader, fed a checked index.

Tensors are read by ``torch.distributed.checkpoint.load`` itself, in this
process and without a process group (``no_dist=True``), through a
FileSystemReader whose ``read_metadata`` returns a Metadata object built
afresh from the index :mod:`ocf.interop.dcp.metadata` checked (torch's own
would unpickle ``.metadata`` without restriction), and a load plan holding
tensors only: torch's default planner loads non-tensor values with
``torch.load(weights_only=False)``, so those are read here instead, each
storage item with ``torch.load(weights_only=True)``. The target tensors are
zeroed before torch fills them, whatever the chunks hold. One dcp.load reads
several tensors (ocf.interop.dcp.source reads ahead), as its planning costs
about as much as reading a small tensor.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from math import prod
from types import ModuleType
from typing import Any

from ocf.format.errors import MalformedError, OutOfMemoryError
from ocf.format.memory import needing, out_of_memory
from ocf.interop.dcp.metadata import Index, Item, Tensor
from ocf.interop.pytorch.loading import first_line


@contextmanager
def quiet_single_process() -> Iterator[None]:
    """Without DCP's warning that no process group is set up: reading (and writing) a
    checkpoint in one process is what OCF means to do."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def torch_metadata(torch: ModuleType, index: Index) -> Any:
    """torch's Metadata object for the checked ``index`` (tensors only)."""
    md = torch.distributed.checkpoint.metadata
    info = torch.distributed.checkpoint.filesystem._StorageInfo
    entries: dict[str, Any] = {}
    storage: dict[Any, Any] = {}
    for key, tensor in index.tensors.items():
        chunks = [md.ChunkStorageMetadata(torch.Size(c.start), torch.Size(c.extent))
                  for c in tensor.chunks]
        entries[key] = md.TensorStorageMetadata(md.TensorProperties(dtype=tensor.torch_dtype),
                                                torch.Size(tensor.shape), chunks)
        for c in tensor.chunks:
            storage[md.MetadataIndex(key, torch.Size(c.start))] = \
                info(c.item.file, c.item.offset, c.item.length)
    return md.Metadata(state_dict_metadata=entries, storage_data=storage)


def reader_class(torch: ModuleType) -> type[Any]:
    """A FileSystemReader that reads a checked Metadata object, not ``.metadata``."""
    base = torch.distributed.checkpoint.FileSystemReader

    class CheckedReader(base):  # type: ignore[misc, valid-type]
        def __init__(self, path: str, metadata: Any) -> None:
            super().__init__(path)
            self.checked = metadata

        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            return self.checked

    return CheckedReader


def read_tensors(torch: ModuleType, directory: str, tensors: dict[str, Tensor],
                 metadata: Any) -> dict[str, Any]:
    """The first tensor ``tensors`` names, and the others with it when one dcp.load reads
    them all; when that fails, the first alone, so that an error names the tensor that
    failed and a damaged tensor spoils the reading of no other."""
    try:
        return _load(torch, directory, tensors, metadata)
    except (MalformedError, OutOfMemoryError):
        if len(tensors) == 1:
            raise
    first = next(iter(tensors))
    return _load(torch, directory, {first: tensors[first]}, metadata)


def _load(torch: ModuleType, directory: str, tensors: dict[str, Tensor], metadata: Any
          ) -> dict[str, Any]:
    key = next(iter(tensors)) if len(tensors) == 1 else None  # named in errors
    nbytes = sum(t.dtype.itemsize * prod(t.shape) for t in tensors.values())
    with needing(nbytes, "reading these tensors", path=directory, key=key):
        state = {k: torch.zeros(t.shape, dtype=t.torch_dtype) for k, t in tensors.items()}
    reader = reader_class(torch)(directory, metadata)
    checkpoint_failure = torch.distributed.checkpoint.api.CheckpointException
    try:
        with quiet_single_process():
            torch.distributed.checkpoint.load(state, storage_reader=reader, no_dist=True)
    # torch.load of a damaged storage item raises what it will (RuntimeError, EOFError,
    # UnpicklingError, AssertionError for a chunk of the wrong size, ...), which dcp.load
    # wraps in a CheckpointException (a BaseException): MALFORMED, or out of memory.
    except (Exception, checkpoint_failure) as exc:
        inner = _unwrapped(exc, checkpoint_failure)
        if isinstance(inner, MemoryError):
            raise out_of_memory(nbytes, "reading these tensors", path=directory,
                                key=key) from None
        raise MalformedError(f"torch's DCP reader cannot read it: {first_line(inner)}",
                             path=directory, key=key) from None
    return state


def _unwrapped(exc: BaseException, wrapper: type[BaseException]) -> BaseException:
    """The first failure a CheckpointException wraps, or ``exc`` itself."""
    if isinstance(exc, wrapper):
        failures = getattr(exc, "failures", None) or {}
        for failed, _ in failures.values():
            return failed  # type: ignore[no-any-return]
    return exc


def read_value(torch: ModuleType, directory: str, key: str, item: Item) -> object:
    """The non-tensor value ``key``: its storage item through torch.load(weights_only=True)."""
    with open(os.path.join(directory, item.file), "rb") as f:
        data = os.pread(f.fileno(), item.length, item.offset)
    if len(data) != item.length:
        raise MalformedError(f"{item.file!r} ends inside this value's bytes", path=directory,
                             key=key)
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise MalformedError(f"torch.load(weights_only=True) cannot read this value: "
                             f"{first_line(exc)}", path=directory, key=key) from None
