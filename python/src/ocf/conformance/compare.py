"""Comparing two meanings of a checkpoint (the JSON of :mod:`semantics`).

Both sides are first brought to one canonical form, so that spellings that
mean the same compare equal: any hexadecimal float spelling, any digest
case, any key order, and slot variables in any order (their order is
already reflected in the canonical paths). :func:`difference` then names
the first place where the two differ.
"""

from __future__ import annotations

import json

from ocf.conformance import semantics
from ocf.conformance.jsontypes import Json, expect_object, expect_str, short


def canonical(meaning: Json) -> dict[str, Json]:
    """``meaning`` in canonical form; ValueError if it is not a checkpoint's meaning."""
    meaning = expect_object(meaning, "the response")
    graph = meaning.get("object_graph")
    return {
        "tensors": {expect_str(key): _tensor(entry)
                    for key, entry in expect_object(meaning.get("tensors"), "tensors").items()},
        "metadata": _metadata(meaning.get("metadata")),
        "object_graph": None if graph is None else {
            expect_str(path): _node(node)
            for path, node in expect_object(graph, "object_graph").items()},
    }


def difference(expected: Json, actual: Json, where: str = "") -> str | None:
    """Where and how ``actual`` differs from ``expected``, or None when they are equal."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            here = f"{where}[{json.dumps(key)}]"
            if key not in actual:
                return f"{here}: missing (expected {short(expected[key])})"
            if key not in expected:
                return f"{here}: not expected (got {short(actual[key])})"
            found = difference(expected[key], actual[key], here)
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (a, b) in enumerate(zip(expected, actual)):
            found = difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    if expected == actual and type(expected) is type(actual):
        return None
    return f"{where or 'value'}: expected {short(expected)}, got {short(actual)}"


def _tensor(entry: Json) -> dict[str, Json]:
    entry = expect_object(entry, "a tensor")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise ValueError(f"tensor shape {shape!r} is not a list of integers")
    return {"dtype": expect_str(entry.get("dtype")), "shape": shape,
            "sha256": expect_str(entry.get("sha256")).lower()}


def _node(node: Json) -> dict[str, Json]:
    node = expect_object(node, "a node")
    slots = node.get("slot_variables", [])
    if not isinstance(slots, list) or not all(
            isinstance(s, list) and len(s) == 3 and all(isinstance(x, str) for x in s)
            for s in slots):
        raise ValueError(f"slot_variables {slots!r} is not a list of [path, name, path]")
    return {
        "type_name": expect_str(node.get("type_name")),
        "children": _strings(node.get("children", {}), "children"),
        "attributes": _strings(node.get("attributes", {}), "attributes"),
        "slot_variables": sorted(slots),
        "metadata": _metadata(node.get("metadata", {})),
    }


def _metadata(values: Json) -> dict[str, Json]:
    return semantics.metadata(semantics.parse_metadata(values))


def _strings(item: Json, what: str) -> dict[str, str]:
    return {expect_str(k): expect_str(v) for k, v in expect_object(item, what).items()}
