"""The checks of the object graph [R-GRAPH-001..006]: each rule broken once, the graphs
each rule allows, and the order of the checks (spec/objects.md, "Order of checks").

Graphs that break a rule are built by hand as ``ocf.v1.ObjectGraph`` messages,
from the spec's worked example (graph_examples.py).
"""

from __future__ import annotations

import pytest
from graph_examples import (
    EXAMPLE_KEYS,
    EXAMPLE_PATHS,
    all_paths,
    broken,
    check,
    example_message,
    nested_metadata,
    table,
)

from ocf.format.errors import LimitExceededError
from ocf.v1 import object_graph_pb2


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
