"""Restoring live objects from a checkpoint by structure (spec/objects.md).

A restore walks the checkpoint's object graph and the live objects together
from their roots, matching child edges by name: names of variables play no
part, so ``dense/kernel`` restores into a layer now called ``dense_1``. A
checkpoint node whose live object does not exist yet waits on its parent
(:func:`ocf.objects.tracking.defer`) and is restored the moment the parent gains
that child (restore-on-create). A slot variable is restored once both its
optimizer and its variable are matched, whichever comes first.

:class:`RestoreStatus` tells what matched; its assertions name the paths
that did not.

A restore holds the checkpoint open only while it matches: the first pass,
and each restore-on-create later, opens it (the first pass uses the reader
that found the graph), matches, and closes it, also on errors. A deferred
child that is never created therefore keeps no file open. Reopening checks
that the checkpoint at the path is still the one the restore began with
(its index's length and CRC-32C): a checkpoint saved over it meanwhile
fails the deferred restore instead of mixing values of two checkpoints.

The checkpoint can be an OCF checkpoint or a TensorFlow one (a
``tf.train.Checkpoint`` prefix, or a ``tf.compat.v1.train.Saver`` one, restored
by name): both are read through :mod:`ocf.objects.sources`, so the matching, the
restore-on-create and the status assertions are the same for both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ocf.format.errors import InvalidError, NotFoundError, OCFError
from ocf.format.object_graph import ObjectGraph, SlotRef
from ocf.format.storage.location import StorageOptions
from ocf.objects.saving import collect
from ocf.objects.sources import Source, open_source
from ocf.objects.tracking import Tracked, defer, is_trackable, track

NameMap = Mapping[str, str] | Callable[[str], str]


class RestoreMismatchError(InvalidError, AssertionError):
    """A restore status assertion failed; the message names the file and lists the
    unmatched paths. An ``ocf.OCFError`` (INVALID), and an AssertionError as the
    assertions of TensorFlow's restore status raise."""


class _Opener:
    """Opens the checkpoint of one restore for each pass of matching.

    The first call returns the reader the restore already opened; later ones
    reopen the path and refuse a checkpoint other than the first one.
    """

    def __init__(self, first: Source, reopen: Callable[[], Source]) -> None:
        self._first: Source | None = first
        self._reopen = reopen
        self._identity = first.identity
        self._path = first.path

    def __call__(self) -> Source:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        source = self._reopen()
        if source.identity != self._identity:
            source.close()
            raise InvalidError("the checkpoint was replaced since the restore began: a "
                               "deferred restore (restore-on-create) would mix values of "
                               "two checkpoints", path=self._path)
        return source


