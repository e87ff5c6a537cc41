"""One argument order for every save and restore: the object first, the path second.

``save(state, path)``, ``save_file(tensors, path)``, ``restore(target, path)``
and ``load_into(state, path)``, as ``torch.save(obj, f)`` and safetensors'
``save_file(tensors, filename)`` take them. Before 0.3.0 some of them took
the path first, and code written for that order will be around for a
while: such a call gets a TypeError that says the order (not one about a
dict that is not a path), raised before anything is written or read.
"""

from __future__ import annotations

import os
from typing import Any, TypeGuard

PathArgument = str | bytes | os.PathLike[Any]


def is_path(value: object) -> TypeGuard[PathArgument]:
    """Whether ``value`` is what a save or restore takes as a path (a file, prefix or URL)."""
    return isinstance(value, (str, bytes, os.PathLike))


def check_object_then_path(function: str, first: object, path: object, *,
                           first_name: str = "state") -> None:
    """TypeError naming the order when ``function`` was given a path as its first
    argument, or something other than a path as its second.

    ``function`` is the public name (``ocf.torch.save``) and ``first_name``
    the name of its first parameter, both shown in the message.

    Examples:
        >>> check_object_then_path("ocf.torch.save", "ckpt.ocf", {"model": net})
        Traceback (most recent call last):
        TypeError: ocf.torch.save(state, path): the object comes first and the path
        second; got a path as the first argument ('ckpt.ocf')
    """
    order = f"{function}({first_name}, path): the object comes first and the path second"
    if is_path(first):
        raise TypeError(f"{order}; got a path as the first argument ({_shown(first)})")
    if not is_path(path):
        raise TypeError(f"{order}; got a {type(path).__name__} as the second argument, "
                        "where the path goes")


def _shown(path: PathArgument) -> str:
    text = repr(os.fspath(path))
    return text if len(text) <= 80 else text[:77] + "..."
