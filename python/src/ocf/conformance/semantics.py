"""What a checkpoint means, as JSON: the common currency of the conformance suite.

Cases state their expected result in this form, adapters answer in it, and
the harness compares the two. It is independent of byte layout choices a
writer may make (offsets, chunking, codecs, node ids):

- every tensor as ``{"dtype": name, "shape": [...], "sha256": hex}``, the
  digest taken over the canonical bytes (spec/format.md: little-endian,
  C order; byte strings in the length-table layout);
- metadata values with their types kept: ``null``, ``{"bool": b}``,
  ``{"int": "<decimal>"}``, ``{"float": "<float.hex()>"}``,
  ``{"string": s}``, ``{"bytes": "<base64>"}``, ``{"list": [...]}``,
  ``{"map": {...}}`` (integers and floats as strings, so no JSON parser
  rounds them);
- the object graph keyed by canonical path (spec/objects.md), so node ids
  do not matter: per path its type name, child edges (name -> path),
  attributes (name -> tensor key), slot variables ([variable path, slot
  name, slot path]) and metadata.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ocf import dtypes
from ocf.graph import ObjectGraph
from ocf.metadata import MetadataValue
from ocf.raw import to_raw
from ocf.reader import Reader

Json = Any


def tensor(array: np.ndarray) -> dict[str, Json]:
    """The dtype, shape and sha256 of the canonical bytes of ``array``."""
    dtype = dtypes.for_array(array)
    digest = hashlib.sha256(to_raw(array, dtype)).hexdigest()
    return {"dtype": dtype.name, "shape": list(array.shape), "sha256": digest}


def value(item: MetadataValue) -> Json:
    """A metadata value as typed JSON."""
    if item is None:
        return None
    if isinstance(item, bool):
        return {"bool": item}
    if isinstance(item, int):
        return {"int": str(item)}
    if isinstance(item, float):
        return {"float": item.hex()}
    if isinstance(item, str):
        return {"string": item}
    if isinstance(item, bytes):
        return {"bytes": base64.b64encode(item).decode("ascii")}
    if isinstance(item, list):
        return {"list": [value(x) for x in item]}
    return {"map": {k: value(v) for k, v in sorted(item.items())}}


def metadata(values: Mapping[str, MetadataValue]) -> dict[str, Json]:
    return {k: value(v) for k, v in sorted(values.items())}


def graph(stored: ObjectGraph) -> dict[str, Json]:
    """The object graph keyed by canonical path."""
    result: dict[str, Json] = {}
    for i, node in enumerate(stored.nodes):
        result[stored.path(i)] = {
            "type_name": node.type_name,
            "children": {name: stored.path(child) for name, child in node.children.items()},
            "attributes": dict(node.attributes),
            "slot_variables": [[stored.path(s.variable), s.name, stored.path(s.slot_node)]
                               for s in node.slots],
            "metadata": metadata(node.metadata),
        }
    return result


def describe(reader: Reader) -> dict[str, Json]:
    """Everything a checkpoint means: tensors, metadata and object graph."""
    stored_graph = reader.object_graph
    return {
        "tensors": {key: tensor(reader.read_tensor(key)) for key in sorted(reader)},
        "metadata": metadata(reader.metadata),
        "object_graph": None if stored_graph is None else graph(stored_graph),
    }
