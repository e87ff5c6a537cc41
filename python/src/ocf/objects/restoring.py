"""Restoring live objects from a checkpoint by structure (spec/objects.md).

A restore walks the checkpoint's object graph and the live objects together
from their roots, matching child edges by name: names of variables play no
part, so ``dense/kernel`` restores into a layer now called ``dense_1``. A
checkpoint node whose live object does not exist yet waits on its parent
(:func:`ocf.objects.tracking.defer`) and is restored the moment the parent gains
that child (restore-on-create). A slot variable is restored once both its
optimizer and its variable are matched, whichever comes first.

:class:`~ocf.objects.restore_status.RestoreStatus` tells what matched; its
assertions name the paths that did not. A checkpoint without object graph is
restored by name (ocf.objects.restore_by_name).

A restore holds the checkpoint open only while it matches: the first pass,
and each restore-on-create later, opens it (the first pass uses the reader
that found the graph), matches, and closes it, also on errors. A deferred
child that is never created therefore keeps no file open. Reopening checks
that the checkpoint at the path is still the one the restore began with
(its index's length and CRC-32C): a checkpoint saved over it meanwhile
fails the deferred restore instead of mixing values of two checkpoints.

The checkpoint can be an OCF checkpoint or a TensorFlow one (a
``tf.train.Checkpoint`` prefix, or a ``tf.compat.v1.train.Saver`` one, restored
by name): both are read through :mod:`ocf.interop.registry`, so the matching, the
restore-on-create and the status assertions are the same for both.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ocf.format.argument_order import check_object_then_path
from ocf.format.errors import InvalidError, NotFoundError, OCFError
from ocf.format.object_graph import ObjectGraph, SlotRef
from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions
from ocf.interop.registry import open_checkpoint
from ocf.objects.fitting import cast_values, fitted_dtype
from ocf.objects.path_listing import ROOT_SHOWN_AS, CheckpointPaths
from ocf.objects.read_ahead import ReadAhead
from ocf.objects.renames import Rename, path_mapper
from ocf.objects.restore_by_name import NameMap, restore_by_name
from ocf.objects.restore_status import (
    SHOWN,
    SHOWN_PATH,
    SORTED_UP_TO,
    RestoreMismatchError,
    RestoreStatus,
)
from ocf.objects.tracking import Tracked, defer, is_trackable, track

__all__ = ["NameMap", "Rename", "RestoreMismatchError", "RestoreStatus", "check_restorable",
           "restore"]

class _Opener:
    """Opens the checkpoint of one restore for each pass of matching.

    The first call returns the reader the restore already opened; later ones
    reopen the path and refuse a checkpoint other than the first one.
    """

    def __init__(self, first: AnySource, reopen: Callable[[], AnySource]) -> None:
        self._first: AnySource | None = first
        self._reopen = reopen
        self._identity = first.identity
        self._path = first.path

    def __call__(self) -> AnySource:
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
    # Checkpoint nodes this restore is responsible for, ascending: every node when it
    # begins at the root (a checked graph's nodes are all reachable from it).
    scope: Sequence[int]
    cast: bool  # values of another dtype than their object's are cast (else INVALID)
    # Run once, after the first pass is checked and before it hands over any value:
    # the strictness check of a restore without partial.
    judge: Callable[[], object] | None = None
    # During the judging: slot nodes the first pass is about to restore.
    pending_slots: set[int] = field(default_factory=set)
    matched: dict[int, object] = field(default_factory=dict)
    slots_done: set[int] = field(default_factory=set)
    waiting_slots: dict[int, list[tuple[int, SlotRef]]] = field(default_factory=dict)
    reader: AnySource | None = None  # open during a pass of matching only
    renamed: Renamed | None = None  # where renamed checkpoint objects are found

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
        """Match breadth-first from ``node``, check every value against its object and
        read every value, and only then hand values over: a mismatch or an unreadable
        value anywhere changes nothing."""
        pairs, waits = self._walk(node, obj)
        try:
            casts = [self._checked(n, view) for n, view in pairs]
            slot_nodes = self._slots_of_pass(pairs)
            self._judge(slot_nodes)
            assert self.reader is not None, "values are read during a pass only"
            ahead = ReadAhead(self.reader, self._keys_of([n for n, _ in pairs] + slot_nodes))
        except BaseException:
            for n, _ in pairs:
                del self.matched[n]
            raise
        for (n, view), node_casts in zip(pairs, casts):
            self._restore_values(n, view, node_casts, ahead)
        for parent, name, child_node in waits:
            defer(parent, name, self._deferred(child_node))
        for n, _ in pairs:
            for slot in self.graph.nodes[n].slots:
                self._slot(n, slot, ahead)
            for owner, slot in self.waiting_slots.pop(n, []):
                self._slot(owner, slot, ahead)

    def _slots_of_pass(self, pairs: list[tuple[int, Tracked]]) -> list[int]:
        """The slot nodes the pass matching ``pairs`` restores: the slots of its objects
        whose variable is matched, and the slots waiting for its objects."""
        return [*(slot.slot_node for n, _ in pairs for slot in self.graph.nodes[n].slots
                  if slot.variable in self.matched),
                *(slot.slot_node for n, _ in pairs for _, slot in self.waiting_slots.get(n, []))]

    def _keys_of(self, nodes: list[int]) -> list[str]:
        return [key for n in nodes for key in self.graph.nodes[n].attributes.values()]

    def _judge(self, slot_nodes: list[int]) -> None:
        judge, self.judge = self.judge, None
        if judge is None:
            return
        self.pending_slots = set(slot_nodes)
        try:
            judge()
        finally:
            self.pending_slots = set()

    def _walk(self, node: int, obj: object
              ) -> tuple[list[tuple[int, Tracked]], list[tuple[object, str, int]]]:
        """The (node, object) pairs matched from ``node``, and the (parent, edge, node)
        of checkpoint children whose object does not exist yet."""
        pairs: list[tuple[int, Tracked]] = []
        waits: list[tuple[object, str, int]] = []
        work = deque([(node, obj)])
        while work:
            node, obj = work.popleft()
            if node in self.matched:
                continue
            self.matched[node] = obj
            view = track(obj)
            pairs.append((node, view))
            live_children = view.children()
            for name, child_node in self.graph.nodes[node].children.items():
                owner, edge = (obj, name) if self.renamed is None else \
                    self.renamed.place(child_node, obj, name)
                child = live_children.get(edge) if owner is obj else \
                    None if owner is None else track(owner).children().get(edge)
                if child is not None and is_trackable(child):
                    work.append((child_node, child))
                elif owner is not None:
                    waits.append((owner, edge, child_node))
        return pairs, waits

    def _checked(self, node: int, view: Tracked) -> dict[str, np.dtype[Any] | None]:
        """Each stored tensor of ``node`` checked against ``view`` (the dtype to cast to),
        and its metadata by the object's own check."""
        stored = self.graph.nodes[node]
        expected = view.expected_tensors() if stored.attributes else {}
        assert self.reader is not None, "values are checked during a pass only"
        casts = {name: fitted_dtype(self.reader.summary(key), expected[name], cast=self.cast,
                                    key=key, path=str(self.reader.path))
                 for name, key in stored.attributes.items() if name in expected}
        if stored.metadata:
            with self._naming_file(key=None), self._naming_object(node):
                view.check_restore_metadata(stored.metadata)
        return casts

    @contextmanager
    def _naming_object(self, node: int) -> Iterator[None]:
        """An object's refusal of its metadata names the object's path."""
        try:
            yield
        except OCFError as exc:
            where = self.graph.path(node) or ROOT_SHOWN_AS
            raise exc.located(exc.path, exc.key, detail=f"object {where!r}: {exc.detail}"
                              ) from None

    @contextmanager
    def _naming_file(self, key: str | None) -> Iterator[None]:
        """An adapter's error, which knows neither, names the file (and ``key``)."""
        try:
            yield
        except OCFError as exc:
            if exc.path is not None and (exc.key is not None or key is None):
                raise
            assert self.reader is not None
            raise exc.located(exc.path or self.reader.path, exc.key or key) from None

    def _deferred(self, node: int) -> Callable[[object], None]:
        def restore_child(child: object) -> None:
            self.match(node, child)
        return restore_child

    def _restore_values(self, node: int, view: Tracked,
                        casts: dict[str, np.dtype[Any] | None], ahead: ReadAhead) -> None:
        stored = self.graph.nodes[node]
        if stored.attributes:
            # An adapter's error: say which tensor and file.
            with self._naming_file(key=next(iter(stored.attributes.values()))):
                view.restore_tensors(cast_values(self._values(node, ahead), casts))
        if stored.metadata:
            view.restore_metadata(stored.metadata)

    def _values(self, node: int, ahead: ReadAhead) -> dict[str, np.ndarray]:
        return {name: ahead.value(key) for name, key in self.graph.nodes[node].attributes.items()}

    def _slot(self, owner: int, slot: SlotRef, ahead: ReadAhead) -> None:
        variable = self.matched.get(slot.variable)
        if variable is None:  # wait for the variable to be matched
            self.waiting_slots.setdefault(slot.variable, []).append((owner, slot))
            return
        if track(self.matched[owner]).restore_slot(variable, slot.name,
                                                   self._values(slot.slot_node, ahead)):
            self.slots_done.add(slot.slot_node)

    def unmatched_nodes(self, *, holding_values: bool = False) -> list[int]:
        done = set(self.matched) | self.slots_done | self.pending_slots
        return [n for n in self.scope if n not in done
                and (not holding_values or self.graph.nodes[n].attributes)]

    def unmatched_state_paths(self) -> list[str]:
        """Paths of the unmatched checkpoint objects holding metadata but no tensors:
        training state such as an LR scheduler's, which a strict restore requires."""
        done = set(self.matched) | self.slots_done | self.pending_slots
        return sorted(self.graph.path(n) or ROOT_SHOWN_AS for n in self.scope
                      if n not in done and self.graph.nodes[n].metadata
                      and not self.graph.nodes[n].attributes)

    def unmatched_checkpoint_paths(self, *, holding_values: bool = False) -> CheckpointPaths:
        return CheckpointPaths(self.graph, self.unmatched_nodes(holding_values=holding_values))

    def shown_unmatched(self, *, holding_values: bool) -> tuple[int, list[str]]:
        """How many checkpoint objects are unmatched, and the paths a message shows:
        all, sorted, when few; else the first in graph order, each cut to its end, so
        that a message costs time linear in the graph however deep it is."""
        nodes = self.unmatched_nodes(holding_values=holding_values)
        if len(nodes) <= SORTED_UP_TO:
            return len(nodes), sorted(self.graph.path(n) or ROOT_SHOWN_AS for n in nodes)
        return len(nodes), [self.graph.path_end(n, SHOWN_PATH) or ROOT_SHOWN_AS
                            for n in nodes[:SHOWN]]


