"""Flat state dicts to and from OCF files, as safetensors.torch does.

``save_file`` / ``load_file`` take and give a mapping of key to tensor;
``save_model`` / ``load_model`` do the same for an ``nn.Module``'s
``state_dict`` and check keys and shapes first, naming what does not fit.
``load_file`` gives CPU tensors over the file mapping, without copying
uncompressed tensors (see :mod:`ocf.torch.mapped`), then moves them where
``device`` says, like ``torch.load``'s ``map_location``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ocf import numpy as ocf_numpy
from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle
from ocf.format.errors import InvalidError, NotFoundError
from ocf.format.flat import Converted, write_arrays
from ocf.format.reader import Reader
from ocf.format.save_options import WriteOptions, save_file_signature
from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions
from ocf.interop.registry import is_ocf, open_checkpoint
from ocf.torch._framework import torch
from ocf.torch.mapped import MappedTensors
from ocf.torch.tensors import from_numpy, is_uninitialized, to_numpy

# Where loaded tensors go: a device, or a function of (key, CPU tensor) giving
# the tensor to return (moved, cast, or the CPU tensor itself).
Device = str | torch.device | Callable[[str, torch.Tensor], torch.Tensor]

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


@save_file_signature
def save_file(tensors: Mapping[str, torch.Tensor], path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
              **options: Unpack[WriteOptions]) -> SaveHandle | None:
    """Write ``tensors`` (key -> tensor) as one checkpoint at ``path``, atomically.

    The options are those of :func:`ocf.numpy.save_file`. CPU tensors are
    written from their own memory; tensors on other devices are copied to
    the CPU one at a time. A tensor held under two keys (tied weights) is
    stored twice.

    Examples:
        >>> ocf.torch.save_file(net.state_dict(), "weights.ocf", metadata={"epoch": 3})
    """
    def checked_numpy(tensor: Any, key: str) -> Any:
        if not isinstance(tensor, torch.Tensor):
            raise InvalidError(f"expected a torch.Tensor, got {type(tensor).__name__}",
                               path=path, key=key)
        return to_numpy(tensor, key)

    check_object_then_path("ocf.torch.save_file", tensors, path, first_name="tensors")
    return write_arrays(Converted(tensors, checked_numpy), path, metadata=metadata,
                        blocking=blocking, options=options)


def load_file(path: str | os.PathLike[str], keys: Iterable[str] | None = None, *,
              device: Device = "cpu", dtype: torch.dtype | None = None, verify: bool = True,
              storage_options: StorageOptions | None = None) -> dict[str, torch.Tensor]:
    """Read the tensors of ``path`` (all, or ``keys``) as torch tensors on ``device``.

    On the CPU, uncompressed tensors of a local file share memory with a
    private mapping of the file: nothing is copied, and in-place writes stay
    in this process. Compressed and sliced tensors, and those of an object
    store, are read into new memory. Values keep their stored dtype unless
    ``dtype`` casts them all. Every chunk is checksummed unless ``verify``
    is False. ``path`` may also be a checkpoint of another format OCF reads
    (a TensorFlow prefix, a ``.safetensors`` file, an ``.npz`` archive).

    Examples:
        >>> state_dict = ocf.torch.load_file("weights.ocf")  # zero-copy CPU tensors
        >>> on_gpu = ocf.torch.load_file("weights.ocf", device="cuda:0")
    """
    if not is_ocf(path):  # TensorFlow, safetensors, npz: read, not mapped
        arrays = ocf_numpy.load_file(path, keys, verify=verify)
        loaded = {key: place(from_numpy(array, key), key, device)
                  for key, array in arrays.items()}
        return loaded if dtype is None else {key: t.to(dtype) for key, t in loaded.items()}
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        wanted = list(reader) if keys is None else list(keys)
        for key in wanted:
            reader[key]  # NotFoundError naming the key, before anything is read
        mapped = MappedTensors(reader)
        loaded = {key: place(mapped.tensor(key), key, device) for key in wanted}
    return loaded if dtype is None else {key: t.to(dtype) for key, t in loaded.items()}


def place(tensor: torch.Tensor, key: str, device: Device) -> torch.Tensor:
    """Move a loaded CPU tensor where ``device`` says."""
    if callable(device):
        placed = device(key, tensor)
        if not isinstance(placed, torch.Tensor):
            raise InvalidError(f"the device function returned a {type(placed).__name__}, "
                               "not a torch.Tensor", key=key)
        return placed
    target = torch.device(device)
    return tensor if target.type == "cpu" else tensor.to(target)


def _tensors(source: AnySource, keys: list[str]) -> dict[str, torch.Tensor]:
    """CPU tensors for ``keys``: mapped from an OCF file, read from other formats."""
    if isinstance(source, Reader):
        mapped = MappedTensors(source)
        return {key: mapped.tensor(key) for key in keys}
    return {key: from_numpy(source.read_tensor(key), key) for key in keys}


def _object_hint(source: AnySource) -> str:
    """Where a flat load of an object-based checkpoint should have gone."""
    if isinstance(source, Reader):
        if source.index.graph_message is None:  # without decoding the graph
            return ""
    elif source.object_graph is None:
        return ""
    return ("; this is an object-based checkpoint (ocf.torch.save, ocf.Checkpoint): restore "
            "it with ocf.torch.restore({\"model\": model, ...}, path)")


def save_model(model: torch.nn.Module, path: str | os.PathLike[str], *,
               metadata: Mapping[str, object] | None = None,
               **options: Unpack[WriteOptions]) -> None:
    """Save ``model.state_dict()`` as a flat (name-based) checkpoint.

    Examples:
        >>> ocf.torch.save_model(net, "weights.ocf")
    """
    check_object_then_path("ocf.torch.save_model", model, path, first_name="model")
    save_file(model.state_dict(), path, metadata, **options)


def load_model(model: torch.nn.Module, path: str | os.PathLike[str], *, strict: bool = True,
               verify: bool = True) -> tuple[list[str], list[str]]:
    """Load a flat checkpoint into ``model`` through ``load_state_dict``.

    Keys and shapes are checked first: a key of the model missing from the
    file is NOT_FOUND, a tensor whose shape differs INVALID, and (when
    ``strict``) a key of the file the model lacks INVALID, each naming the
    key. Returns the missing and unexpected keys, as torch does. Values are
    copied into the model's tensors (cast to their dtypes), straight from
    the file mapping; lazy modules materialise from them. ``path`` may be a
    checkpoint of any format OCF reads (safetensors, npz, a TensorFlow prefix),
    whose tensors are read rather than mapped.

    Examples:
        >>> missing, unexpected = ocf.torch.load_model(net, "weights.ocf", strict=False)
    """
    check_object_then_path("ocf.torch.load_model", model, path, first_name="model")
    expected = model.state_dict()
    with open_checkpoint(path, verify=verify) as reader:
        missing = [key for key in expected if key not in reader]
        unexpected = [key for key in reader if key not in expected]
        if strict and missing:
            raise NotFoundError(f"the model's state has {len(missing)} keys the checkpoint "
                                f"lacks: {', '.join(missing[:20])}{_object_hint(reader)}",
                                path=reader.path, key=missing[0])
        if strict and unexpected:
            raise InvalidError(f"the checkpoint has {len(unexpected)} keys the model lacks: "
                               f"{', '.join(unexpected[:20])}", path=reader.path,
                               key=unexpected[0])
        for key, target in expected.items():
            if key in reader and not is_uninitialized(target) and \
                    tuple(reader[key].shape) != tuple(target.shape):
                raise InvalidError(f"the checkpoint's tensor has shape {list(reader[key].shape)}"
                                   f", the model's {list(target.shape)}", path=reader.path,
                                   key=key)
        loaded = _tensors(reader, [key for key in expected if key in reader])
    model.load_state_dict(loaded, strict=False)
    return missing, unexpected