@dataclass
class _Session:
    """One restore in progress; lives as long as some restore waits on an object."""

    opener: _Opener
    graph: ObjectGraph
    scope: set[int]  # checkpoint nodes this restore is responsible for
    matched: dict[int, object] = field(default_factory=dict)
    slots_done: set[int] = field(default_factory=set)
    waiting_slots: dict[int, list[tuple[int, SlotRef]]] = field(default_factory=dict)
    reader: Source | None = None  # open during a pass of matching only

    def match(self, node: int, obj: object) -> None:
        """Restore ``obj`` from ``node`` and, breadth-first, everything below it."""
        with self._pass():
            self._match(node, obj)

    @contextmanager
    def _pass(self) -> Iterator[None]:
        """The checkpoint open for one pass, closed when it ends, however it ends."""
        if self.reader is not None:  # a child created during a pass: that pass's reader
            yield
            return
        self.reader = self.opener()
        try:
            yield
        finally:
            reader, self.reader = self.reader, None
            reader.close()

    def _match(self, node: int, obj: object) -> None:
        work = [(node, obj)]
        while work:
            node, obj = work.pop(0)
            if node in self.matched:
                continue
            self.matched[node] = obj
            view = track(obj)
            self._restore_values(node, view)
            live_children = view.children()
            for name, child_node in self.graph.nodes[node].children.items():
                child = live_children.get(name)
                if child is not None and is_trackable(child):
                    work.append((child_node, child))
                else:
                    defer(obj, name, self._deferred(child_node))
            for slot in self.graph.nodes[node].slots:
                self._slot(node, slot)
            for owner, slot in self.waiting_slots.pop(node, []):
                self._slot(owner, slot)

    def _deferred(self, node: int) -> Callable[[object], None]:
        def restore_child(child: object) -> None:
            self.match(node, child)
        return restore_child

    def _restore_values(self, node: int, view: Tracked) -> None:
        stored = self.graph.nodes[node]
        if stored.attributes:
            try:
                view.restore_tensors(self._values(node))
            except OCFError as exc:  # an adapter's error: say which tensor it was
                if exc.key is not None:
                    raise
                raise type(exc)(exc.detail, key=next(iter(stored.attributes.values())),
                                requirement=exc.requirement) from None
        if stored.metadata:
            view.restore_metadata(stored.metadata)

    def _values(self, node: int) -> dict[str, np.ndarray]:
        assert self.reader is not None, "values are read during a pass only"
        return {name: self.reader.read_tensor(key)
                for name, key in self.graph.nodes[node].attributes.items()}

    def _slot(self, owner: int, slot: SlotRef) -> None:
        variable = self.matched.get(slot.variable)
        if variable is None:  # wait for the variable to be matched
            self.waiting_slots.setdefault(slot.variable, []).append((owner, slot))
            return
        if track(self.matched[owner]).restore_slot(variable, slot.name,
                                                   self._values(slot.slot_node)):
            self.slots_done.add(slot.slot_node)

    def unmatched_checkpoint_paths(self) -> list[str]:
        done = set(self.matched) | self.slots_done
        return sorted(self.graph.path(n) or "(root)" for n in self.scope - done)


class RestoreStatus:
    """What a restore matched; assertions raise RestoreMismatchError naming paths."""

    def __init__(self, root: object, path: str, session: _Session | None,
                 by_name: _ByName | None = None) -> None:
        self._root = root
        self.path = path
        self._session = session
        self._by_name = by_name

    def __repr__(self) -> str:
        unmatched_objects = len(self.unmatched_object_paths())
        unmatched_values = len(self.unmatched_checkpoint_paths())
        how = "by name" if self._by_name is not None else "by structure"
        return (f"<RestoreStatus of {self.path!r} ({how}): {self.matched_count()} matched, "
                f"{unmatched_objects} objects without value, {unmatched_values} checkpoint "
                "values unmatched or waiting for their objects>")

    def matched_count(self) -> int:
        """Checkpoint objects (or, by name, tensor keys) that found their live object."""
        if self._by_name is not None:
            return len(self._by_name.used)
        assert self._session is not None
        return len(self._session.matched) + len(self._session.slots_done)

    def unmatched_checkpoint_paths(self) -> list[str]:
        """Checkpoint objects (or, by name, tensor keys) that found no live object."""
        if self._by_name is not None:
            return self._by_name.unused()
        assert self._session is not None
        return self._session.unmatched_checkpoint_paths()

    def unmatched_object_paths(self) -> list[str]:
        """Live objects under the root that received nothing from the checkpoint."""
        live = collect(self._root)
        if self._by_name is not None:
            return sorted(k for k in live.tensors if k not in self._by_name.restored)
        assert self._session is not None
        matched = {id(o) for o in self._session.matched.values()}
        slot_objects = _restored_slot_objects(live.objects, matched)
        return sorted(path or "(root)" for path, obj in zip(live.paths, live.objects)
                      if id(obj) not in matched and id(obj) not in slot_objects)

    def assert_consumed(self) -> RestoreStatus:
        """Every checkpoint value found its object, and every object its value."""
        self._fail_if("checkpoint values matched no object", self.unmatched_checkpoint_paths())
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self) -> RestoreStatus:
        """Every object that exists now under the root got its value."""
        self._fail_if("objects have no value in the checkpoint", self.unmatched_object_paths())
        return self

    def expect_partial(self) -> RestoreStatus:
        """Declare a partial restore intended; nothing is reported either way."""
        return self

    def _fail_if(self, what: str, paths: list[str]) -> None:
        if paths:
            shown = ", ".join(repr(p) for p in paths[:20])
            more = f" and {len(paths) - 20} more" if len(paths) > 20 else ""
            raise RestoreMismatchError(f"{len(paths)} {what}: {shown}{more}", path=self.path)