@dataclass
class Renamed:
    """Where each checkpoint object is found among the live objects under a rename map:
    its path mapped, then looked up from the root (the object matched with ``begin``)."""

    graph: ObjectGraph
    root: object
    begin: str  # the checkpoint path of the node matched with the root
    mapped: Callable[[str], str]

    def place(self, node: int, parent: object, name: str) -> tuple[object | None, str]:
        """The live object that should hold checkpoint ``node`` (reached from the live
        ``parent`` by the edge ``name``), and the edge name it should hold it by;
        (None, name) when that object does not exist."""
        original = self.graph.path(node)
        path = self.mapped(original)
        if path == original:  # not renamed: where the walk would look
            return parent, name
        if self.begin and not path.startswith(self.begin + "/"):
            return None, path  # mapped outside what the restore's root stands for
        parts = path[len(self.begin):].strip("/").split("/")
        owner: object | None = self.root
        for edge in parts[:-1]:
            owner = track(owner).children().get(edge)
            if owner is None or not is_trackable(owner):
                return None, parts[-1]
        return owner, parts[-1]


def restore(root: object, path: str | os.PathLike[str], *, start: str = "",
            partial: bool = False, cast: bool = False, name_map: NameMap | None = None,
            rename: Rename | None = None, verify: bool = True,
            storage_options: StorageOptions | None = None) -> RestoreStatus:
    """Restore ``root`` and everything under it from the checkpoint at ``path``.

    Strict unless ``partial``: when the call returns, every checkpoint
    tensor must have found its object and every object holding tensors its
    value (:meth:`RestoreStatus.assert_values_matched`), else
    RestoreMismatchError names the paths and the file. Objects created after the call
    (restore-on-create: a lazy layer built on its first call) need
    ``partial=True``; call ``assert_consumed()`` on the status once they
    exist. Either way every value is checked against its object (shape,
    dtype; see :mod:`ocf.objects.fitting`), every object's metadata by the
    object (``ocf_check_restore_metadata``), and every value read, its
    checksums verified (:mod:`ocf.objects.read_ahead`), before the first is
    handed over, so a failed restore leaves the objects as they were. A stored dtype
    other than the object's is an error unless ``cast``.

    ``start`` names the checkpoint object to match with ``root`` by its
    child-edge path ("model" restores a bare model from a checkpoint that
    saved it under that name). ``rename`` maps the paths of objects renamed
    since the save to their new paths: a dict of path prefixes
    (``{"model/fc1": "model/encoder"}``) or a function of a checkpoint path
    (:mod:`ocf.objects.renames`); their optimizer slots follow them.

    A checkpoint without object graph is restored by name: each live
    tensor's flat key, mapped through ``name_map`` (a dict or a function),
    names the checkpoint tensor to take; without ``name_map``, a key absent
    from the file is also looked up in the dotted form of a PyTorch
    ``state_dict`` (``fc1/weight/.value`` as ``fc1.weight``). ``name_map``
    given for a checkpoint with a graph restores it by name too.

    ``path`` may also name a TensorFlow checkpoint (its prefix, as
    ``tf.train.Checkpoint.save`` returns it); TensorFlow's object graph is
    matched like OCF's, its variables' ``VARIABLE_VALUE`` arriving as
    ``value`` (ocf.interop.tensorflow.objects). TensorFlow is not needed.

    A URL (``s3://bucket/run/ckpt-3``) is read through fsspec, with
    ``storage_options`` (endpoint_url, key, secret, ...) given to it.

    Examples:
        >>> status = ocf.restore({"model": model, "optimizer": optimizer}, "training/ckpt-3")
        >>> ocf.restore(model, "ckpt.ocf", start="model")  # the subgraph under the edge "model"
    """
    check_object_then_path("ocf.restore", root, path, first_name="root")
    mapped = None if rename is None else path_mapper(rename)
    return _restore(root, os.fspath(path), start, not partial, cast, name_map, mapped,
                    verify, storage_options)


