"""The object graph of spec/objects.md: checks, canonical paths and keys [R-GRAPH-001..007].

The expected paths and keys below are copied from the text of spec/objects.md
(its worked example and its algorithm), not from running ocf.format.object_graph. Graphs
that break a rule are built by hand as ``ocf.v1.ObjectGraph`` messages;
checkpoints with a graph a writer would refuse are built byte by byte with
tests/helpers.py.

Canonical paths are distinct in every graph that passes the checks
(spec/objects.md, notes to [R-GRAPH-007]): slot nodes have no child edges
and no slot variables [R-GRAPH-006], and step 2 is a single pass that builds
on step 1 paths only. The property test checks that on every valid graph it
draws, and reads each path back the way the note's argument does.

Paths are built on demand (``ObjectGraph.path``), never by decode_graph: a
small hostile graph could otherwise need memory quadratic in its depth.
"""

from __future__ import annotations

import tracemalloc
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from helpers import build_file, scalar_checkpoint
from hypothesis import event, given, settings
from hypothesis import strategies as st

import ocf
from ocf.format import object_graph as graph
from ocf.format.errors import InvalidError, LimitExceededError
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

# -- the worked example of spec/objects.md ---------------------------------------

# spec/objects.md, "Example": node ids 0..6.
EXAMPLE_PATHS = [
    "",
    "model",
    "optimizer",
    "save_counter",
    "model/dense",
    "model/dense/kernel",
    "optimizer/.slot/model/dense/kernel/m",
]
EXAMPLE_KEYS = {  # node -> key of its attribute "value"
    3: "save_counter/.value",
    5: "model/dense/kernel/.value",
    6: "optimizer/.slot/model/dense/kernel/m/.value",
}
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


def example_nodes(keys: Mapping[int, str] = EXAMPLE_KEYS, *, shared: bool = False
                  ) -> list[Node]:
    """The nodes of the spec's example, with attribute keys ``keys``."""
    nodes = [
        Node(children={"model": 1, "optimizer": 2, "save_counter": 3},
             type_name="Checkpoint"),
        Node(children={"dense": 4}, type_name="Model"),
        Node(slots=[SlotRef(5, "m", 6)], type_name="Adam",
             metadata={"learning_rate": 0.001}),
        Node(type_name="Variable"),
        Node(children={"kernel": 5}, type_name="Dense"),
        Node(type_name="Variable"),
        Node(type_name="Variable"),
    ]
    if shared:
        nodes[2].children["var_0"] = 5
    for node, key in keys.items():
        nodes[node].attributes["value"] = key
    return nodes


def example_message() -> object_graph_pb2.ObjectGraph:
    """The spec's example as a stored message, built field by field."""
    message = object_graph_pb2.ObjectGraph()
    root = message.nodes.add(type_name="Checkpoint")
    root.children.add(name="model", node_id=1)
    root.children.add(name="optimizer", node_id=2)
    root.children.add(name="save_counter", node_id=3)
    message.nodes.add(type_name="Model").children.add(name="dense", node_id=4)
    optimizer = message.nodes.add(type_name="Adam")
    optimizer.slot_variables.add(original_variable_node_id=5, slot_name="m",
                                 slot_variable_node_id=6)
    optimizer.metadata["learning_rate"].float_value = 0.001
    message.nodes.add(type_name="Variable").attributes.add(name="value",
                                                           key="save_counter/.value")
    message.nodes.add(type_name="Dense").children.add(name="kernel", node_id=5)
    message.nodes.add(type_name="Variable").attributes.add(
        name="value", key="model/dense/kernel/.value")
    message.nodes.add(type_name="Variable").attributes.add(
        name="value", key="optimizer/.slot/model/dense/kernel/m/.value")
    return message


def all_paths(decoded: graph.ObjectGraph) -> list[str]:
    """The canonical path of every node, asked for one by one."""
    return [decoded.path(i) for i in range(len(decoded.nodes))]


def table(*keys: str) -> dict[str, None]:
    """A stand-in for the tensor table: decode_graph only asks which keys exist."""
    return dict.fromkeys(keys)


EXAMPLE_TABLE = table(*EXAMPLE_KEYS.values())


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


# -- each rule broken once ---------------------------------------------------------


