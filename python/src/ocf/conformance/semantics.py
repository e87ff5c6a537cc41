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
import binascii
import hashlib
import re
from collections.abc import Callable, Mapping

import numpy as np

from ocf.conformance.jsontypes import (
    Json,
    expect_bool,
    expect_list,
    expect_object,
    expect_str,
)
from ocf.format import dtypes
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.format.raw import to_raw
from ocf.format.reader import Reader


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
    """Everything a checkpoint means: tensors, metadata and object graph.

    Tensors are read in table order, as a full verification reads them
    (spec/format.md, "Reader's order of checks"), so that of two damaged
    tensors the first in the table is the one reported [R-ERR-002].
    """
    stored_graph = reader.object_graph
    described = {key: tensor(reader.read_tensor(key)) for key in reader}
    return {
        "tensors": {key: described[key] for key in sorted(described)},
        "metadata": metadata(reader.metadata),
        "object_graph": None if stored_graph is None else graph(stored_graph),
    }


# -- the inverse: typed JSON back to Python values ----------------------------

# Hexadecimal floats as C99 and Python write them ("0x1.8p+0", "-0x0.0p+0"),
# and the special values. A decimal string is refused rather than misread:
# float.fromhex("1.5") would be 1.3125.
_HEX_FLOAT = re.compile(r"[+-]?(0x[0-9a-f]+(\.[0-9a-f]*)?|0x\.[0-9a-f]+)(p[+-]?[0-9]+)?"
                        r"|[+-]?(inf|infinity|nan)", re.IGNORECASE)
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_value(item: Json) -> MetadataValue:
    """The metadata value of typed JSON, the inverse of :func:`value`.

    Accepts any hexadecimal float spelling (C99 ``%a`` as well as
    ``float.hex()``); raises ValueError for anything that is not typed JSON.
    """
    if item is None:
        return None
    if not isinstance(item, dict) or len(item) != 1:
        raise ValueError(f"a typed value is null or an object with one key, not {item!r}")
    [(kind, inner)] = item.items()
    parse = _PARSERS.get(kind)
    if parse is None:
        raise ValueError(f"unknown value kind {kind!r}; known: {', '.join(_PARSERS)}")
    return parse(inner)


def parse_metadata(values: Json) -> dict[str, MetadataValue]:
    """A metadata map of typed JSON, the inverse of :func:`metadata`."""
    return {expect_str(key, "a metadata key"): parse_value(item)
            for key, item in expect_object(values, "metadata").items()}


def _int(item: Json) -> int:
    if not isinstance(item, str) or not _DECIMAL.fullmatch(item):
        raise ValueError(f"an int value is a string of decimal digits, not {item!r}")
    return int(item)


def _float(item: Json) -> float:
    if not isinstance(item, str) or not _HEX_FLOAT.fullmatch(item):
        raise ValueError(f"a float value is a hexadecimal float string, not {item!r}")
    return float.fromhex(item)


def _bytes(item: Json) -> bytes:
    try:
        return base64.b64decode(expect_str(item, "a bytes value"), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"a bytes value is base64, not {item!r}: {exc}") from None


def _list(item: Json) -> list[MetadataValue]:
    return [parse_value(x) for x in expect_list(item, "a list value")]


_PARSERS: dict[str, Callable[[Json], MetadataValue]] = {
    "bool": expect_bool, "int": _int, "float": _float, "string": expect_str, "bytes": _bytes,
    "list": _list, "map": parse_metadata,
}
