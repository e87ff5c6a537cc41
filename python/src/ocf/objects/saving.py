"""Turning live objects into an object graph and its tensors (spec/objects.md).

:func:`collect` walks the objects reachable from a root through the
tracking protocol, breadth-first, giving each distinct object one node (an
object reachable by several paths is shared, cycles end), then the slot
variables of optimizers. Every tensor gets the flat key derived from its
node's canonical path [R-GRAPH-007]. :func:`collect_names` walks the same
way but asks no object for its values: what a restore needs of the live side.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle, Snapshot, frozen_metadata, submit, wait_for_pending
from ocf.format.errors import InvalidError, OCFError
from ocf.format.flat import check_writer_options
from ocf.format.object_graph import Node, SlotRef, attribute_key, canonical_paths, check_name
from ocf.format.writer import Writer
from ocf.objects.tracking import Tracked, is_trackable, track


@dataclass
class LiveObjects:
    """The nodes of the live objects under a root; each node's attributes name the
    flat keys of its tensors."""

    nodes: list[Node]
    objects: list[object]  # the live object of each node
    paths: list[str]


@dataclass
class LiveGraph(LiveObjects):
    """The live objects with their values: what a save writes."""

    tensors: dict[str, np.ndarray]  # flat key -> value


def collect(root: object) -> LiveGraph:
    """The object graph of everything reachable from ``root``, with its values."""
    live, views = _walk(root)
    tensors = _tensors(live, views)
    for node, view, path in zip(live.nodes, views, live.paths):
        with _naming(path):
            node.metadata = dict(view.metadata())
    return LiveGraph(live.nodes, live.objects, live.paths, tensors)


def collect_names(root: object) -> LiveObjects:
    """The object graph of everything reachable from ``root``, with the keys of its
    tensors but no values and no metadata: what a restore judges the live side by,
    without copying a GPU model to the host (``ocf_tensor_names``)."""
    live, views = _walk(root)
    for node, view, path in zip(live.nodes, views, live.paths):
        with _naming(path):
            names = view.tensor_names()
        for name in names:
            _check(name, "attribute name", view.obj)
            node.attributes[name] = attribute_key(path, name)
    return live


def _walk(root: object) -> tuple[LiveObjects, list[Tracked]]:
    """The objects reachable from ``root`` as nodes with their edges and slots, and the
    protocol view of each."""
    ids: dict[int, int] = {}
    objects: list[object] = []
    views: list[Tracked] = []
    nodes: list[Node] = []

    def node_of(obj: object) -> int:
        found = ids.get(id(obj))
        if found is None:
            found = ids[id(obj)] = len(objects)
            objects.append(obj)
            views.append(track(obj))
            nodes.append(Node(type_name=views[-1].type_name))
            queue.append(found)
        return found

    queue: deque[int] = deque()
    node_of(root)
    slots_done = 0
    while queue or slots_done < len(nodes):
        while queue:  # breadth-first along child edges
            i = queue.popleft()
            for name, child in views[i].children().items():
                _check(name, "edge name", objects[i])
                if is_trackable(child):
                    nodes[i].children[name] = node_of(child)
        # Slots once every variable reachable by edges has its node; slot
        # objects found here are walked in turn.
        while slots_done < len(nodes):
            _add_slots(slots_done, views, nodes, ids, node_of)
            slots_done += 1
    paths = [p or "" for p in canonical_paths(nodes)]
    return LiveObjects(nodes, objects, paths), views


@contextmanager
def _naming(path: str) -> Iterator[None]:
    """Name the object's path in an error of its adapter, which does not know it."""
    try:
        yield
    except OCFError as exc:
        if exc.key is not None or exc.path is not None:
            raise
        raise exc.located(None, detail=f"object {path or '(root)'!r}: {exc.detail}") from None


def _check(name: str, what: str, owner: object) -> None:
    problem = check_name(name, what)
    if problem:
        raise InvalidError(f"{type(owner).__name__}: {problem}", requirement="R-GRAPH-003")


def _add_slots(owner: int, views: list[Tracked], nodes: list[Node], ids: dict[int, int],
               node_of: Callable[[object], int]) -> None:
    for variable, name, slot in views[owner].slots():
        _check(name, "slot name", views[owner].obj)
        variable_node = ids.get(id(variable))
        if variable_node is None:
            raise InvalidError(f"{type(views[owner].obj).__name__} keeps slot {name!r} for a "
                               "variable that is not part of the saved objects",
                               requirement="R-GRAPH-006")
        nodes[owner].slots.append(SlotRef(variable_node, name, node_of(slot)))


def _tensors(live: LiveObjects, views: list[Tracked]) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for node, view, path in zip(live.nodes, views, live.paths):
        with _naming(path):
            own = view.tensors()
        for name, value in own.items():
            _check(name, "attribute name", view.obj)
            key = attribute_key(path, name)
            node.attributes[name] = key
            tensors[key] = np.asarray(value)
    return tensors


def write(root: object, path: str | os.PathLike[str], *,
          metadata: Mapping[str, object] | None = None, **options: object) -> str:
    """Save everything reachable from ``root`` as one object-based checkpoint.

    Examples:
        >>> ocf.write({"model": model, "step": ocf.Variable(np.array(10))}, "state.ocf")
    """
    check_object_then_path("ocf.write", root, path, first_name="root")
    wait_for_pending()  # never two saves at once (ocf.format.async_save)
    graph = collect(root)
    return write_graph(graph.nodes, graph.tensors, path, metadata, options)


def write_async(root: object, path: str | os.PathLike[str], *,
                metadata: Mapping[str, object] | None = None, **options: object) -> SaveHandle:
    """:func:`write` in the background, once the tensors are copied (ocf.format.async_save)."""
    graph = collect(root)  # the objects as they are now; the tensors copied by submit
    frozen = frozen_metadata(metadata)

    def job(snapshot: Snapshot) -> str:
        return write_graph(graph.nodes, snapshot, path, frozen, options)

    return submit(graph.tensors, job, os.fspath(path))


def save_root(root: object, path: str | os.PathLike[str], *,
              metadata: Mapping[str, object] | None, blocking: bool,
              options: Mapping[str, object]) -> str | SaveHandle:
    """:func:`write` or, unless ``blocking``, :func:`write_async`; a Writer option
    that does not exist is a TypeError at the call, not in the background."""
    check_writer_options(options)
    if not blocking:
        return write_async(root, path, metadata=metadata, **options)
    return write(root, path, metadata=metadata, **options)


def write_graph(nodes: list[Node], tensors: Mapping[str, np.ndarray],
                path: str | os.PathLike[str], metadata: Mapping[str, object] | None,
                options: Mapping[str, object]) -> str:
    """Write a collected graph and its tensors as one checkpoint at ``path``."""
    with Writer(path, metadata=metadata, **options) as writer:  # type: ignore[arg-type]
        writer.write_many(tensors)
        writer.set_object_graph(nodes)
    return os.fspath(path)
