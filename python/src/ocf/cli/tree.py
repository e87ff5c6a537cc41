"""``ocf tree``: the object graph of a checkpoint of any format OCF reads.

Text: the graph drawn from the root, each node once at its canonical path
(ocf.format.object_graph), in bounded lines. ``--json``: the nodes
(schemas/tree.schema.json).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from ocf.cli.jsonout import emit
from ocf.cli.managed import resolved
from ocf.format.object_graph import Node, ObjectGraph, Origin
from ocf.format.source import AnySource
from ocf.interop.registry import open_checkpoint


def tree(args: argparse.Namespace) -> int:
    with open_checkpoint(resolved(args.path), verify=False) as reader:
        graph = reader.object_graph
        if args.json:
            emit({"path": str(reader.path), "format": reader.format_name,
                  "object_graph": None if graph is None else graph_document(graph, reader)})
            return 0
        if graph is None:
            print(f"{reader.path}: a name-based checkpoint (no object graph); "
                  f"{len(reader)} tensors, see `ocf inspect`")
            return 0
        for line in draw_tree(graph, reader, max_lines=args.max_lines):
            print(line)
    return 0


def graph_document(graph: ObjectGraph, reader: AnySource) -> dict[str, Any]:
    """The object graph as ``tree --json`` reports it: its nodes, each with the edge
    its canonical path ends with (its origin), its edges by node number, and its
    attributes with their tensors. Linear in the graph, however deep."""
    nodes = []
    for number, node in enumerate(graph.nodes):
        attributes = {}
        for name, key in node.attributes.items():
            summary = reader.summary(key)
            attributes[name] = {"key": key, "dtype": summary.dtype.name,
                                "shape": list(summary.shape)}
        origin = graph.origins[number]
        nodes.append({"id": number, "type": node.type_name,
                      "origin": None if origin is None else {
                          "parent": origin.parent, "name": origin.name,
                          "slot_of": origin.variable},
                      "children": node.children, "attributes": attributes,
                      "slots": [{"name": s.name, "variable": s.variable, "node": s.slot_node}
                                for s in node.slots],
                      "metadata": node.metadata})
    return {"nodes": nodes}


# Levels of indentation drawn; deeper lines say their depth instead, so that a line
# costs at most this much however deep the graph (a hostile chain of 10^6 edges).
MAX_DRAWN_DEPTH = 64
# Characters of a path shown in a line (shared objects, slots); longer ones keep their end.
MAX_SHOWN_PATH = 160


def draw_tree(graph: ObjectGraph, reader: AnySource, *, max_lines: int | None = None
              ) -> Iterator[str]:
    """The lines drawing the object graph from the root, one at a time.

    Each node is drawn once, at its canonical path; other edges to it (shared
    objects, cycles) point there. Depth-first with an explicit stack of work
    (a line to print, or a node to expand), so deep graphs cannot exhaust
    Python's recursion limit; lines are produced as they are drawn and each
    is bounded (MAX_DRAWN_DEPTH, MAX_SHOWN_PATH), so memory stays linear in
    the graph. After ``max_lines`` lines, one more says the drawing stopped.
    """
    work: list[str | tuple[int, str, int]] = [
        (0, "", 0), f"(root) {graph.nodes[0].type_name}{_metadata(graph.nodes[0])}"]
    drawn = 0
    while work:
        item = work.pop()
        if isinstance(item, str):
            if max_lines is not None and drawn >= max_lines:
                yield f"... stopped after {max_lines} lines (ocf tree --max-lines N draws more)"
                return
            drawn += 1
            yield item
            continue
        work.extend(reversed(_lines_of(graph, reader, *item)))


def _lines_of(graph: ObjectGraph, reader: AnySource, node: int, indent: str, depth: int
              ) -> list[str | tuple[int, str, int]]:
    """The lines of ``node``'s entries, and the children to expand below them."""
    entries = _entries(graph, reader, node)
    marker = f"[depth {depth + 1}] " if depth >= MAX_DRAWN_DEPTH else ""
    todo: list[str | tuple[int, str, int]] = []
    for i, (label, child, drawn_here) in enumerate(entries):
        branch, deeper = ("└── ", "    ") if i == len(entries) - 1 else ("├── ", "│   ")
        line = f"{indent}{branch}{marker}{label}"
        if child is None:
            todo.append(line)
        elif not drawn_here:
            todo.append(f"{line} -> (shared: {graph.path_end(child, MAX_SHOWN_PATH)})")
        else:
            todo.append(f"{line}  {graph.nodes[child].type_name}{_metadata(graph.nodes[child])}")
            below = indent + deeper if depth < MAX_DRAWN_DEPTH else indent
            todo.append((child, below, depth + 1))
    return todo


def _entries(graph: ObjectGraph, reader: AnySource, node: int
             ) -> list[tuple[str, int | None, bool]]:
    """(label, child node or None, whether the child is drawn here) per line.

    A child is drawn under the entry its canonical path comes from (its
    origin); every other entry leading to it points there instead.
    """
    stored = graph.nodes[node]
    entries: list[tuple[str, int | None, bool]] = []
    for name, key in stored.attributes.items():
        info = reader.summary(key)
        entries.append((f".{name}: {info.dtype.name} {list(info.shape)}", None, False))
    for name, child_id in stored.children.items():
        entries.append((name, child_id, graph.origins[child_id] == Origin(node, name)))
    for slot in stored.slots:
        origin = Origin(node, slot.name, slot.variable)
        entries.append((f"slot {slot.name!r} of {graph.path_end(slot.variable, MAX_SHOWN_PATH)}",
                        slot.slot_node,
                        graph.origins[slot.slot_node] == origin))
    return entries


def _metadata(node: Node) -> str:
    if not node.metadata:
        return ""
    return "  {" + ", ".join(f"{k}: {v!r}" for k, v in node.metadata.items()) + "}"