@dataclass
class _ByName:
    """A restore of a name-based checkpoint into objects, through a name map."""

    keys: set[str]
    restored: set[str] = field(default_factory=set)  # live keys that got values
    used: set[str] = field(default_factory=set)  # checkpoint keys that were used

    def unused(self) -> list[str]:
        return sorted(self.keys - self.used)


def restore(root: object, path: str, *, start: str = "", name_map: NameMap | None = None,
            verify: bool = True, storage_options: StorageOptions | None = None
            ) -> RestoreStatus:
    """Restore ``root`` and everything under it from the checkpoint at ``path``.

    ``start`` names the checkpoint object to match with ``root`` by its
    child-edge path ("model" restores a bare model from a checkpoint that
    saved it under that name). A checkpoint without object graph is restored
    by name: each live tensor's flat key, mapped through ``name_map`` (a
    dict or a function), names the checkpoint tensor to take.

    ``path`` may also name a TensorFlow checkpoint (its prefix, as
    ``tf.train.Checkpoint.save`` returns it); TensorFlow's object graph is
    matched like OCF's, its variables' ``VARIABLE_VALUE`` arriving as
    ``value`` (ocf.tensorflow.objects). TensorFlow is not needed.

    A URL (``s3://bucket/run/ckpt-3``) is read through fsspec, with
    ``storage_options`` (endpoint_url, key, secret, ...) given to it.
    """
    check_restorable(root)
    reader = open_source(path, verify=verify, storage_options=storage_options)
    try:
        graph = reader.object_graph
    except BaseException:
        reader.close()
        raise
    if graph is None or name_map is not None:
        return _restore_by_name(root, reader, name_map)  # closes the reader, also on errors
    begin = graph.node_at([p for p in start.split("/") if p])
    if begin is None:
        reader.close()
        raise NotFoundError(f"the checkpoint has no object at {start!r}", path=path)
    reopen = functools.partial(open_source, path, verify=verify,
                               storage_options=storage_options)
    session = _Session(_Opener(reader, reopen), graph, _reachable(graph, begin))
    session.match(begin, root)  # closes the reader, also on errors
    return RestoreStatus(root, path, session)


def _reachable(graph: ObjectGraph, begin: int) -> set[int]:
    seen = {begin}
    todo = [begin]
    while todo:
        node = graph.nodes[todo.pop()]
        for nxt in [*node.children.values(), *(s.slot_node for s in node.slots)]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _restore_by_name(root: object, reader: Source, name_map: NameMap | None) -> RestoreStatus:
    try:
        live = collect(root)
        by_name = _ByName(set(reader.keys()))
        for node, obj in zip(live.nodes, live.objects):
            values = {}
            for attribute, key in node.attributes.items():
                stored = _mapped_name(name_map, key)
                if stored is not None and stored in reader:
                    values[attribute] = reader.read_tensor(stored)
                    by_name.used.add(stored)
                    by_name.restored.add(key)
            if values:
                track(obj).restore_tensors(values)
    finally:
        reader.close()
    return RestoreStatus(root, reader.path, None, by_name)


def _restored_slot_objects(objects: list[object], matched: set[int]) -> set[int]:
    """Ids of the slots that matched optimizers keep for matched variables: a restore
    gave them their values through ocf_restore_slot."""
    result = set()
    for obj in objects:
        if id(obj) in matched:
            for variable, _, slot in track(obj).slots():
                if id(variable) in matched:
                    result.add(id(slot))
    return result


def _mapped_name(name_map: NameMap | None, key: str) -> str | None:
    if name_map is None:
        return key
    if isinstance(name_map, Mapping):
        return name_map.get(key, key)
    return name_map(key)


def check_restorable(value: object) -> None:
    """Refuse roots that cannot hold restored values."""
    if not is_trackable(value):
        raise InvalidError(f"a {type(value).__name__} cannot be restored into: it is not "
                           "trackable (see ocf.objects.tracking)")
