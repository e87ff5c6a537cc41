"""Choosing tensors by key on the command line: exact keys, globs, and near misses.

``--tensor`` takes a key or a glob (``fnmatch``: ``*``, ``?``, ``[...]``).
When nothing matches, the error names the keys the user most likely
meant: keys below the one given (``step`` -> ``step/.value``, an object's
attribute) first, then keys spelled alike.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence

from ocf.format.errors import NotFoundError

GLOB_CHARACTERS = "*?["
MAX_SUGGESTIONS = 3


def matching(keys: Sequence[str], pattern: str, path: str) -> list[str]:
    """The keys ``pattern`` names, in checkpoint order; NOT_FOUND with suggestions if none."""
    if pattern in keys:
        return [pattern]
    if any(c in pattern for c in GLOB_CHARACTERS):
        found = [k for k in keys if fnmatch.fnmatchcase(k, pattern)]
        if found:
            return found
    suggestions = nearest(keys, pattern)
    hint = f"; did you mean {' or '.join(map(repr, suggestions))}?" if suggestions else ""
    raise NotFoundError(f"no tensor matches this key{hint}", path=path, key=pattern)


def nearest(keys: Sequence[str], wanted: str) -> list[str]:
    """Up to MAX_SUGGESTIONS keys close to ``wanted``: those below it, then those with
    it as a path component (``net/step/.ATTRIBUTES/VARIABLE_VALUE``), then look-alikes."""
    below = [k for k in keys if k.startswith((wanted + "/", wanted + "."))]
    if not below:
        inner = "/" + wanted.strip("/") + "/"
        below = [k for k in keys if inner in "/" + k + "/"]
    if below:
        return sorted(below, key=len)[:MAX_SUGGESTIONS]
    return difflib.get_close_matches(wanted, keys, n=MAX_SUGGESTIONS, cutoff=0.6)
