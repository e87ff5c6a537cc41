"""A module's ``get_extra_state`` / ``set_extra_state`` in object-based checkpoints.

``state_dict`` keeps what a module's ``get_extra_state`` returns under the
key ``_extra_state``, pickled by ``torch.save``. OCF pickles nothing, so the
value is taken apart into what the format stores, on the module's own node:

- every tensor in it is a tensor attribute of the node, ``extra_state.0``,
  ``extra_state.1``, ... in depth-first order, so a model's
  ``model/fp8_linear/.extra_state.0``;
- the metadata ``extra_state`` is the value with each tensor replaced by
  None; it may hold None, bools, ints (64-bit), floats, strings, bytes, and
  lists, tuples and str-keyed dicts of these;
- the metadata ``extra_state_tensors`` lists where the tensors were: for
  each, the dict keys (str) and list positions (int) leading to it from
  the top, ``[]`` when the tensor is the whole extra state.

Anything else (an object, a NumPy array, a dict with int keys) is refused
with an InvalidError, which the saving names with the module's path.

Saving happens when the module's class overrides ``get_extra_state``, and
restoring, through ``set_extra_state``, when it overrides that and the
checkpoint holds extra state for it, as ``state_dict`` and
``load_state_dict`` decide. A restore hands over tuples as lists (the
metadata has no tuples) and tensors on the CPU, as ``torch.load(...,
map_location="cpu")`` would; ``set_extra_state`` places them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.torch._framework import torch
from ocf.torch.tensors import from_numpy, to_numpy

VALUE = "extra_state"
TENSORS = "extra_state_tensors"
_INT64 = (-(1 << 63), (1 << 63) - 1)
# A place inside the extra state: dict keys and list positions from the top.
Where = list[str | int]


def saves(module: torch.nn.Module) -> bool:
    """Whether ``state_dict`` would hold extra state for ``module``."""
    return _overrides(module, "get_extra_state")


def restores(module: torch.nn.Module) -> bool:
    """Whether ``load_state_dict`` would hand extra state to ``module``."""
    return _overrides(module, "set_extra_state")


def _overrides(module: torch.nn.Module, method: str) -> bool:
    return getattr(type(module), method, None) is not getattr(torch.nn.Module, method)


def attribute(index: int) -> str:
    """The tensor attribute holding the extra state's tensor number ``index``."""
    return f"{VALUE}.{index}"


@dataclass
class Parts:
    """An extra state taken apart: metadata with tensors as None, and the tensors."""

    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def take_apart(module: torch.nn.Module) -> Parts:
    """``module.get_extra_state()`` as metadata and tensor attributes of its node."""
    tensors: list[tuple[Where, torch.Tensor]] = []
    value = _plain(module.get_extra_state(), [], tensors, type(module).__name__)
    parts = Parts(metadata={VALUE: value, TENSORS: [list(where) for where, _ in tensors]})
    for index, (_, tensor) in enumerate(tensors):
        parts.tensors[attribute(index)] = to_numpy(tensor)
    return parts


def _plain(value: object, where: Where, tensors: list[tuple[Where, torch.Tensor]],
           owner: str) -> MetadataValue:
    """``value`` as metadata, each tensor replaced by None and collected with its place."""
    if isinstance(value, torch.Tensor):
        tensors.append((where, value))
        return None
    if isinstance(value, (list, tuple)):
        return [_plain(item, [*where, i], tensors, owner) for i, item in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v, [*where, k], tensors, owner) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and \
            not _INT64[0] <= value <= _INT64[1]:
        raise InvalidError(f"the extra state of {owner} holds the integer {value} at "
                           f"{_shown(where)}, which does not fit in int64")
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    kind = "a dict with non-str keys" if isinstance(value, dict) else \
        f"a {type(value).__module__}.{type(value).__qualname__}"
    raise InvalidError(f"the extra state of {owner} holds {kind} at {_shown(where)}; "
                       "storable are tensors, None, bools, ints, floats, strings, bytes, "
                       "and lists, tuples and str-keyed dicts of these")


def _shown(where: Where) -> str:
    return "the top" if not where else "".join(f"[{k!r}]" for k in where)


def put_together(metadata: Mapping[str, MetadataValue], tensors: Mapping[str, np.ndarray],
                 owner: str) -> Any:
    """The extra state saved as ``metadata`` and ``tensors``, tensors back in place."""
    def tensor_of(name: str) -> torch.Tensor:
        if name not in tensors:
            raise InvalidError(f"the checkpoint's extra state of {owner} lacks its tensor "
                               f"attribute {name!r}")
        return from_numpy(tensors[name])

    return _assembled(metadata, tensor_of, owner)


def check_places(metadata: Mapping[str, MetadataValue], owner: str) -> None:
    """Raise what put_together would raise for the places ``metadata`` gives its
    tensors, before any tensor is read: what a restore checks before it copies."""
    _assembled(metadata, lambda name: torch.zeros(()), owner)


def _assembled(metadata: Mapping[str, MetadataValue], tensor_of: Callable[[str], torch.Tensor],
               owner: str) -> Any:
    # A copy: the restore's metadata belongs to the checkpoint's object graph.
    value: Any = copy.deepcopy(metadata.get(VALUE))
    places = metadata.get(TENSORS, [])
    if not isinstance(places, list):
        raise InvalidError(f"the checkpoint's {TENSORS} of {owner} is not a list")
    for index, where in enumerate(places):
        tensor = tensor_of(attribute(index))
        if not isinstance(where, list) or not all(isinstance(k, (str, int)) for k in where):
            raise InvalidError(f"the checkpoint's {TENSORS} of {owner} has {where!r}, not a "
                               "list of keys and positions")
        value = tensor if not where else _put(value, where, tensor, owner)
    return value


def _put(value: Any, where: list[Any], tensor: torch.Tensor, owner: str) -> Any:
    """``value`` with ``tensor`` at ``where``, where the saving left None."""
    try:
        container = value
        for step in where[:-1]:
            container = container[step]
        if container[where[-1]] is not None:
            raise KeyError(where[-1])
        container[where[-1]] = tensor
    except (IndexError, KeyError, TypeError):
        raise InvalidError(f"the checkpoint's extra state of {owner} has no place "
                           f"{_shown(where)} for a tensor") from None
    return value
