"""Renamed objects in a restore by structure: a map from checkpoint paths to object paths.

A restore matches the checkpoint's child edges to the live objects by name;
a layer renamed since the save (``fc1`` now ``encoder``) matches nothing, on
both sides. ``restore(..., rename=...)`` says where each checkpoint object
went:

- a dict maps path prefixes, ``{"model/fc1": "model/encoder"}``: a
  checkpoint path equal to a key, or below it (``model/fc1/weight``), takes
  the value in its place (``model/encoder/weight``); the longest key wins;
- a function takes each checkpoint path and returns the object path.

Paths are the canonical paths the restore's messages show on the
checkpoint's side (edge names joined by ``/``, from the checkpoint's root),
mapped to paths of the same kind that are then looked up from the root
object given to the restore (below ``start`` when it is given). Slot
variables follow their variables: renaming a layer carries its optimizer
state along.

When a strict restore fails with unmatched objects on both sides, its message
suggests the map (:func:`suggested`) when the paths differ in one name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ocf.format.errors import InvalidError

Rename = Mapping[str, str] | Callable[[str], str]


def path_mapper(rename: Rename) -> Callable[[str], str]:
    """``rename`` as one function of a checkpoint path; INVALID for a bad map."""
    if callable(rename):
        return _checked_function(rename)
    if not isinstance(rename, Mapping):
        raise InvalidError(f"rename must be a dict of path prefixes or a function, not a "
                           f"{type(rename).__name__}")
    prefixes: dict[str, str] = {}
    for old, new in rename.items():
        if not isinstance(old, str) or not isinstance(new, str) or not old.strip("/"):
            raise InvalidError(f"rename maps non-empty path strings to path strings, not "
                               f"{old!r} -> {new!r}")
        prefixes[old.strip("/")] = new.strip("/")
    longest_first = sorted(prefixes, key=len, reverse=True)

    def mapped(path: str) -> str:
        for old in longest_first:
            if path == old or path.startswith(old + "/"):
                return _joined(prefixes[old], path[len(old):].lstrip("/"))
        return path

    return mapped


def _checked_function(rename: Callable[[str], str]) -> Callable[[str], str]:
    def mapped(path: str) -> str:
        result = rename(path)
        if not isinstance(result, str):
            raise InvalidError(f"rename({path!r}) returned a {type(result).__name__}, not "
                               "a path")
        return result.strip("/")
    return mapped


def _joined(*parts: str) -> str:
    return "/".join(part for part in parts if part)


def suggested(checkpoint_paths: Iterable[str], object_paths: Iterable[str]
              ) -> dict[str, str]:
    """Prefix renames that would match unmatched checkpoint paths to unmatched object
    paths differing in exactly one name (``model/fc1/weight`` and
    ``model/encoder/weight`` give ``{"model/fc1": "model/encoder"}``); a prefix with
    several candidates is left out. Slot paths (``.slot``) follow their variables."""
    objects = [path.split("/") for path in object_paths]
    candidates: dict[str, set[str]] = {}
    for path in checkpoint_paths:
        parts = path.split("/")
        if ".slot" in parts:
            continue
        for other in objects:
            differing = [i for i, (a, b) in enumerate(zip(parts, other)) if a != b]
            if len(other) == len(parts) and len(differing) == 1:
                end = differing[0] + 1
                candidates.setdefault("/".join(parts[:end]), set()).add("/".join(other[:end]))
    return {old: next(iter(new)) for old, new in sorted(candidates.items()) if len(new) == 1}
