"""Canonical paths and keys of the object graph (spec/objects.md) [R-GRAPH-007].

The expected paths and keys below are copied from the text of spec/objects.md
(its worked example and its algorithm), not from running ocf.format.object_graph.
Paths are built on demand (``ObjectGraph.path``), never by decode_graph.

See test_object_graph_checks.py for each rule broken once and the order of the
checks, test_object_graph_limits.py for limits and hostile graphs,
test_object_graph_random.py for the property tests, and
test_object_graph_checkpoints.py for graphs in whole checkpoints.
"""

from __future__ import annotations

import pytest
from graph_examples import (
    EXAMPLE_KEYS,
    EXAMPLE_PATHS,
    EXAMPLE_TABLE,
    all_paths,
    encoded,
    example_message,
    example_nodes,
    keys_of,
    table,
)

from ocf.format import object_graph as graph
from ocf.format.errors import InvalidError
from ocf.format.object_graph import (
    UNREACHED,
    Node,
    Origin,
    SlotRef,
    attribute_key,
    canonical_paths,
    decode_graph,
)
from ocf.v1 import object_graph_pb2

# The variant with an extra edge optimizer --var_0--> kernel.
SHARED_PATHS = [
    "",
    "model",
    "optimizer",
    "save_counter",
    "model/dense",
    "optimizer/var_0",
    "optimizer/.slot/optimizer/var_0/m",
]
SHARED_KEYS = {
    3: "save_counter/.value",
    5: "optimizer/var_0/.value",
    6: "optimizer/.slot/optimizer/var_0/m/.value",
}
# spec/objects.md, "A slot of a slot": node 2 also keeps slot v of node 6 in
# node 7, and (to make node 7 reachable) has the edge slot_0 -> 6.
SLOT_OF_SLOT_PATHS = [
    "",
    "model",
    "optimizer",
    "save_counter",
    "model/dense",
    "model/dense/kernel",
    "optimizer/slot_0",
    "optimizer/.slot/optimizer/slot_0/v",
]
SLOT_OF_SLOT_KEYS = {
    3: "save_counter/.value",
    5: "model/dense/kernel/.value",
    6: "optimizer/slot_0/.value",
    7: "optimizer/.slot/optimizer/slot_0/v/.value",
}


def test_worked_example_paths_and_keys() -> None:
    nodes = example_nodes()
    assert canonical_paths(nodes) == EXAMPLE_PATHS
    for node, key in EXAMPLE_KEYS.items():
        assert attribute_key(EXAMPLE_PATHS[node], "value") == key
    decoded = decode_graph(example_message(), EXAMPLE_TABLE, "example")
    assert all_paths(decoded) == EXAMPLE_PATHS
    assert decoded.nodes == nodes
    assert decoded.node_at(["model", "dense", "kernel"]) == 5
    assert decoded.node_at(["model", "kernel"]) is None


def test_worked_example_origins() -> None:
    # How each node got its path: the edge that first reached it, or (node 6)
    # the slot m of node 5 that node 2 keeps.
    decoded = decode_graph(example_message(), EXAMPLE_TABLE, "example")
    assert decoded.origins == [
        None,
        Origin(0, "model"),
        Origin(0, "optimizer"),
        Origin(0, "save_counter"),
        Origin(1, "dense"),
        Origin(4, "kernel"),
        Origin(2, "m", 5),
    ]
    assert graph.origins(example_nodes()) == decoded.origins


def test_root_attribute_key_has_no_leading_slash() -> None:
    assert attribute_key("", "step") == ".step"
    assert attribute_key("model/dense", "bias") == "model/dense/.bias"


def test_shared_node_takes_the_path_of_the_first_breadth_first_discovery() -> None:
    nodes = example_nodes(SHARED_KEYS, shared=True)
    assert canonical_paths(nodes) == SHARED_PATHS
    for node, key in SHARED_KEYS.items():
        assert attribute_key(SHARED_PATHS[node], "value") == key
    message = object_graph_pb2.ObjectGraph()
    graph.encode_graph(nodes, message)
    decoded = decode_graph(message, table(*SHARED_KEYS.values()), "shared")
    assert all_paths(decoded) == SHARED_PATHS
    # The restore walk still finds the kernel along model/dense/kernel.
    assert decoded.node_at(["model", "dense", "kernel"]) == 5


