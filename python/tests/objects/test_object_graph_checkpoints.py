"""The object graph in whole checkpoints: written by ocf.Writer, read by ocf.open, and
checked when first used, not when the file is opened [R-GRAPH-001].

Checkpoints with a graph a writer would refuse are built byte by byte with
tests/helpers.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from graph_examples import (
    EXAMPLE_PATHS,
    all_paths,
    example_message,
    example_nodes,
)
from helpers import build_file, scalar_checkpoint

import ocf
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.object_graph import (
    Node,
)

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
        assert reader.format_version == (1, 2)
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
