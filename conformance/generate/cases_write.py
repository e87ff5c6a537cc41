"""Write cases: neutral descriptions of checkpoints a writer must produce.

A write case's source.json lists tensors (dtype, shape and a file of their
canonical bytes), typed metadata and an optional object graph; the writer
under test writes them in the case's layout, and the harness compares what
any reader then sees with ``expect`` (semantic JSON, computed here from the
source alone), not the bytes written.
"""

from __future__ import annotations

import struct
from typing import Any

import sample_data as samples
import semantic
from case_dirs import Suite
from cases_read import every_kind, example_graph, slot_graph
from semantic import b, f, i, lst, mp, s

Entries = dict[str, tuple[str, list[int], bytes]]


def source(entries: Entries, metadata: dict[str, Any],
           nodes: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """source.json and its data files, tensors numbered in key order."""
    tensors, data = {}, {}
    for n, key in enumerate(sorted(entries)):
        dtype, shape, raw = entries[key]
        semantic.check_raw(dtype, shape, raw)
        name = f"data/{n:03d}.bin"
        tensors[key] = {"dtype": dtype, "shape": shape, "data": name}
        data[name] = raw
    graph = None if nodes is None else {"nodes": [_full_node(node) for node in nodes]}
    return {"tensors": tensors, "metadata": metadata, "object_graph": graph}, data


def _full_node(node: dict[str, Any]) -> dict[str, Any]:
    return {"type_name": node.get("type_name", ""), "children": node.get("children", []),
            "attributes": node.get("attributes", []),
            "slot_variables": node.get("slot_variables", []),
            "metadata": node.get("metadata", {})}


def expect(entries: Entries, metadata: dict[str, Any],
           nodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"result": "ok",
            "tensors": {key: semantic.tensor(*value) for key, value in entries.items()},
            "metadata": metadata,
            "object_graph": None if nodes is None else semantic.graph(nodes)}


def add(suite: Suite, case_id: str, requirements: list[str], description: str,
        entries: Entries, metadata: dict[str, Any], nodes: list[dict[str, Any]] | None = None,
        layout: str = "file", level: str = "required", checks: list[str] | None = None
        ) -> None:
    src, data = source(entries, metadata, nodes)
    suite.write(case_id, requirements=requirements, description=description, source=src,
                data=data, layout=layout, expect=expect(entries, metadata, nodes),
                level=level, checks=checks)


def graph_entries(nodes: list[dict[str, Any]]) -> Entries:
    return {key: ("float32", [2, 2], struct.pack("<4f", n, m, -n, 0.25))
            for n, node in enumerate(nodes) for m, (_, key) in
            enumerate(node.get("attributes", []))}


def generate(suite: Suite) -> None:
    entries: Entries = {name: (name, shape, raw) for name, (shape, raw) in
                        samples.dtype_samples().items()}
    entries["scalar/float64"] = ("float64", [], struct.pack("<d", -1.25))
    entries["scalar/bytes"] = ("bytes", [], semantic.join_strings([b"only"]))
    entries["empty/int32"] = ("int32", [2, 0], b"")
    entries["empty/bytes"] = ("bytes", [0], b"")
    add(suite, "write.every-dtype", ["R-DTYPE-001", "R-DATA-005", "R-FILE-001", "R-VER-003"],
        "Write one tensor of every dtype with edge values, scalars and empty tensors, as a "
        "single file.", entries, {})

    add(suite, "write.metadata", ["R-META-001", "R-META-002"],
        "Write metadata of every value kind, nested lists and maps included, next to one "
        "tensor.", {"w": ("float32", [2], struct.pack("<2f", 1.0, 2.0))},
        {**every_kind(), "deep": semantic.nested(32, "list", i(32))})

    nodes = example_graph()
    add(suite, "write.object-graph", ["R-GRAPH-001", "R-GRAPH-006", "R-GRAPH-007",
                                      "R-VER-003"],
        "Write the object graph of spec/objects.md 'Example', with a slot variable, its "
        "tensors under the keys derived from canonical paths.",
        graph_entries(nodes), {"step": i(10)}, nodes)

    nodes = slot_graph()
    nodes[0]["metadata"] = {"epoch": i(2), "schedule": lst(f(0.1), f(0.01))}
    add(suite, "write.object-graph-directory", ["R-GRAPH-005", "R-GRAPH-006", "R-GRAPH-007"],
        "Write a graph of several slot variables, the root as owner and as variable, as a "
        "directory checkpoint.", graph_entries(nodes), {}, nodes, layout="directory")

    entries = {f"layers/{n}/kernel": ("float32", [16, 8],
                                      samples.ramp("float32", [16, 8], step=n + 1))
               for n in range(3)}
    entries["vocab"] = ("bytes", [4], semantic.join_strings([b"<pad>", b"a", b"", b"\xff"]))
    entries["step"] = ("int64", [], struct.pack("<q", 123456789))
    entries["mask"] = ("bool", [3, 3], bytes([1, 0, 0, 0, 1, 0, 0, 0, 1]))
    add(suite, "write.directory", ["R-FILE-008", "R-SHARD-001", "R-SHARD-002"],
        "Write several tensors, byte strings, a scalar and booleans as a directory "
        "checkpoint.", entries, {"name": s("directory"), "blob": b(b"\x00\x01"),
                                 "config": mp(units=i(8))}, layout="directory")

    entries = {
        "\U0001f600" * 1024: ("uint8", [1], b"\x2a"),
        "rank32": ("float32", [1] * 31 + [2], struct.pack("<2f", 0.5, -0.5)),
        "empty/max-dims": ("uint8", [0, 1 << 29, 1 << 29], b""),
        "a/b/../c": ("int8", [], b"\xff"),
        "\u00e9": ("int8", [], b"\x01"),
        "e\u0301": ("int8", [], b"\x02"),
    }
    add(suite, "write.edge-keys-and-shapes", ["R-TENSOR-001", "R-TENSOR-003"],
        "Write a key of 4096 UTF-8 bytes, keys that differ only by normalization, a tensor of "
        "rank 32 and an empty tensor whose other dimensions multiply to 2^58, the limit.",
        entries, {})

    add(suite, "write.empty", ["R-FILE-004", "R-FILE-006"],
        "Write a checkpoint with no tensor, no metadata and no object graph.", {}, {})
