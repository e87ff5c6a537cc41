"""The object graph's limits and hostile graphs: the node limit [R-LIMIT-002], the
metadata nesting limit [R-META-002], and graphs decoded or refused in time and
memory linear in their size (a small hostile graph could otherwise need memory
quadratic in its depth).
"""

from __future__ import annotations

import pytest
from graph_examples import (
    broken,
    check,
    example_message,
    nested_metadata,
)
from memory_support import traced_memory

from ocf.format import object_graph as graph
from ocf.format.errors import LimitExceededError
from ocf.format.object_graph import (
    Node,
    Origin,
    SlotRef,
    canonical_paths,
)
from ocf.v1 import object_graph_pb2


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


def test_node_metadata_nesting_limit() -> None:
    message = example_message()
    nested_metadata(message.nodes[3], 32)
    assert check(message).nodes[3].metadata["deep"] is not None
    message = example_message()
    nested_metadata(message.nodes[3], 33)
    with pytest.raises(LimitExceededError) as caught:
        check(message)
    assert caught.value.requirement == "R-META-002"


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
    with traced_memory() as memory:
        decoded = check(message, {})
    assert len(decoded.nodes) == n
    assert memory.peak < 2048 * n


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
    with traced_memory() as memory:
        path = decoded.path(n - 1)
    assert len(path) == 2 * n - 3
    assert memory.peak < 200 * n  # the quadratic cache takes about n^2 = 10^8 bytes


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
