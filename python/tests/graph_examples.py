"""What the object graph tests share: the worked example of spec/objects.md (as
``Node`` lists and as a stored message), a stand-in tensor table, and decoding a
message expecting it to pass (``check``) or to break one requirement (``broken``).

Used by the test_object_graph_*.py files.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ocf.format import object_graph as graph
from ocf.format.errors import InvalidError
from ocf.format.object_graph import Node, SlotRef, decode_graph
from ocf.v1 import object_graph_pb2

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


def check(message: object_graph_pb2.ObjectGraph, keys: Mapping[str, object] = EXAMPLE_TABLE
          ) -> graph.ObjectGraph:
    return decode_graph(message, keys, "test.ocf")


def broken(requirement: str, message: object_graph_pb2.ObjectGraph,
           keys: Mapping[str, object] = EXAMPLE_TABLE) -> None:
    with pytest.raises(InvalidError) as caught:
        check(message, keys)
    assert caught.value.requirement == requirement
    assert f"[{requirement}]" in str(caught.value)


def nested_metadata(node: object_graph_pb2.ObjectNode, levels: int) -> None:
    value = node.metadata["deep"]
    for _ in range(levels):
        value = value.list_value.values.add()
    value.int_value = 1


def encoded(nodes: list[Node]) -> object_graph_pb2.ObjectGraph:
    message = object_graph_pb2.ObjectGraph()
    graph.encode_graph(nodes, message)
    return message


def keys_of(nodes: list[Node]) -> dict[str, None]:
    return table(*(key for node in nodes for key in node.attributes.values()))
