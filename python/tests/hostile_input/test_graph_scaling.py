"""Hostile object graphs cost time and memory linear in their size.

A chain of child edges makes canonical paths as long as the graph is deep,
so anything that builds every path (a status query, a drawing of the tree,
an error message) is quadratic. These tests open, restore from, query and
draw chains of n and 10 n nodes and check that memory and time grow about
tenfold, not a hundredfold: ratios measured in one run, never absolute
figures.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import build_file, make_index
from memory_support import traced_memory

import ocf
from ocf.cli.tree import draw_tree
from ocf.interop.registry import open_checkpoint

SMALL, LARGE = 2_000, 20_000  # tenfold; a quadratic cost would grow a hundredfold


def chain_file(path: Path, n: int) -> Path:
    """A checkpoint whose object graph is one chain of n nodes, edges named 'a'."""
    index = make_index([])
    for i in range(n):
        node = index.object_graph.nodes.add()
        if i + 1 < n:
            node.children.add(name="a", node_id=i + 1)
    path.write_bytes(build_file(index))
    return path


def everything_a_user_may_ask(path: Path) -> int:
    """Restore into a root that matches nothing, ask the status every question, draw
    the tree; returns the characters produced, which must stay linear too."""
    status = ocf.restore({}, path, partial=True)
    produced = len(repr(status)) + len(status.unmatched_object_paths())
    try:
        status.assert_consumed()
    except ocf.RestoreMismatchError as exc:
        produced += len(str(exc))
    source = open_checkpoint(path, verify=False)
    try:
        graph = source.object_graph
        assert graph is not None
        produced += sum(len(line) for line in draw_tree(graph, source))
    finally:
        source.close()
    return produced


def cost(path: Path) -> tuple[float, int, int]:
    """Best time of three, peak traced memory, characters produced."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        everything_a_user_may_ask(path)
        times.append(time.perf_counter() - start)
    with traced_memory() as memory:
        produced = everything_a_user_may_ask(path)
    return min(times), memory.peak, produced


def test_a_deep_chain_costs_linear_time_memory_and_output(tmp_path: Path) -> None:
    small_time, small_memory, small_output = cost(chain_file(tmp_path / "s.ocf", SMALL))
    large_time, large_memory, large_output = cost(chain_file(tmp_path / "l.ocf", LARGE))
    assert large_output / small_output < 15, (small_output, large_output)
    assert large_memory / small_memory < 15, (small_memory, large_memory)
    assert large_time / small_time < 35, (small_time, large_time)


def test_the_drawing_of_a_huge_graph_stops_at_max_lines(tmp_path: Path) -> None:
    path = chain_file(tmp_path / "c.ocf", 5_000)
    source = open_checkpoint(path, verify=False)
    try:
        graph = source.object_graph
        assert graph is not None
        lines = list(draw_tree(graph, source, max_lines=100))
    finally:
        source.close()
    assert len(lines) == 101
    assert lines[-1] == "... stopped after 100 lines (ocf tree --max-lines N draws more)"
    assert max(len(line) for line in lines) < 400  # indentation stops growing at depth 64
    assert "[depth 70] a" in lines[70]


def test_unmatched_paths_of_a_deep_chain_are_built_one_at_a_time(tmp_path: Path) -> None:
    # 4,200 nodes: paths of 17.6 million characters in all, above the 16 Mi kept sorted.
    n = 4_200
    status = ocf.restore({}, chain_file(tmp_path / "c.ocf", n), partial=True)
    with traced_memory() as memory:
        paths = status.unmatched_checkpoint_paths()
        first, last = paths[1], paths[-1]
        longest = max(len(p) for p in paths)
    assert len(paths) == n - 1  # the root matched the empty dict
    assert paths.total_characters == sum(2 * i - 1 for i in range(1, n))
    assert not paths.sorted  # in node order: the shallowest first
    assert (first, last) == ("a/a", "/".join(["a"] * (n - 1)))
    assert longest == 2 * (n - 1) - 1
    assert memory.peak < 2 * 2 * n * 8 + (1 << 20)  # a few paths at once, never all
    assert paths[:2] == ["a", "a/a"]
    assert paths != list(paths)[::-1]
    assert len(repr(paths)) < 400


def test_unmatched_paths_of_a_small_graph_are_a_sorted_list_of_strings(tmp_path: Path) -> None:
    status = ocf.restore({}, chain_file(tmp_path / "c.ocf", 4), partial=True)
    paths = status.unmatched_checkpoint_paths()
    assert paths.sorted
    assert paths == ["a", "a/a", "a/a/a"]
    assert list(reversed(paths)) == ["a/a/a", "a/a", "a"]
    assert paths.index("a/a") == 1
    assert paths != ["a"]


def test_bare_nodes_of_a_decoded_graph_share_empty_containers_that_refuse_changes(
    tmp_path: Path
) -> None:
    source = open_checkpoint(chain_file(tmp_path / "c.ocf", 3), verify=False)
    try:
        graph = source.object_graph
    finally:
        source.close()
    assert graph is not None
    first, second = graph.nodes[0], graph.nodes[1]
    assert first.attributes is second.attributes
    assert first.slots is second.slots
    assert first.metadata is second.metadata
    with pytest.raises(TypeError, match="do not change"):
        first.attributes["x"] = "k"
    with pytest.raises(TypeError, match="do not change"):
        first.slots.append(first.slots[0] if first.slots else None)  # type: ignore[arg-type]
    assert first.attributes == {}
    assert second.slots == []
