"""Property tests of the object graph on random graphs.

Random and damaged graphs decode or fail with the requirement that
spec/objects.md's order of checks names first (``expected_failure``, written
from the spec independently of ocf.format.object_graph).

Canonical paths are distinct in every graph that passes the checks
(spec/objects.md, notes to [R-GRAPH-007]): slot nodes have no child edges
and no slot variables [R-GRAPH-006], and step 2 is a single pass that builds
on step 1 paths only. The property test checks that on every valid graph it
draws, and reads each path back the way the note's argument does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import pytest
from graph_examples import (
    all_paths,
    check,
    encoded,
    keys_of,
    table,
)
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ocf.format import object_graph as graph
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.object_graph import (
    Node,
    SlotRef,
    attribute_key,
    canonical_paths,
)
from ocf.v1 import object_graph_pb2

VALID_NAMES = ["a", "b", "m", "slot", "x y"]
INVALID_NAMES = ["", ".slot", ".h", "a/b", "n\0"]
ANY_NAMES = st.sampled_from(VALID_NAMES * 8 + INVALID_NAMES)


def valid_name(name: str) -> bool:
    return bool(name) and "\0" not in name and "/" not in name and not name.startswith(".")


def expected_failure(message: object_graph_pb2.ObjectGraph, keys: Mapping[str, object]
                     ) -> str | None:
    """The requirement the first failing check cites, in the spec's order G1..G4.

    Written from spec/objects.md, "Order of checks", independently of ocf.format.object_graph;
    the random graphs carry no metadata and stay far below the node limit.
    """
    n = len(message.nodes)
    if n == 0:
        return "R-GRAPH-001"
    used: set[str] = set()
    for node in message.nodes:
        edges: set[str] = set()
        for child in node.children:
            if not valid_name(child.name) or child.name in edges:
                return "R-GRAPH-003"
            if child.node_id >= n:
                return "R-GRAPH-002"
            edges.add(child.name)
        names: set[str] = set()
        for attribute in node.attributes:
            if not valid_name(attribute.name) or attribute.name in names:
                return "R-GRAPH-003"
            if attribute.key not in keys or attribute.key in used:
                return "R-GRAPH-004"
            names.add(attribute.name)
            used.add(attribute.key)
        pairs: set[tuple[int, str]] = set()
        for slot in node.slot_variables:
            pair = (slot.original_variable_node_id, slot.slot_name)
            if not valid_name(slot.slot_name) or pair in pairs:
                return "R-GRAPH-006"
            if slot.original_variable_node_id >= n or slot.slot_variable_node_id >= n:
                return "R-GRAPH-006"
            pairs.add(pair)
    # G4: slot nodes have no child edges and no slot variables.
    for node in message.nodes:
        for slot in node.slot_variables:
            held = message.nodes[slot.slot_variable_node_id]
            if held.children or held.slot_variables:
                return "R-GRAPH-006"
    # G5: reachability as R-GRAPH-005 defines it, with no paths: the nodes
    # reached by edges, then the slot nodes of their slots whose variable is
    # reached by edges too.
    by_edges = {0}
    todo = [0]
    while todo:
        for child in message.nodes[todo.pop()].children:
            if child.node_id not in by_edges:
                by_edges.add(child.node_id)
                todo.append(child.node_id)
    reached = by_edges | {slot.slot_variable_node_id for u in by_edges
                          for slot in message.nodes[u].slot_variables
                          if slot.original_variable_node_id in by_edges}
    return None if len(reached) == n else "R-GRAPH-005"


@st.composite
def valid_graphs(draw: st.DrawFn) -> list[Node]:
    """Graphs that pass every check, with sharing, cycles and slots.

    Each node hangs off a lower one: by an edge, or as the slot node of a
    slot whose owner and variable are lower nodes reached by edges (so
    every node is reachable, and slot nodes stay leaves). Random extra edges
    (from nodes that are not slot nodes) then add sharing and cycles, and
    random extra slots (into leaves, with any variable) add shared slot
    nodes, slots of slots, and slots that give no path.
    """
    n = draw(st.integers(1, 10))
    nodes = [Node() for _ in range(n)]
    slot_nodes: set[int] = set()  # no edges or slots may start here
    names = st.sampled_from(VALID_NAMES)
    counter = iter(range(1 << 20))

    def add_slot(u: int, variable: int, slot: int) -> bool:
        name = draw(names)
        if any((s.variable, s.name) == (variable, name) for s in nodes[u].slots):
            return False
        nodes[u].slots.append(SlotRef(variable, name, slot))
        slot_nodes.add(slot)
        return True

    for v in range(1, n):
        # Every lower node that is no slot node was reached by an edge.
        lower = [u for u in range(v) if u not in slot_nodes]
        u = draw(st.sampled_from(lower))
        # The edge name e<v> is unique in its node, so this edge is always added.
        if draw(st.booleans()) or not add_slot(u, draw(st.sampled_from(lower)), v):
            nodes[u].children[f"e{v}"] = v
    for _ in range(draw(st.integers(0, n))):
        u = draw(st.sampled_from([u for u in range(n) if u not in slot_nodes]))
        name = draw(names)
        if name not in nodes[u].children:
            nodes[u].children[name] = draw(st.integers(0, n - 1))
    # Every node is reachable now, and extra slots take nothing away.
    for _ in range(draw(st.integers(0, n))):
        owners = [u for u in range(n) if u not in slot_nodes]
        u = draw(st.sampled_from(owners))
        leaves = [v for v in range(n) if v != u and not nodes[v].children and not nodes[v].slots]
        if leaves:
            add_slot(u, draw(st.integers(0, n - 1)), draw(st.sampled_from(leaves)))
    for node in nodes:
        for name in draw(st.sets(names, max_size=2)):
            node.attributes[name] = f"t{next(counter)}"
    return nodes


@st.composite
def random_graphs(draw: st.DrawFn) -> object_graph_pb2.ObjectGraph:
    """Nodes with random edges, attributes and slots; ids sometimes out of range."""
    n = draw(st.integers(0, 7))
    ids = st.sampled_from([*range(n)] * 4 + [n, 2**32 - 1]) if n else st.just(0)
    message = object_graph_pb2.ObjectGraph()
    for _ in range(n):
        node = message.nodes.add()
        for _ in range(draw(st.integers(0, 3))):
            node.children.add(name=draw(ANY_NAMES), node_id=draw(ids))
        for _ in range(draw(st.integers(0, 1))):
            node.attributes.add(name=draw(ANY_NAMES),
                                key=draw(st.sampled_from(["t0", "t1", "t2", "missing"])))
        for _ in range(draw(st.integers(0, 2))):
            node.slot_variables.add(original_variable_node_id=draw(ids),
                                    slot_name=draw(ANY_NAMES), slot_variable_node_id=draw(ids))
    return message


@st.composite
def damaged_graphs(draw: st.DrawFn) -> object_graph_pb2.ObjectGraph:
    """A valid graph with up to two random changes, each of which may break a rule."""
    message = encoded(draw(valid_graphs()))
    for _ in range(draw(st.integers(0, 2))):
        n = len(message.nodes)
        edges = [c for node in message.nodes for c in node.children]
        attributes = [a for node in message.nodes for a in node.attributes]
        slots = [s for node in message.nodes for s in node.slot_variables]
        ids = st.sampled_from([0, n - 1, n, 2**32 - 1])
        kind = draw(st.sampled_from(
            ["node", "edge", "attribute", "slot", "new edge", "new slot"]))
        if kind == "node":
            message.nodes.add().children.add(name="a", node_id=draw(ids))
        elif kind == "edge" and edges:
            edge = edges[draw(st.integers(0, len(edges) - 1))]
            edge.name, edge.node_id = draw(ANY_NAMES), draw(ids)
        elif kind == "attribute" and attributes:
            attribute = attributes[draw(st.integers(0, len(attributes) - 1))]
            attribute.name = draw(ANY_NAMES)
            attribute.key = draw(st.sampled_from(["missing", *(a.key for a in attributes)]))
        elif kind == "slot" and slots:
            slot = slots[draw(st.integers(0, len(slots) - 1))]
            slot.slot_name = draw(ANY_NAMES)
            slot.original_variable_node_id = draw(ids)
        elif kind == "new edge":  # perhaps from a slot node, perhaps to an unreached node
            message.nodes[draw(st.integers(0, n - 1))].children.add(
                name=draw(ANY_NAMES), node_id=draw(st.one_of(st.integers(0, n - 1), ids)))
        elif kind == "new slot":  # perhaps into a node with edges, perhaps a slot of a slot
            message.nodes[draw(st.integers(0, n - 1))].slot_variables.add(
                original_variable_node_id=draw(st.one_of(st.integers(0, n - 1), ids)),
                slot_name=draw(ANY_NAMES),
                slot_variable_node_id=draw(st.one_of(st.integers(0, n - 1), ids)))
    return message


@settings(max_examples=600, deadline=None)
@given(message=st.one_of(random_graphs(), damaged_graphs()))
def test_random_graphs_decode_or_fail_with_the_right_requirement(
        message: object_graph_pb2.ObjectGraph) -> None:
    keys = table("t0", "t1", "t2", *(a.key for n in message.nodes for a in n.attributes
                                     if a.key != "missing"))
    expected = expected_failure(message, keys)
    event(f"refused: {expected}" if expected else "decoded")
    if expected is None:
        decoded = check(message, keys)
        paths = all_paths(decoded)
        assert len(set(paths)) == len(message.nodes)
        return
    # Any other exception escapes pytest.raises and fails the test.
    with pytest.raises((InvalidError, LimitExceededError)) as caught:
        check(message, keys)
    assert caught.value.requirement == expected


def spec_paths(nodes: list[Node]) -> list[str | None]:
    """The algorithm of spec/objects.md, "Canonical paths and keys", as written there."""

    def join(*parts: str) -> str:
        return "/".join(p for p in parts if p)

    n = len(nodes)
    path: list[str | None] = [""] + [None] * (n - 1)
    queue = deque([0])  # Step 1: breadth-first along child edges.
    while queue:
        u = queue.popleft()
        base = path[u]
        assert base is not None
        for name, v in nodes[u].children.items():
            if path[v] is None:
                path[v] = join(base, name)
                queue.append(v)
    by_edges = [p is not None for p in path]
    for u in range(n):  # Step 2: one pass over the slot variables.
        if not by_edges[u]:
            continue
        for slot in nodes[u].slots:
            if path[slot.slot_node] is None and by_edges[slot.variable]:
                owner, variable = path[u], path[slot.variable]
                assert owner is not None
                assert variable is not None
                path[slot.slot_node] = join(owner, ".slot", variable, slot.name)
    return path


def read_back(decoded: graph.ObjectGraph, path: str) -> int | None:
    """The node whose canonical path is ``path``, found the way the spec's note
    on uniqueness argues: the first ".slot" component ends the owner's path,
    the last component is the slot name, the rest is the variable's path."""
    parts = path.split("/") if path else []
    if ".slot" not in parts:
        return decoded.node_at(parts)
    k = parts.index(".slot")
    owner, variable = decoded.node_at(parts[:k]), decoded.node_at(parts[k + 1:-1])
    assert owner is not None
    assert variable is not None
    held = [s.slot_node for s in decoded.nodes[owner].slots
            if (s.variable, s.name) == (variable, parts[-1])]
    assert len(held) == 1
    return held[0]


@settings(max_examples=500, deadline=None)
@given(nodes=valid_graphs())
def test_valid_random_graphs_give_every_node_a_distinct_path(nodes: list[Node]) -> None:
    message = encoded(nodes)
    assert expected_failure(message, keys_of(nodes)) is None
    decoded = check(message, keys_of(nodes))
    paths = all_paths(decoded)
    assert paths == canonical_paths(nodes) == spec_paths(nodes)
    assert paths[0] == ""
    # Distinct for every valid graph, and each path names its node.
    assert len(set(paths)) == len(paths)
    for v, path in enumerate(paths):
        assert path.split("/").count(".slot") <= 1
        assert read_back(decoded, path) == v
    keys = [attribute_key(path, name) for path, node in zip(paths, nodes)
            for name in node.attributes]
    assert len(set(keys)) == len(keys)
    slot_nodes = {s.slot_node for node in nodes for s in node.slots}
    if any(s.variable in slot_nodes for node in nodes for s in node.slots):
        event("a slot of a slot")
    if any(".slot" not in p.split("/") for v, p in enumerate(paths) if v in slot_nodes):
        event("a slot node with an edge path")