def test_breadth_first_not_depth_first_and_stored_order_not_alphabetical() -> None:
    # root --b--> 1, root --a--> 2; both 1 and 2 lead to 3: 3 takes b's path
    # (stored order). 1 --x--> 4 --y--> 5, but root --z--> 5 reaches 5 at
    # depth 1 first.
    nodes = [
        Node(children={"b": 1, "a": 2, "z": 5}),
        Node(children={"x": 4, "s": 3}),
        Node(children={"t": 3}),
        Node(),
        Node(children={"y": 5}),
        Node(),
    ]
    assert canonical_paths(nodes) == ["", "b", "a", "b/s", "b/x", "z"]


def slot_of_slot_nodes(*, edge: bool) -> list[Node]:
    """spec/objects.md, "A slot of a slot", with or without the edge slot_0 -> 6."""
    keys = dict(SLOT_OF_SLOT_KEYS) if edge else {
        **EXAMPLE_KEYS, 7: "optimizer/.slot/optimizer/slot_0/v/.value"}
    nodes = example_nodes({k: v for k, v in keys.items() if k < 7})
    nodes.append(Node(attributes={"value": keys[7]}, type_name="Variable"))
    nodes[2].slots.append(SlotRef(6, "v", 7))
    if edge:
        nodes[2].children["slot_0"] = 6
    return nodes


def test_slot_of_a_slot_example() -> None:
    # Without the edge, node 6 is reached by a slot only: the slot (6, v, 7)
    # reaches nothing, node 7 is unreachable.
    nodes = slot_of_slot_nodes(edge=False)
    assert canonical_paths(nodes) == [*EXAMPLE_PATHS, None]
    with pytest.raises(InvalidError) as caught:
        decode_graph(encoded(nodes), keys_of(nodes), "slot-of-slot")
    assert caught.value.requirement == "R-GRAPH-005"
    # With the edge slot_0 -> 6, node 6 keeps its edge path and node 7 gets one.
    nodes = slot_of_slot_nodes(edge=True)
    assert canonical_paths(nodes) == SLOT_OF_SLOT_PATHS
    for node, key in SLOT_OF_SLOT_KEYS.items():
        assert attribute_key(SLOT_OF_SLOT_PATHS[node], "value") == key
    decoded = decode_graph(encoded(nodes), table(*SLOT_OF_SLOT_KEYS.values()), "slot-of-slot")
    assert all_paths(decoded) == SLOT_OF_SLOT_PATHS
    assert decoded.origins[6] == Origin(2, "slot_0")
    assert decoded.origins[7] == Origin(2, "v", 6)


def test_cycles_terminate() -> None:
    # A self-loop, a cycle back to the root, and an owner that keeps a slot
    # of itself and of its own parent.
    message = object_graph_pb2.ObjectGraph()
    root = message.nodes.add()
    root.children.add(name="a", node_id=1)
    a = message.nodes.add()
    a.children.add(name="self", node_id=1)
    a.children.add(name="b", node_id=2)
    b = message.nodes.add()
    b.children.add(name="up", node_id=0)
    b.slot_variables.add(original_variable_node_id=1, slot_name="m", slot_variable_node_id=3)
    b.slot_variables.add(original_variable_node_id=2, slot_name="m", slot_variable_node_id=4)
    message.nodes.add()
    message.nodes.add()
    decoded = decode_graph(message, {}, "cycles")
    assert all_paths(decoded) == ["", "a", "a/b", "a/b/.slot/a/m", "a/b/.slot/a/b/m"]


def test_slot_paths() -> None:
    # Root as owner: .slot/<variable>/<slot>.
    assert canonical_paths([Node(children={"k": 1}, slots=[SlotRef(1, "m", 2)]), Node(),
                            Node()]) == ["", "k", ".slot/k/m"]
    # Root as variable: join() drops its empty path.
    assert canonical_paths([Node(children={"opt": 1}), Node(slots=[SlotRef(0, "m", 2)]),
                            Node()]) == ["", "opt", "opt/.slot/m"]
    # Root as owner and as variable.
    assert canonical_paths([Node(children={"k": 1}, slots=[SlotRef(0, "m", 2)]), Node(),
                            Node()]) == ["", "k", ".slot/m"]
    # A slot whose slot node a child edge reaches keeps the edge's path, even
    # when the edge is deeper than the owner and stored after it.
    assert canonical_paths([Node(children={"opt": 1, "v": 2, "w": 4}),
                            Node(slots=[SlotRef(2, "m", 3)]), Node(), Node(),
                            Node(children={"s": 3})]
                           ) == ["", "opt", "v", "w/s", "w"]
    # The slot node may be the variable itself: it keeps the variable's path.
    assert canonical_paths([Node(children={"opt": 1, "v": 2}),
                            Node(slots=[SlotRef(2, "m", 2)]), Node()]) == ["", "opt", "v"]


