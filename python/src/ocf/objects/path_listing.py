"""Listings of checkpoint objects by canonical path that cost memory linear in the file.

A chain of n objects, each the child of the one before, has canonical paths
whose lengths add up to about n²: a 100 KB file can name objects whose paths
hold 100 million characters. :class:`CheckpointPaths` lists such objects as
a read-only sequence that builds each path when it is accessed, so that a
status query costs memory linear in the file; only a caller that keeps
every path pays for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from ocf.format.object_graph import SLOT_COMPONENT, ObjectGraph

ROOT_SHOWN_AS = "(root)"
# Paths holding at most this many characters in all are built once, sorted and kept:
# every realistic checkpoint, whose listing then reads like a list of strings.
MAX_SORTED_CHARACTERS = 1 << 24


class CheckpointPaths(Sequence[str]):
    """The canonical paths of some checkpoint objects (the root shown as "(root)").

    A read-only sequence: ``len`` is exact and cheap, items and slices are
    built when accessed, and it compares equal to any sequence of the same
    strings (``status.unmatched_checkpoint_paths() == ["a", "b"]``).

    Sorted by path when the paths hold at most MAX_SORTED_CHARACTERS (16 Mi)
    characters in all; they are then built once, on creation. Beyond that
    (a deep chain in a hostile file) they are in the checkpoint's node order,
    each built when accessed in memory linear in its length, and
    :attr:`sorted` is false: sorting them would mean holding them all.

    Examples:
        >>> paths = status.unmatched_checkpoint_paths()
        >>> len(paths), paths[:3], paths.total_characters
    """

    def __init__(self, graph: ObjectGraph, nodes: Sequence[int]) -> None:
        self._graph = graph
        self._nodes = list(nodes)
        self.total_characters = _total_length(graph, self._nodes)
        self.sorted = self.total_characters <= MAX_SORTED_CHARACTERS
        self._built = sorted(map(self._path, self._nodes)) if self.sorted else None

    def _path(self, node: int) -> str:
        return self._graph.path(node) or ROOT_SHOWN_AS

    def __len__(self) -> int:
        return len(self._nodes)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if self._built is not None:
            return self._built[index]
        if isinstance(index, slice):
            return [self._path(n) for n in self._nodes[index]]
        return self._path(self._nodes[index])

    def __iter__(self) -> Iterator[str]:
        if self._built is not None:
            return iter(self._built)
        return map(self._path, self._nodes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __repr__(self) -> str:
        shown = ", ".join(repr(self._graph.path_end(n, 80) or ROOT_SHOWN_AS)
                          for n in self._nodes[:3]) if self._built is None else ", ".join(
            repr(p) for p in self._built[:3])
        more = ", ..." if len(self) > 3 else ""
        order = "sorted" if self.sorted else "in node order"
        return (f"<CheckpointPaths: {len(self)} paths, {self.total_characters} characters, "
                f"{order}: {shown}{more}>")


def _total_length(graph: ObjectGraph, nodes: Sequence[int]) -> int:
    """The characters of the paths of ``nodes`` (each shown as :class:`CheckpointPaths`
    shows it), in time linear in the graph: each node's length is its origin's plus
    its own part, computed once."""
    length: dict[int, int] = {}
    total = 0
    for node in nodes:
        size = _length(graph, node, length)
        total += size if size else len(ROOT_SHOWN_AS)
    return total


def _length(graph: ObjectGraph, node: int, length: dict[int, int]) -> int:
    """len(graph.path(node)), memoized in ``length``, without recursion along edges."""
    chain: list[int] = []
    at: int | None = node
    while at is not None and at not in length:
        chain.append(at)
        origin = graph.origins[at]
        at = None if origin is None else origin.parent
    for n in reversed(chain):
        origin = graph.origins[n]
        if origin is None:
            length[n] = 0
            continue
        parts = [length[origin.parent], len(origin.name)]
        if origin.variable is not None:  # a slot: <owner>/.slot/<variable>/<name>
            parts += [len(SLOT_COMPONENT), _length(graph, origin.variable, length)]
        length[n] = sum(parts) + sum(1 for p in parts if p) - 1
    return length[node]