def check(message: object_graph_pb2.ObjectGraph, keys: Mapping[str, object] = EXAMPLE_TABLE
          ) -> graph.ObjectGraph:
    return decode_graph(message, keys, "test.ocf")


def broken(requirement: str, message: object_graph_pb2.ObjectGraph,
           keys: Mapping[str, object] = EXAMPLE_TABLE) -> None:
    with pytest.raises(InvalidError) as caught:
        check(message, keys)
    assert caught.value.requirement == requirement
    assert f"[{requirement}]" in str(caught.value)


def test_example_message_passes() -> None:
    check(example_message())


def test_graph_without_nodes_is_invalid() -> None:
    broken("R-GRAPH-001", object_graph_pb2.ObjectGraph())


def test_child_node_id_out_of_range() -> None:
    message = example_message()
    message.nodes[4].children[0].node_id = 7
    broken("R-GRAPH-002", message)


BAD_NAMES = ["", ".", "..", ".value", ".slot", "a/b", "/", "a\0b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_edge_name(name: str) -> None:
    message = example_message()
    message.nodes[1].children[0].name = name
    broken("R-GRAPH-003", message)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_attribute_name(name: str) -> None:
    message = example_message()
    message.nodes[5].attributes[0].name = name
    broken("R-GRAPH-003", message)


def test_repeated_edge_name() -> None:
    message = example_message()
    message.nodes[0].children[2].name = "model"
    broken("R-GRAPH-003", message)


def test_repeated_attribute_name() -> None:
    message = example_message()
    message.nodes[5].attributes.add(name="value", key="save_counter/.value")
    message.nodes[3].ClearField("attributes")
    broken("R-GRAPH-003", message)


def test_names_that_are_valid() -> None:
    message = example_message()
    message.nodes[1].children[0].name = "a.b c-0"
    message.nodes[5].attributes[0].name = "dense"  # an attribute may share an edge's name
    message.nodes[4].attributes.add(name="kernel", key="extra")
    decoded = check(message, table(*EXAMPLE_KEYS.values(), "extra"))
    assert decoded.path(4) == "model/a.b c-0"


def test_attribute_key_not_in_tensor_table() -> None:
    message = example_message()
    message.nodes[5].attributes[0].key = "model/dense/kernel/.VALUE"
    broken("R-GRAPH-004", message)


def test_tensor_is_the_attribute_of_two_nodes() -> None:
    message = example_message()
    message.nodes[6].attributes[0].key = "model/dense/kernel/.value"
    broken("R-GRAPH-004", message, table("model/dense/kernel/.value", "save_counter/.value"))


def test_tensor_is_an_attribute_of_one_node_twice() -> None:
    message = example_message()
    message.nodes[5].attributes.add(name="alias", key="model/dense/kernel/.value")
    broken("R-GRAPH-004", message)


def test_tensors_without_attribute_are_allowed() -> None:
    check(example_message(), table(*EXAMPLE_KEYS.values(), "name/based/only"))


def test_unreachable_node() -> None:
    message = example_message()
    message.nodes.add()
    broken("R-GRAPH-005", message)


def test_node_reachable_only_from_an_unreachable_node() -> None:
    message = example_message()
    message.nodes.add().children.add(name="x", node_id=8)
    message.nodes.add().children.add(name="back", node_id=0)
    broken("R-GRAPH-005", message)


def test_slot_node_whose_variable_is_unreachable() -> None:
    message = example_message()
    message.nodes[2].slot_variables.add(original_variable_node_id=7, slot_name="m",
                                        slot_variable_node_id=8)
    message.nodes.add()  # 7: the variable, reached by nothing
    message.nodes.add()  # 8: the slot
    broken("R-GRAPH-005", message)


@pytest.mark.parametrize("field", ["original_variable_node_id", "slot_variable_node_id"])
def test_slot_node_id_out_of_range(field: str) -> None:
    message = example_message()
    setattr(message.nodes[2].slot_variables[0], field, 7)
    broken("R-GRAPH-006", message)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_slot_name(name: str) -> None:
    message = example_message()
    message.nodes[2].slot_variables[0].slot_name = name
    broken("R-GRAPH-006", message)


def test_repeated_slot_of_one_variable() -> None:
    message = example_message()
    message.nodes[2].slot_variables.add(original_variable_node_id=5, slot_name="m",
                                        slot_variable_node_id=3)
    broken("R-GRAPH-006", message)


def test_slot_variables_that_are_allowed() -> None:
    message = example_message()
    slots = message.nodes[2].slot_variables
    slots.add(original_variable_node_id=5, slot_name="v", slot_variable_node_id=6)  # same node
    slots.add(original_variable_node_id=2, slot_name="m", slot_variable_node_id=3)  # owner
    slots.add(original_variable_node_id=1, slot_name="m", slot_variable_node_id=5)  # no attrs
    slots.add(original_variable_node_id=3, slot_name="s", slot_variable_node_id=3)  # variable
    slots.add(original_variable_node_id=6, slot_name="m", slot_variable_node_id=6)  # slot's slot
    assert all_paths(check(message)) == EXAMPLE_PATHS


def test_slot_node_with_child_edges() -> None:
    message = example_message()
    message.nodes[6].children.add(name="c", node_id=3)
    broken("R-GRAPH-006", message)


def test_slot_node_with_slot_variables() -> None:
    message = example_message()
    message.nodes[6].slot_variables.add(original_variable_node_id=5, slot_name="m",
                                        slot_variable_node_id=3)
    broken("R-GRAPH-006", message)


def test_slot_node_with_child_edges_also_reached_by_an_edge() -> None:
    # The rule holds for every slot node, whatever gives it its path.
    message = example_message()
    message.nodes[2].children.add(name="slot_0", node_id=6)
    message.nodes[6].children.add(name="c", node_id=3)
    broken("R-GRAPH-006", message)


def test_optimizer_as_its_own_slot_node() -> None:
    message = example_message()
    message.nodes[2].slot_variables.add(original_variable_node_id=5, slot_name="self",
                                        slot_variable_node_id=2)
    broken("R-GRAPH-006", message)


def test_slot_node_rule_applies_to_slots_of_unreachable_nodes() -> None:
    # Node 7 is unreachable and keeps a slot whose slot node (1) has an edge:
    # G4 comes before G5.
    message = example_message()
    message.nodes.add().slot_variables.add(original_variable_node_id=5, slot_name="m",
                                           slot_variable_node_id=1)
    broken("R-GRAPH-006", message)


def test_slot_whose_variable_is_reached_only_through_a_slot() -> None:
    # spec/objects.md, "A slot of a slot", without the edge slot_0.
    message = example_message()
    message.nodes[2].slot_variables.add(original_variable_node_id=6, slot_name="v",
                                        slot_variable_node_id=7)
    message.nodes.add()
    broken("R-GRAPH-005", message)


def test_too_many_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2^24 + 1 real nodes would take gigabytes; the check compares with MAX_NODES.
    assert graph.MAX_NODES == 1 << 24
    monkeypatch.setattr(graph, "MAX_NODES", 7)
    check(example_message())
    message = example_message()
    message.nodes.add()  # also unreachable: the limit is checked first
    with pytest.raises(LimitExceededError) as caught:
        check(message)
    assert caught.value.requirement == "R-LIMIT-002"


def nested_metadata(node: object_graph_pb2.ObjectNode, levels: int) -> None:
    value = node.metadata["deep"]
    for _ in range(levels):
        value = value.list_value.values.add()
    value.int_value = 1


def test_node_metadata_nesting_limit() -> None:
    message = example_message()
    nested_metadata(message.nodes[3], 32)
    assert check(message).nodes[3].metadata["deep"] is not None
    message = example_message()
    nested_metadata(message.nodes[3], 33)
    with pytest.raises(LimitExceededError) as caught:
        check(message)
    assert caught.value.requirement == "R-META-002"


# -- order of checks (spec/objects.md, "Order of checks") ------------------------


def test_edge_name_is_checked_before_its_node_id() -> None:
    message = example_message()
    message.nodes[1].children[0].name = ".bad"
    message.nodes[1].children[0].node_id = 99
    broken("R-GRAPH-003", message)


def test_all_checks_of_one_node_before_the_next() -> None:
    message = example_message()
    nested_metadata(message.nodes[3], 33)
    message.nodes[4].children[0].node_id = 99
    with pytest.raises(LimitExceededError):
        check(message)
    message = example_message()
    message.nodes[3].attributes[0].key = "missing"
    nested_metadata(message.nodes[4], 33)
    broken("R-GRAPH-004", message)


def test_reachability_is_checked_last() -> None:
    message = example_message()
    message.nodes.add()  # unreachable
    message.nodes[6].attributes[0].key = "missing"
    broken("R-GRAPH-004", message)


def test_slot_nodes_are_checked_after_every_node_passed_g3() -> None:
    # Node 6 is a slot node with a child edge (G4); node 3, whose id is
    # lower, has a key the table does not hold, and node 6 itself a metadata
    # value at level 33 (both G3).
    message = example_message()
    message.nodes[6].children.add(name="c", node_id=3)
    message.nodes[3].attributes[0].key = "missing"
    broken("R-GRAPH-004", message)
    message = example_message()
    message.nodes[6].children.add(name="c", node_id=3)
    nested_metadata(message.nodes[6], 33)
    with pytest.raises(LimitExceededError) as caught:
        check(message)
    assert caught.value.requirement == "R-META-002"


def test_slot_nodes_are_checked_before_reachability() -> None:
    message = example_message()
    message.nodes.add()  # unreachable
    message.nodes[6].slot_variables.add(original_variable_node_id=5, slot_name="m",
                                        slot_variable_node_id=3)
    broken("R-GRAPH-006", message)


# -- hostile graphs: bounded time and memory ---------------------------------------


def chain(n: int, name: str = "a") -> object_graph_pb2.ObjectGraph:
    """n nodes, each with one child edge ``name`` to the next."""
    message = object_graph_pb2.ObjectGraph()
    for i in range(n):
        node = message.nodes.add()
        if i + 1 < n:
            node.children.add(name=name, node_id=i + 1)
    return message


def test_a_chain_of_100000_child_edges_decodes() -> None:
    # About 1 MB of graph; all its paths together would be 10^10 bytes.
    n = 100_000
    decoded = check(chain(n), {})
    assert decoded.origins[n - 1] == Origin(n - 2, "a")
    assert decoded.node_at(["a"] * (n - 1)) == n - 1
    assert decoded.path(3) == "a/a/a"


def test_decoding_a_deep_chain_builds_no_paths() -> None:
    # Memory linear in the number of nodes: building every path would take
    # about n^2 = 4 * 10^8 bytes here, 20 KB per node.
    n = 20_000
    message = chain(n)
    tracemalloc.start()
    try:
        decoded = check(message, {})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(decoded.nodes) == n
    assert peak < 2048 * n


def test_path_of_the_deepest_node_of_a_deep_chain() -> None:
    n = 10_000
    decoded = check(chain(n), {})
    assert decoded.path(n - 1) == "/".join(["a"] * (n - 1))
    assert decoded.path(n - 2) == "/".join(["a"] * (n - 2))
    # A slot of the deepest node, kept by the root.
    message = chain(n)
    message.nodes[0].slot_variables.add(original_variable_node_id=n - 1, slot_name="m",
                                        slot_variable_node_id=n)
    message.nodes.add()
    decoded = check(message, {})
    assert decoded.path(n) == ".slot/" + "/".join(["a"] * (n - 1)) + "/m"
    assert decoded.origins[n] == Origin(0, "m", n - 1)


def test_path_of_the_deepest_node_takes_memory_linear_in_the_depth() -> None:
    n = 10_000
    decoded = check(chain(n), {})
    tracemalloc.start()
    try:
        path = decoded.path(n - 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(path) == 2 * n - 3
    assert peak < 200 * n  # the quadratic cache takes about n^2 = 10^8 bytes


def test_a_long_chain_of_slots_of_slots_is_refused_quickly() -> None:
    # Each slot node keeps a slot of itself in the next node: under the old
    # rounds each path was more than twice as long as the one before.
    n = 100_000
    message = object_graph_pb2.ObjectGraph()
    message.nodes.add().children.add(name="a", node_id=1)
    for i in range(1, n):
        node = message.nodes.add()
        if i + 1 < n:
            node.slot_variables.add(original_variable_node_id=i, slot_name="m",
                                    slot_variable_node_id=i + 1)
    broken("R-GRAPH-006", message, {})


def test_a_long_chain_of_slots_kept_by_one_optimizer_is_refused_quickly() -> None:
    # opt keeps slot m of v in node 3, slot m of node 3 in node 4, and so on:
    # leaves only, but node 4 onwards are reached by nothing. Under the old
    # rounds this took one round per node, each visiting every node.
    n = 100_000
    message = object_graph_pb2.ObjectGraph()
    root = message.nodes.add()
    root.children.add(name="opt", node_id=1)
    root.children.add(name="v", node_id=2)
    opt = message.nodes.add()
    message.nodes.add()
    for i in range(3, n):
        opt.slot_variables.add(original_variable_node_id=i - 1, slot_name="m",
                               slot_variable_node_id=i)
        message.nodes.add()
    broken("R-GRAPH-005", message, {})
    assert canonical_paths([
        Node(children={"opt": 1, "v": 2}), Node(slots=[SlotRef(2, "m", 3), SlotRef(3, "m", 4)]),
        Node(), Node(), Node()]) == ["", "opt", "v", "opt/.slot/v/m", None]


# -- random graphs ---------------------------------------------------------------

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


def encoded(nodes: list[Node]) -> object_graph_pb2.ObjectGraph:
    message = object_graph_pb2.ObjectGraph()
    graph.encode_graph(nodes, message)
    return message


def keys_of(nodes: list[Node]) -> dict[str, None]:
    return table(*(key for node in nodes for key in node.attributes.values()))


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


# -- whole checkpoints -------------------------------------------------------------

VALUES = {
    "save_counter/.value": np.array(3, np.int64),
    "model/dense/kernel/.value": np.arange(6, dtype=np.float32).reshape(2, 3),
    "optimizer/.slot/model/dense/kernel/m/.value": np.full((2, 3), 0.5, np.float32),
}


@pytest.mark.parametrize("layout", ["file", "directory"])
def test_writer_and_reader_round_trip_the_example_graph(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "ckpt"
    with ocf.Writer(path, layout=layout) as writer:
        for key, value in VALUES.items():
            writer.write(key, value)
        writer.set_object_graph(example_nodes())
    with ocf.open(path) as reader:
        assert reader.format_version == (1, 1)
        decoded = reader.object_graph
        assert decoded is not None
        assert decoded.nodes == example_nodes()
        assert all_paths(decoded) == EXAMPLE_PATHS
        assert decoded.nodes[2].metadata == {"learning_rate": 0.001}
        assert [n.type_name for n in decoded.nodes] == [
            "Checkpoint", "Model", "Adam", "Variable", "Dense", "Variable", "Variable"]
        kernel = decoded.node_at(["model", "dense", "kernel"])
        assert kernel is not None
        key = decoded.nodes[kernel].attributes["value"]
        assert np.array_equal(reader.get_tensor(key), VALUES["model/dense/kernel/.value"])
        # Every tensor is also readable by name.
        assert sorted(reader) == sorted(VALUES)


def test_name_based_checkpoint_has_no_graph(tmp_path: Path) -> None:
    ocf.save_file({"w": np.zeros(2, np.float32)}, tmp_path / "n.ocf")
    with ocf.open(tmp_path / "n.ocf") as reader:
        assert reader.object_graph is None


def test_reader_uses_stored_keys_that_differ_from_the_derived_ones(tmp_path: Path) -> None:
    # [R-GRAPH-007]: readers never require stored keys to match the derivation.
    keys = {3: "counter", 5: "weights/k", 6: "adam/m"}
    with ocf.Writer(tmp_path / "k.ocf") as writer:
        for key in keys.values():
            writer.write(key, np.zeros(1, np.float32))
        writer.set_object_graph(example_nodes(keys))
    with ocf.open(tmp_path / "k.ocf") as reader:
        decoded = reader.object_graph
        assert decoded is not None
        assert all_paths(decoded) == EXAMPLE_PATHS
        assert decoded.nodes[5].attributes == {"value": "weights/k"}


def test_writer_refuses_an_invalid_graph_and_leaves_no_file(tmp_path: Path) -> None:
    nodes = example_nodes()
    nodes[5].attributes["value"] = "not/written"
    writer = ocf.Writer(tmp_path / "bad.ocf")
    for key, value in VALUES.items():
        writer.write(key, value)
    writer.set_object_graph(nodes)
    with pytest.raises(InvalidError) as caught:
        writer.commit()
    assert caught.value.requirement == "R-GRAPH-004"
    assert list(tmp_path.iterdir()) == []


def _maps(levels: int, leaf: object) -> object:
    """``leaf`` inside ``levels`` nested maps: at metadata level ``levels``."""
    for _ in range(levels):
        leaf = {"k": leaf}
    return leaf


def test_writer_refuses_an_empty_map_at_level_32_of_node_metadata(tmp_path: Path) -> None:
    # Allowed by R-META-002, but protobuf level 101 in a node (spec/objects.md, "Limits"):
    # no reader could parse the index, so the writer refuses it and leaves no file.
    writer = ocf.Writer(tmp_path / "deep.ocf")
    writer.write("x", np.zeros(1, np.float32))
    writer.set_object_graph([Node(attributes={"value": "x"},
                                  metadata={"deep": _maps(32, {})})])
    with pytest.raises(LimitExceededError) as caught:
        writer.commit()
    assert caught.value.requirement == "R-FILE-007"
    assert list(tmp_path.iterdir()) == []


def test_writer_keeps_what_a_reader_parses_at_level_32(tmp_path: Path) -> None:
    # The same empty map in Index.metadata (protobuf level 99), and a scalar at level 32
    # of node metadata (level 100), are valid and come back.
    path = tmp_path / "deep.ocf"
    with ocf.Writer(path, metadata={"deep": _maps(32, {})}) as writer:
        writer.write("x", np.zeros(1, np.float32))
        writer.set_object_graph([Node(attributes={"value": "x"},
                                      metadata={"deep": _maps(32, 7)})])
    with ocf.open(path) as reader:
        assert reader.metadata == {"deep": _maps(32, {})}
        graph_read = reader.object_graph
        assert graph_read is not None
        assert graph_read.nodes[0].metadata == {"deep": _maps(32, 7)}


def test_writer_refuses_an_unreachable_node_in_directory_layout(tmp_path: Path) -> None:
    writer = ocf.Writer(tmp_path / "d", layout="directory")
    writer.write("x", np.zeros(1, np.float32))
    writer.set_object_graph([Node(), Node(attributes={"value": "x"})])
    with pytest.raises(InvalidError) as caught:
        writer.commit()
    assert caught.value.requirement == "R-GRAPH-005"
    assert list(tmp_path.iterdir()) == []


def test_bad_graph_does_not_stop_reading_by_name(tmp_path: Path) -> None:
    # [R-GRAPH-001]: a reader that reads by key may ignore the graph; the
    # graph is checked when first used.
    index, data = scalar_checkpoint(["a", "b"])
    index.object_graph.CopyFrom(example_message())  # keys the table does not hold
    path = tmp_path / "bad-graph.ocf"
    path.write_bytes(build_file(index, data, minor=1))
    with ocf.open(path) as reader:
        assert reader.get_tensor("b") == 1.0
        with pytest.raises(InvalidError) as caught:
            _ = reader.object_graph
        assert caught.value.requirement == "R-GRAPH-004"


def test_present_but_empty_graph_is_invalid_when_used(tmp_path: Path) -> None:
    index, data = scalar_checkpoint(["a"])
    index.object_graph.SetInParent()  # field 6 present, no nodes
    path = tmp_path / "empty-graph.ocf"
    path.write_bytes(build_file(index, data, minor=1))
    with ocf.open(path) as reader:
        assert reader.get_tensor("a") == 0.0
        with pytest.raises(InvalidError) as caught:
            _ = reader.object_graph
        assert caught.value.requirement == "R-GRAPH-001"


def test_graph_in_a_file_that_says_format_1_0_is_still_read(tmp_path: Path) -> None:
    # Whether a reader uses the graph depends on the field, not on format_minor.
    index, data = scalar_checkpoint(["c"])
    index.object_graph.nodes.add().attributes.add(name="value", key="c")
    path = tmp_path / "old.ocf"
    path.write_bytes(build_file(index, data, minor=0))
    with ocf.open(path) as reader:
        assert reader.format_version == (1, 0)
        decoded = reader.object_graph
        assert decoded is not None
        assert decoded.nodes[0].attributes == {"value": "c"}
