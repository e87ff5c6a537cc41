"""Expected results in the semantic JSON of ``ocf.conformance.semantics``, computed
from what a generator puts into a checkpoint, never by reading it back.

The form (see python/src/ocf/conformance/semantics.py):

- a tensor is ``{"dtype": name, "shape": [...], "sha256": hex}``, the digest of
  its canonical bytes (little-endian, C order; byte strings as the u64 length
  table followed by the payloads, [R-DTYPE-003]);
- a metadata value is ``null`` or ``{"<kind>": ...}`` with kinds bool, int
  (decimal string), float (``float.hex()``), string, bytes (base64), list and
  map;
- the object graph is keyed by canonical path (spec/objects.md, and the
  reference implementation's ocf/format/object_graph.py, which the spec text follows).

This module reimplements the dtype table, the byte-string layout and the
canonical path algorithm from the specification; it shares no code with the
reference implementation.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

# spec/format.md, "Data types": name -> (Dtype value, item size; 0 = variable).
DTYPES: dict[str, tuple[int, int]] = {
    "bool": (1, 1),
    "int8": (2, 1),
    "int16": (3, 2),
    "int32": (4, 4),
    "int64": (5, 8),
    "uint8": (6, 1),
    "uint16": (7, 2),
    "uint32": (8, 4),
    "uint64": (9, 8),
    "float16": (10, 2),
    "bfloat16": (11, 2),
    "float32": (12, 4),
    "float64": (13, 8),
    "complex64": (14, 8),
    "complex128": (15, 16),
    "float8_e4m3fn": (16, 1),
    "float8_e5m2": (17, 1),
    "bytes": (18, 0),
}


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


# -- tensors ----------


def tensor(dtype: str, shape: Sequence[int], raw: bytes) -> dict[str, Any]:
    """The description of a tensor whose canonical bytes are ``raw``."""
    check_raw(dtype, shape, raw)
    return {"dtype": dtype, "shape": [int(d) for d in shape],
            "sha256": hashlib.sha256(raw).hexdigest()}


def count(shape: Sequence[int]) -> int:
    return math.prod(shape)


def check_raw(dtype: str, shape: Sequence[int], raw: bytes) -> None:
    """Assert that ``raw`` is a canonical encoding of ``shape`` elements of ``dtype``."""
    itemsize = DTYPES[dtype][1]
    n = count(shape)
    if itemsize:
        assert len(raw) == n * itemsize, (dtype, shape, len(raw))
    else:
        assert len(split_strings(raw, n)) == n


def join_strings(items: Sequence[bytes]) -> bytes:
    """The DTYPE_BYTES layout: n u64 lengths, then the payloads [R-DTYPE-003]."""
    return b"".join(struct.pack("<Q", len(x)) for x in items) + b"".join(items)


def split_strings(raw: bytes, n: int) -> list[bytes]:
    lengths = struct.unpack(f"<{n}Q", raw[:8 * n])
    assert sum(lengths) == len(raw) - 8 * n
    out, at = [], 8 * n
    for length in lengths:
        out.append(raw[at:at + length])
        at += length
    return out


def elements(raw: bytes, dtype: str, n: int) -> list[bytes]:
    """The bytes of each of the ``n`` elements of canonical ``raw``, in C order."""
    itemsize = DTYPES[dtype][1]
    if not itemsize:
        return split_strings(raw, n)
    return [raw[i * itemsize:(i + 1) * itemsize] for i in range(n)]


def box_bytes(raw: bytes, dtype: str, shape: Sequence[int], start: Sequence[int],
              extent: Sequence[int]) -> bytes:
    """The canonical bytes of the box (start, extent) of a tensor [R-SLICE-003]."""
    window = tuple(slice(s, s + e) for s, e in zip(start, extent))
    itemsize = DTYPES[dtype][1]
    if itemsize:  # each element its itemsize bytes: select them as a byte array
        elements_as_rows = np.frombuffer(raw, dtype=np.uint8).reshape((*shape, itemsize))
        return elements_as_rows[window].tobytes()
    items = elements(raw, dtype, count(shape))
    ids = np.arange(count(shape), dtype=np.int64).reshape(tuple(shape))
    chosen = [items[i] for i in ids[window].reshape(-1).tolist()]
    return join_strings(chosen)


# -- metadata ----------


def i(value: int) -> dict[str, str]:
    return {"int": str(value)}


def f(value: float) -> dict[str, str]:
    return {"float": float(value).hex()}


def s(value: str) -> dict[str, str]:
    return {"string": value}


def b(value: bytes) -> dict[str, str]:
    return {"bytes": b64encode(value)}


def flag(value: bool) -> dict[str, bool]:
    return {"bool": value}


def lst(*values: Any) -> dict[str, list[Any]]:
    return {"list": list(values)}


def mp(**values: Any) -> dict[str, dict[str, Any]]:
    return {"map": dict(values)}


def nested(depth: int, kind: str, leaf: Any) -> Any:
    """``leaf`` at metadata level ``depth`` [R-META-002], inside lists or maps."""
    value = leaf
    for _ in range(depth):
        value = {"list": [value]} if kind == "list" else {"map": {"k": value}}
    return value


# -- object graph ----------


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def canonical_paths(nodes: Sequence[dict[str, Any]]) -> list[str | None]:
    """Canonical paths (spec/objects.md, "Canonical paths and keys").

    Breadth-first from the root along child edges in stored order; then, in
    node id order, each slot variable whose variable has a path gives its
    slot node ``<owner>/.slot/<variable>/<slot name>``; repeated until no node
    receives a path. In the graphs the generators store as valid ones, slot
    nodes have no child edges or slot variables of their own and every slot's
    variable is reached by child edges, so a single round gives every path.
    """
    n = len(nodes)
    path: list[str | None] = [None] * n
    path[0] = ""
    queue: deque[int] = deque([0])
    while queue:
        while queue:
            u = queue.popleft()
            for name, v in nodes[u].get("children", []):
                if path[v] is None:
                    path[v] = _join(path[u] or "", name)
                    queue.append(v)
        for u in range(n):
            owner = path[u]
            if owner is None:
                continue
            for variable, name, slot in nodes[u].get("slot_variables", []):
                held = path[variable]
                if path[slot] is None and held is not None:
                    path[slot] = _join(owner, ".slot", held, name)
                    queue.append(slot)
    return path


def attribute_key(path: str, name: str) -> str:
    return f"{path}/.{name}" if path else f".{name}"


def graph(nodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The object graph keyed by canonical path, as semantics.graph() gives it."""
    paths = canonical_paths(nodes)
    assert all(p is not None for p in paths), "every node of a valid graph has a path"
    for node in nodes:
        for _, _, slot in node.get("slot_variables", []):
            held = nodes[slot]
            assert not held.get("children") and not held.get("slot_variables"), \
                "slot nodes of valid graphs have no child edges or slot variables"
    assert len(set(paths)) == len(paths), "paths are distinct"
    out: dict[str, Any] = {}
    for node, path in zip(nodes, paths):
        assert path is not None
        out[path] = {
            "type_name": node.get("type_name", ""),
            "children": {name: paths[v] for name, v in node.get("children", [])},
            "attributes": dict(node.get("attributes", [])),
            "slot_variables": [[paths[v], name, paths[s]]
                               for v, name, s in node.get("slot_variables", [])],
            "metadata": dict(node.get("metadata", {})),
        }
    return out


def derived_keys(nodes: Sequence[dict[str, Any]]) -> dict[tuple[int, str], str]:
    """The key [R-GRAPH-007] derives for each (node id, attribute name)."""
    paths = canonical_paths(nodes)
    return {(i, name): attribute_key(paths[i] or "", name)
            for i, node in enumerate(nodes) for name, _ in node.get("attributes", [])}
