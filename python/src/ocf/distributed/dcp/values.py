"""The non-tensor values of a DCP state dict, stored as OCF metadata without pickle.

``torch.distributed.checkpoint`` hands a storage writer every value that is
not a tensor (an optimizer's ``lr``, ``betas``, ``params`` names, a step
counter kept as a Python int) as the bytes of ``torch.save``: a pickle. OCF
stores no pickle: the writer unpickles those bytes with ``weights_only=True``
(which refuses anything but plain data) and keeps the plain value as
checkpoint metadata. Tuples are tagged so they come back as tuples (OCF
metadata has lists only); anything else that is not plain data is refused,
naming its key. The reader does the reverse and hands DCP the ``torch.save``
bytes it asks for, made in memory from the plain value.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import torch

from ocf.format.errors import InvalidError

# The metadata entry that holds what the DCP backend stores besides tensors.
METADATA_KEY = "torch.distributed.checkpoint"
# A map with this single key stands for a tuple: {"$tuple": [items...]}.
_TUPLE = "$tuple"


def from_saved_bytes(key: str, data: io.BytesIO) -> object:
    """The plain value of the ``torch.save`` bytes DCP made for ``key``."""
    data.seek(0)
    try:
        value = torch.load(data, weights_only=True)
    except Exception as exc:  # weights_only refuses classes it does not allow
        raise InvalidError(f"the value is not plain data (numbers, strings, lists, tuples, "
                           f"dicts): OCF stores no pickle ({exc})", key=key) from None
    return encode(key, value)


def to_saved_bytes(value: object) -> io.BytesIO:
    """``torch.save`` bytes of the value :func:`encode` stored, for DCP's planner."""
    out = io.BytesIO()
    torch.save(decode(value), out)
    out.seek(0)
    return out


def encode(key: str, value: object) -> object:
    """``value`` as OCF metadata: tuples tagged, everything else plain or refused."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [encode(key, item) for item in value]}
    if isinstance(value, list):
        return [encode(key, item) for item in value]
    if isinstance(value, Mapping):
        if set(value) == {_TUPLE}:
            raise InvalidError(f"a dict whose only key is {_TUPLE!r} cannot be told from a "
                               "stored tuple", key=key)
        if not all(isinstance(k, str) for k in value):
            raise InvalidError("dict keys of a stored value must be strings", key=key)
        return {k: encode(key, item) for k, item in value.items()}
    raise InvalidError(f"a value of type {type(value).__name__} is not storable without "
                       "pickle; store numbers, strings, lists, tuples and dicts of them",
                       key=key)


def decode(value: object) -> object:
    """The Python value :func:`encode` stored."""
    if isinstance(value, list):
        return [decode(item) for item in value]
    if isinstance(value, dict):
        if set(value) == {_TUPLE} and isinstance(value[_TUPLE], list):
            return tuple(decode(item) for item in value[_TUPLE])
        return {k: decode(item) for k, item in value.items()}
    return value
