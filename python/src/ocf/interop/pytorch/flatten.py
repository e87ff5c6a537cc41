"""What ``torch.load`` returns, as OCF holds it: tensors by flat key, the rest as metadata.

A PyTorch checkpoint is any nesting of dicts, lists and tuples with tensors
and plain values at the leaves: a model's state dict, or a trainer's whole
dict (Lightning's ``state_dict``, ``optimizer_states``, ``loops``,
``hyper_parameters``, ``epoch``, ...). It is flattened as
``torch.distributed.checkpoint`` flattens a state dict (``flatten_state_dict``),
so the same training state has the same keys in a ``.pt`` file and in a DCP
directory:

* each tensor's key is its path of dict keys and list positions joined with
  ``.``: ``state_dict.layer.0.weight``, ``optimizer_states.0.state.0.exp_avg``;
  a state dict's own keys (``layer.0.weight``) are kept whole, and a file
  holding a single tensor names it ``tensor``;
* a dict, list or tuple holding no tensor is one plain value at its path
  (``optimizer_states.0.param_groups``, ``hyper_parameters``), kept as OCF
  metadata (:data:`VALUES_KEY`) when OCF metadata can hold it: None, bools,
  integers, floats, strings, bytes, lists, dicts with string keys (integer
  keys become strings; a torch dtype or device is kept as its name);
* whatever else there is (a sparse or quantized tensor, a dtype OCF lacks,
  an expanded view holding more elements than its storage, a complex
  number, a dict key that is not a string or integer) is reported,
  never dropped silently: :data:`UNREAD_KEY` maps its path to what it is.

Two paths that flatten to one key (``{"a.b": x, "a": {"b": y}}``) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.limits import MAX_METADATA_DEPTH, MAX_TENSORS
from ocf.format.metadata import MetadataValue
from ocf.interop.pytorch.tensors import unreadable_reason

#: The metadata entry holding the checkpoint's plain values, by flat key (of a
#: ``.pt`` file and of a DCP checkpoint alike, so that the two compare equal).
VALUES_KEY = "pytorch.values"
#: The metadata entry naming what was not read, by flat key, and what it is.
UNREAD_KEY = "pytorch.unread"
#: The key of the one tensor of a file that holds nothing else.
LONE_TENSOR_KEY = "tensor"
#: The key of the one plain value of a file that holds no tensor.
LONE_VALUE_KEY = "value"
# Deeper nesting than any trainer writes; a hostile file may nest without end.
MAX_NESTING = 64
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass
class Flat:
    """A loaded checkpoint, flattened: its tensors, values and unread entries by key."""

    tensors: dict[str, Any] = field(default_factory=dict)
    values: dict[str, MetadataValue] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        """The values and the unread entries as OCF metadata (none when empty)."""
        found: dict[str, MetadataValue] = {}
        if self.values:
            found[VALUES_KEY] = dict(self.values)
        if self.unread:
            found[UNREAD_KEY] = dict(self.unread)
        return found


def plain_values(metadata: Mapping[str, MetadataValue]) -> dict[str, MetadataValue]:
    """The plain values a PyTorch file or DCP checkpoint converted to OCF kept in its
    metadata (:data:`VALUES_KEY`), by flat key, to write back."""
    values = metadata.get(VALUES_KEY)
    return dict(values) if isinstance(values, dict) else {}


class NotAValueError(Exception):
    """A plain value OCF metadata cannot hold: the message says what it is."""


def flatten(torch: ModuleType, loaded: object, path: str) -> Flat:
    """``loaded`` (what ``torch.load`` returned for the file ``path``) flattened."""
    flat = Flat()
    if isinstance(loaded, torch.Tensor):
        _add(torch, flat, LONE_TENSOR_KEY, loaded, path, 0)
    else:
        _add(torch, flat, "", loaded, path, 0)
    return flat


def _add(torch: ModuleType, flat: Flat, key: str, value: object, path: str,
         depth: int) -> None:
    if depth > MAX_NESTING:
        raise LimitExceededError(f"dicts and lists nest deeper than {MAX_NESTING} levels",
                                 path=path, key=key)
    if isinstance(value, torch.Tensor):
        reason = unreadable_reason(torch, value)
        _claim(flat, key, path)
        if reason is None:
            flat.tensors[key] = value
        else:
            flat.unread[key] = reason
        return
    if isinstance(value, (Mapping, list, tuple)) and _holds_tensor(torch, value, 0):
        for name, item in _children(value):
            if isinstance(name, bool) or not isinstance(name, (str, int)):
                _claim(flat, _join(key, repr(name)), path)
                flat.unread[_join(key, repr(name))] = \
                    f"an entry under a dict key of type {type(name).__name__}"
                continue
            _add(torch, flat, _join(key, str(name)), item, path, depth + 1)
        return
    name = key or LONE_VALUE_KEY
    _claim(flat, name, path)
    try:
        flat.values[name] = as_value(torch, value, 0)
    except NotAValueError as exc:
        flat.unread[name] = str(exc)


def _children(value: Mapping[Any, Any] | list[Any] | tuple[Any, ...]
              ) -> list[tuple[object, object]]:
    if isinstance(value, Mapping):
        return list(value.items())
    return list(enumerate(value))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _claim(flat: Flat, key: str, path: str) -> None:
    """Refuse a second entry at ``key`` and more entries than a checkpoint may hold."""
    if key in flat.tensors or key in flat.values or key in flat.unread:
        raise InvalidError("two entries of the checkpoint flatten to this key (a dict key "
                           "holding '.' beside a nested dict of the same path)",
                           path=path, key=key)
    if len(flat.tensors) + len(flat.values) + len(flat.unread) >= MAX_TENSORS:
        raise LimitExceededError(f"more than {MAX_TENSORS} entries", path=path,
                                 requirement="R-LIMIT-001")


def _holds_tensor(torch: ModuleType, value: object, depth: int) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if depth > MAX_NESTING or not isinstance(value, (Mapping, list, tuple)):
        return False
    items = value.values() if isinstance(value, Mapping) else value
    return any(_holds_tensor(torch, item, depth + 1) for item in items)


def as_value(torch: ModuleType, value: object, depth: int) -> MetadataValue:
    """``value`` as OCF metadata; NotAValueError saying what it is when metadata cannot hold it."""
    if depth > MAX_METADATA_DEPTH:
        raise NotAValueError(f"plain values nesting deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, (bool, float, str, bytes)):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise NotAValueError(f"the integer {value} (beyond int64)")
        return value
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [as_value(torch, item, depth + 1) for item in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in value):
            raise NotAValueError("a dict with keys that are neither strings nor integers")
        return {str(k): as_value(torch, v, depth + 1) for k, v in value.items()}
    raise NotAValueError(f"a value of type {type(value).__module__}.{type(value).__qualname__}")