def _restore(root: object, path: str, start: str, strict: bool, cast: bool,
             name_map: NameMap | None, rename: Callable[[str], str] | None, verify: bool,
             storage_options: StorageOptions | None) -> RestoreStatus:
    check_restorable(root)
    reader = open_checkpoint(path, verify=verify, storage_options=storage_options)
    try:
        graph = reader.object_graph
    except BaseException:
        reader.close()
        raise
    if graph is None and rename is not None:
        reader.close()
        raise InvalidError("rename= maps object paths, and this checkpoint has no object "
                           "graph: name_map= maps its tensor keys", path=path)
    if graph is None or name_map is not None:
        # closes the reader, also on errors
        return restore_by_name(root, reader, name_map, strict, cast)
    begin = graph.node_at([p for p in start.split("/") if p])
    if begin is None:
        reader.close()
        raise NotFoundError(f"the checkpoint has no object at {start!r}", path=path)
    reopen = functools.partial(open_checkpoint, path, verify=verify,
                               storage_options=storage_options)
    session = _Session(_Opener(reader, reopen), graph, _reachable(graph, begin), cast)
    if rename is not None:
        session.renamed = Renamed(graph, root, graph.path(begin), rename)
    status = RestoreStatus(root, path, session)
    if strict:
        session.judge = status.assert_values_matched
    session.match(begin, root)  # closes the reader, also on errors
    return status


def _reachable(graph: ObjectGraph, begin: int) -> Sequence[int]:
    """The nodes reached from ``begin`` by child edges and slots, ascending."""
    if begin == 0:  # the checks made sure the root reaches every node [R-GRAPH-005]
        return range(len(graph.nodes))
    seen = {begin}
    todo = [begin]
    while todo:
        node = graph.nodes[todo.pop()]
        for nxt in [*node.children.values(), *(s.slot_node for s in node.slots)]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return sorted(seen)


def check_restorable(value: object) -> None:
    """Refuse roots that cannot hold restored values."""
    if not is_trackable(value):
        raise InvalidError(f"a {type(value).__name__} cannot be restored into: it is not "
                           "trackable (see ocf.objects.tracking)")
