"""Nested state dicts (a trainer's checkpoint) in one OCF file, without pickle.

Trainers hand over their state as one nested structure: dicts (keys of
str, int, float, bool or None, in order), lists and tuples whose leaves
are tensors, NumPy arrays and scalars, strings, numbers, bools and None.
:func:`save_tree` stores every tensor and array as an OCF tensor named by
its path (``optimizer_states/0/state/3/exp_avg``) and the structure around
them as typed metadata under :data:`STRUCTURE_KEY`; :func:`load_tree` gives
the same structure back, tensors bit for bit, Python types kept (an int
key stays an int, a tuple a tuple, an ``OrderedDict`` with its
``_metadata`` one too). Anything else (a class instance, a function) is
refused by path and type: nothing is ever pickled.

The structure encoding, one node per Python value:

- ``None``, bools, ints, floats, strings and bytes stand for themselves;
- every other node is a map with one kind entry: ``{"tensor": key}``,
  ``{"ndarray": key}``, ``{"numpy_scalar": key}`` (a tensor key of the
  file), ``{"list": [...]}``, ``{"tuple": [...]}``, ``{"dict": [k0, v0,
  k1, v1, ...]}``, ``{"ordered_dict": [...], "attributes": node}``,
  ``{"torch.dtype": "float32"}`` or ``{"torch.device": "cpu"}``.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ocf import numpy as ocf_numpy
from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle
from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.format.reader import Reader
from ocf.format.save_options import WriteOptions, save_file_signature
from ocf.format.storage.location import StorageOptions
from ocf.objects.tracking import escape_name
from ocf.torch._framework import torch
from ocf.torch.files import Device, place
from ocf.torch.tensors import from_numpy, to_numpy

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack

STRUCTURE_KEY = "ocf.torch.state_tree"
_SCALARS = (type(None), bool, int, float, str, bytes)
_KEY_SCALARS = (type(None), bool, int, float, str)
_TENSOR_KINDS = ("tensor", "ndarray", "numpy_scalar")


@save_file_signature
def save_tree(tree: object, path: str | os.PathLike[str],
              metadata: Mapping[str, object] | None = None, *, blocking: bool = True,
              **options: Unpack[WriteOptions]) -> SaveHandle | None:
    """Write ``tree`` (a nested state dict) as one checkpoint at ``path``, atomically.

    ``metadata`` adds entries of the file's own metadata (typed, readable
    by ``ocf inspect``); the options are those of :func:`ocf.numpy.save_file`.

    Examples:
        >>> save_tree({"model": net.state_dict(), "optimizer": opt.state_dict()}, "state.ocf")
    """
    check_object_then_path("save_tree", tree, path, first_name="tree")
    arrays: dict[str, np.ndarray] = {}
    structure = _encode(tree, [], arrays)
    entries = {**(metadata or {}), STRUCTURE_KEY: structure}
    return ocf_numpy.save_file(arrays, path, entries, blocking=blocking, **options)


def load_tree(path: str | os.PathLike[str], *, device: Device = "cpu", verify: bool = True,
              storage_options: StorageOptions | None = None) -> Any:
    """The nested state dict :func:`save_tree` wrote at ``path``.

    Every tensor and array is read into new memory of its own, like
    ``torch.load``; torch tensors come back on ``device`` (a device or a
    function of key and CPU tensor, as for :func:`ocf.torch.load_file`). A
    file that is not a state tree, or whose structure is not one
    :func:`save_tree` writes, is INVALID, naming the file and the path.

    Examples:
        >>> state = load_tree("state.ocf")
        >>> opt.load_state_dict(state["optimizer"])
    """
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        structure = reader.metadata.get(STRUCTURE_KEY)
        if structure is None:
            raise InvalidError(f"the checkpoint holds no {STRUCTURE_KEY!r} metadata entry: it "
                               "was not written by ocf.torch.state_trees.save_tree", path=path)
        wanted = dict(_tensor_references(structure, path))
        absent = [key for key in wanted if key not in reader]
        if absent:
            raise InvalidError(f"the state tree refers to {len(absent)} tensors the file lacks, "
                               f"first {absent[0]!r}", path=path, key=STRUCTURE_KEY)
    # New arrays, not the file mapping: each torch tensor then owns its storage
    # from offset 0, which some torch APIs assume (set_rng_state reads a
    # storage from its start, and crashes on a view into a mapped file).
    arrays = ocf_numpy.load_file(path, list(wanted), verify=verify,
                                 storage_options=storage_options)
    tensors = {key: place(from_numpy(array, key), key, device) if wanted[key] == "tensor"
               else array for key, array in arrays.items()}
    return _decode(structure, tensors, path, "")


def read_metadata(path: str | os.PathLike[str], *, verify: bool = True,
                  storage_options: StorageOptions | None = None) -> dict[str, MetadataValue]:
    """The file metadata of a state tree, without its structure entry or tensors."""
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        return {k: v for k, v in reader.metadata.items() if k != STRUCTURE_KEY}


# -- saving ---------------------------------------------------------------------

def _encode(value: object, where: list[str], arrays: dict[str, np.ndarray]) -> MetadataValue:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, torch.Tensor):
        return {"tensor": _add_array(to_numpy(value, _joined(where)), where, arrays)}
    if isinstance(value, np.ndarray):
        return {"ndarray": _add_array(value, where, arrays)}
    if isinstance(value, np.generic):
        return {"numpy_scalar": _add_array(np.asarray(value), where, arrays)}
    if isinstance(value, torch.dtype):
        return {"torch.dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"torch.device": str(value)}
    if isinstance(value, tuple):
        return {"tuple": [_encode(item, [*where, str(i)], arrays) for i, item in enumerate(value)]}
    if isinstance(value, list):
        return {"list": [_encode(item, [*where, str(i)], arrays) for i, item in enumerate(value)]}
    if isinstance(value, Mapping):
        return _encode_mapping(value, where, arrays)
    raise InvalidError(f"a state tree holds a {type(value).__module__}.{type(value).__qualname__}"
                       " at this path; storable are tensors, NumPy arrays and scalars, None, "
                       "bools, numbers, strings, bytes, and dicts, lists and tuples of these "
                       "(nothing is pickled)", key=_joined(where))


def _encode_mapping(value: Mapping[Any, Any], where: list[str],
                    arrays: dict[str, np.ndarray]) -> MetadataValue:
    pairs: list[MetadataValue] = []
    for key, item in value.items():
        if not isinstance(key, _KEY_SCALARS):
            raise InvalidError(f"a state tree's dict key is a {type(key).__name__}; storable keys"
                               " are str, int, float, bool and None", key=_joined(where))
        pairs += [key, _encode(item, [*where, str(key)], arrays)]
    if not isinstance(value, OrderedDict):
        return {"dict": pairs}
    node: dict[str, MetadataValue] = {"ordered_dict": pairs}
    attributes = getattr(value, "_metadata", None)  # torch's state_dict versions
    if attributes is not None:
        node["attributes"] = _encode(attributes, [*where, "_metadata"], arrays)
    return node


def _add_array(array: np.ndarray, where: list[str], arrays: dict[str, np.ndarray]) -> str:
    """Store ``array`` under its path, made unique if two paths print alike (1 and '1')."""
    base = _joined(where) or "value"
    key, n = base, 1
    while key in arrays:
        key, n = f"{base}#{n}", n + 1
    arrays[key] = array
    return key


def _joined(where: list[str]) -> str:
    return "/".join(escape_name(part) if part else "%00" for part in where)


# -- loading --------------------------------------------------------------------

def _tensor_references(node: MetadataValue, path: str | os.PathLike[str]
                       ) -> Iterator[tuple[str, str]]:
    """(key, kind) of every tensor the structure refers to, checking kinds on the way."""
    if isinstance(node, dict):
        kind = _kind(node, path, "")
        payload = node[kind]
        if kind in _TENSOR_KINDS and isinstance(payload, str):
            yield payload, kind
        elif isinstance(payload, list):
            for item in payload:
                yield from _tensor_references(item, path)
        if isinstance(node.get("attributes"), dict):
            yield from _tensor_references(node["attributes"], path)
    elif isinstance(node, list):
        raise InvalidError("a state tree node is a bare list (lists are {'list': [...]})",
                           path=path, key=STRUCTURE_KEY)


_KINDS = frozenset({*_TENSOR_KINDS, "list", "tuple", "dict", "ordered_dict", "torch.dtype",
                    "torch.device"})


def _kind(node: dict[str, MetadataValue], path: str | os.PathLike[str], where: str) -> str:
    kinds = [key for key in node if key in _KINDS]
    extra = set(node) - set(kinds) - ({"attributes"} if kinds == ["ordered_dict"] else set())
    if len(kinds) != 1 or extra:
        raise InvalidError(f"a state tree node at {where or 'the root'!r} has the entries "
                           f"{sorted(node)}; expected one of {sorted(_KINDS)}",
                           path=path, key=STRUCTURE_KEY)
    return kinds[0]


def _decode(node: MetadataValue, tensors: Mapping[str, Any], path: str | os.PathLike[str],
            where: str) -> Any:
    if not isinstance(node, dict):
        return node  # a scalar (bare lists were refused by _tensor_references)
    kind = _kind(node, path, where)
    payload = node[kind]
    decoder = _DECODERS[kind]
    return decoder(payload, node, tensors, path, where)


def _items(payload: MetadataValue, path: str | os.PathLike[str], where: str
           ) -> list[MetadataValue]:
    if not isinstance(payload, list):
        raise InvalidError(f"a state tree container at {where or 'the root'!r} holds a "
                           f"{type(payload).__name__}, not a list", path=path, key=STRUCTURE_KEY)
    return payload


def _decode_sequence(payload: MetadataValue, tensors: Mapping[str, Any],
                     path: str | os.PathLike[str], where: str) -> list[Any]:
    return [_decode(item, tensors, path, f"{where}/{i}")
            for i, item in enumerate(_items(payload, path, where))]


def _decode_pairs(payload: MetadataValue, node: Mapping[str, MetadataValue],
                  tensors: Mapping[str, Any], path: str | os.PathLike[str], where: str) -> Any:
    items = _items(payload, path, where)
    if len(items) % 2:
        raise InvalidError(f"a state tree dict at {where or 'the root'!r} has an odd number of "
                           "key and value entries", path=path, key=STRUCTURE_KEY)
    result: dict[Any, Any] = OrderedDict() if "ordered_dict" in node else {}
    for key, value in zip(items[::2], items[1::2]):
        if not isinstance(key, _KEY_SCALARS):
            raise InvalidError(f"a state tree dict at {where or 'the root'!r} has a key of type "
                               f"{type(key).__name__}", path=path, key=STRUCTURE_KEY)
        result[key] = _decode(value, tensors, path, f"{where}/{key}")
    if "attributes" in node:
        result._metadata = _decode(node["attributes"], tensors, path,  # type: ignore[attr-defined]
                                   f"{where}/_metadata")
    return result


def _decode_tensor(payload: MetadataValue, node: Mapping[str, MetadataValue],
                   tensors: Mapping[str, Any], path: str | os.PathLike[str], where: str) -> Any:
    if not isinstance(payload, str) or payload not in tensors:
        raise InvalidError(f"a state tree tensor at {where or 'the root'!r} names {payload!r}, "
                           "which is not a tensor of the file", path=path, key=STRUCTURE_KEY)
    value = tensors[payload]
    return value[()] if "numpy_scalar" in node else value


def _decode_named(kind: str) -> Callable[..., Any]:
    def decode(payload: MetadataValue, node: Mapping[str, MetadataValue],
               tensors: Mapping[str, Any], path: str | os.PathLike[str], where: str) -> Any:
        try:
            if not isinstance(payload, str):
                raise ValueError(payload)
            if kind == "torch.device":
                return torch.device(payload)
            dtype = getattr(torch, payload, None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(payload)
            return dtype
        except (AttributeError, ValueError, RuntimeError) as exc:
            raise InvalidError(f"a state tree {kind} at {where or 'the root'!r} is {payload!r}",
                               path=path, key=STRUCTURE_KEY) from exc
    return decode


_DECODERS: dict[str, Callable[..., Any]] = {
    "tensor": _decode_tensor,
    "ndarray": _decode_tensor,
    "numpy_scalar": _decode_tensor,
    "list": lambda payload, node, tensors, path, where:
        _decode_sequence(payload, tensors, path, where),
    "tuple": lambda payload, node, tensors, path, where:
        tuple(_decode_sequence(payload, tensors, path, where)),
    "dict": _decode_pairs,
    "ordered_dict": _decode_pairs,
    "torch.dtype": _decode_named("torch.dtype"),
    "torch.device": _decode_named("torch.device"),
}

__all__ = ["STRUCTURE_KEY", "load_tree", "read_metadata", "save_tree"]