def test_step_2_is_one_pass_in_id_order_then_stored_order() -> None:
    # Node 1 (deeper, lower id) and node 2 both name slot node 5: node 1
    # decides. Within node 1, the first slot in stored order naming node 6
    # decides.
    nodes = [
        Node(children={"x": 3, "opt": 2, "v": 4}),
        Node(slots=[SlotRef(4, "early", 6), SlotRef(4, "a", 5), SlotRef(0, "late", 6)]),
        Node(slots=[SlotRef(4, "m", 5)]),
        Node(children={"deep": 1}),
        Node(),
        Node(),
        Node(),
    ]
    assert canonical_paths(nodes) == [
        "", "x/deep", "opt", "x", "v", "x/deep/.slot/v/a", "x/deep/.slot/v/early"]


def test_no_further_rounds_a_slot_of_a_slot_reached_by_slots_only_gets_no_path() -> None:
    # Node 2 gives node 4 a path through a slot; node 1 keeps slot w of node
    # 4, which step 1 did not reach, so node 5 gets no path whatever the
    # order of the owners' ids.
    first = [
        Node(children={"first": 1, "second": 2, "v": 3}),
        Node(slots=[SlotRef(4, "w", 5)]),
        Node(slots=[SlotRef(3, "m", 4)]),
        Node(),
        Node(),
        Node(),
    ]
    assert canonical_paths(first) == ["", "first", "second", "v", "second/.slot/v/m", None]
    swapped = [
        Node(children={"first": 1, "second": 2, "v": 3}),
        Node(slots=[SlotRef(3, "m", 4)]),
        Node(slots=[SlotRef(4, "w", 5)]),
        Node(),
        Node(),
        Node(),
    ]
    assert canonical_paths(swapped) == ["", "first", "second", "v", "first/.slot/v/m", None]
    for nodes in (first, swapped):
        with pytest.raises(InvalidError) as caught:
            decode_graph(encoded(nodes), {}, "rounds")
        assert caught.value.requirement == "R-GRAPH-005"


def test_slot_whose_variable_has_no_edge_path_is_allowed_when_its_slot_node_is_reached() -> None:
    # The slot (4, w, 5) gives nothing, but an edge reaches node 5.
    nodes = [
        Node(children={"first": 1, "second": 2, "v": 3, "s": 5}),
        Node(slots=[SlotRef(4, "w", 5)]),
        Node(slots=[SlotRef(3, "m", 4)]),
        Node(),
        Node(),
        Node(),
    ]
    decoded = decode_graph(encoded(nodes), {}, "allowed")
    assert all_paths(decoded) == ["", "first", "second", "v", "second/.slot/v/m", "s"]


def test_the_former_collision_is_refused() -> None:
    # spec/objects.md, notes to [R-GRAPH-007]: node X (4, opt/.slot/a/b) has a
    # child edge c to node Z (6), and node Y (5) is opt/.slot/a/b/c. Step 1
    # never continues from X, so Z gets no path; the graph is INVALID.
    nodes = [
        Node(children={"opt": 1, "a": 2}),
        Node(slots=[SlotRef(2, "b", 4), SlotRef(3, "c", 5)]),
        Node(children={"b": 3}),
        Node(),
        Node(children={"c": 6}),
        Node(),
        Node(),
    ]
    assert canonical_paths(nodes) == [
        "", "opt", "a", "a/b", "opt/.slot/a/b", "opt/.slot/a/b/c", None]
    with pytest.raises(InvalidError) as caught:
        decode_graph(encoded(nodes), {}, "collision")
    assert caught.value.requirement == "R-GRAPH-006"


def test_unreached_nodes_have_no_path() -> None:
    nodes = [Node(), Node(children={"x": 0})]
    assert canonical_paths(nodes) == ["", None]
    assert graph.origins(nodes) == [None, UNREACHED]
