"""The neutral description of a checkpoint that a write case asks for (source.json).

::

    {"tensors": {"<key>": {"dtype": "<spec dtype name>", "shape": [...],
                           "data": "<file of the canonical bytes>"}},
     "metadata": {<typed JSON, as semantics.metadata gives>},
     "object_graph": null or {"nodes": [{"type_name": "...",
         "children": [[name, node_id], ...], "attributes": [[name, key], ...],
         "slot_variables": [[variable_id, slot_name, slot_node_id], ...],
         "metadata": {...}}, ...]}}

Data files hold the canonical bytes of spec/format.md (little-endian, C
order; byte strings in the length-table layout) and are named relative to
the directory of source.json. Node ids are positions in ``nodes``, node 0
the root.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ocf.conformance.jsontypes import Json, expect_count, expect_list, expect_object, expect_str
from ocf.conformance.semantics import parse_metadata
from ocf.format import dtypes
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import Node, SlotRef
from ocf.format.raw import decode_strings


@dataclass
class Source:
    """What to write: arrays by key, metadata, and the object graph if any."""

    tensors: dict[str, np.ndarray]
    metadata: dict[str, MetadataValue]
    object_graph: list[Node] | None


def load(path: Path) -> Source:
    """Read source.json at ``path`` and the data files it names; ValueError if malformed."""
    description = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(description, dict):
        raise ValueError(f"{path}: not a JSON object")
    tensors = description.get("tensors", {})
    graph = description.get("object_graph")
    return Source(
        tensors={key: array(entry, path.parent) for key, entry in expect_object(tensors).items()},
        metadata=parse_metadata(description.get("metadata", {})),
        object_graph=None if graph is None else nodes(graph),
    )


def array(entry: Json, directory: Path) -> np.ndarray:
    """The array of one tensor entry, its bytes read from ``directory``."""
    entry = expect_object(entry)
    dtype = dtypes.BY_NAME.get(expect_str(entry.get("dtype")))
    if dtype is None:
        raise ValueError(f"unknown dtype {entry['dtype']!r}")
    shape = tuple(expect_count(n) for n in expect_list(entry.get("shape")))
    data = np.frombuffer((directory / expect_str(entry.get("data"))).read_bytes(), dtype=np.uint8)
    count = math.prod(shape)
    if dtype.numpy is None:
        return decode_strings(data, count, shape)
    if data.size != count * dtype.itemsize:
        raise ValueError(f"{entry['data']}: {data.size} bytes, {dtype.name} {list(shape)} "
                         f"needs {count * dtype.itemsize}")
    return data.view(dtype.numpy).reshape(shape)


def nodes(graph: Json) -> list[Node]:
    """The nodes of a described object graph, in id order."""
    return [node(item) for item in expect_list(expect_object(graph).get("nodes"))]


def node(item: Json) -> Node:
    item = expect_object(item)
    return Node(
        type_name=expect_str(item.get("type_name", "")),
        children={expect_str(name): expect_count(child)
                  for name, child in _pairs(item.get("children"))},
        attributes={expect_str(name): expect_str(key)
                    for name, key in _pairs(item.get("attributes"))},
        slots=[SlotRef(expect_count(v), expect_str(name), expect_count(s))
               for v, name, s in _triples(item.get("slot_variables"))],
        metadata=parse_metadata(item.get("metadata", {})),
    )


def _pairs(item: Json) -> list[tuple[Json, Json]]:
    rows = expect_list([] if item is None else item)
    if any(not isinstance(row, list) or len(row) != 2 for row in rows):
        raise ValueError(f"expected [[name, value], ...], not {item!r}")
    return [(a, b) for a, b in rows]


def _triples(item: Json) -> list[tuple[Json, Json, Json]]:
    rows = expect_list([] if item is None else item)
    if any(not isinstance(row, list) or len(row) != 3 for row in rows):
        raise ValueError(f"expected [[variable_id, slot_name, slot_node_id], ...], not {item!r}")
    return [(a, b, c) for a, b, c in rows]
