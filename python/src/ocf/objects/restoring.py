"""Restoring live objects from a checkpoint by structure (spec/objects.md).

A restore walks the checkpoint's object graph and the live objects together
from their roots, matching child edges by name: names of variables play no
part, so ``dense/kernel`` restores into a layer now called ``dense_1``. A
checkpoint node whose live object does not exist yet waits on its parent
(:func:`ocf.objects.tracking.defer`) and is restored the moment the parent gains
that child (restore-on-create). A slot variable is restored once both its
optimizer and its variable are matched, whichever comes first.

:class:`RestoreStatus` tells what matched; its assertions name the paths
that did not. They judge the live side by the names of its tensors
(:func:`ocf.objects.saving.collect_names`), never asking an object for its
values.

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
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError, NotFoundError, OCFError
from ocf.format.object_graph import ObjectGraph, SlotRef
from ocf.format.storage.location import StorageOptions
from ocf.objects.fitting import cast_values, fitted_dtype
from ocf.objects.read_ahead import ReadAhead
from ocf.objects.saving import LiveObjects, collect_names
from ocf.objects.sources import Source, open_source
from ocf.objects.tracking import Tracked, defer, is_trackable, track

NameMap = Mapping[str, str] | Callable[[str], str]


class RestoreMismatchError(InvalidError, AssertionError):
    """A restore status assertion failed; the message names the file and lists the
    unmatched paths. An ``ocf.OCFError`` (INVALID), and an AssertionError as the
    assertions of TensorFlow's restore status raise.

    Examples:
        >>> try:
        ...     ocf.Checkpoint(model=other_model).restore(path)
        ... except ocf.RestoreMismatchError as error:
        ...     print(error)  # names the unmatched paths and the file
    """


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
    cast: bool  # values of another dtype than their object's are cast (else INVALID)
    # Run once, after the first pass is checked and before it hands over any value:
    # the strictness check of a restore without partial.
    judge: Callable[[], object] | None = None
    # During the judging: slot nodes the first pass is about to restore.
    pending_slots: set[int] = field(default_factory=set)
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
                child = live_children.get(name)
                if child is not None and is_trackable(child):
                    work.append((child_node, child))
                else:
                    waits.append((obj, name, child_node))
        return pairs, waits

    def _checked(self, node: int, view: Tracked) -> dict[str, np.dtype[Any] | None]:
        """Each stored tensor of ``node`` checked against ``view`` (the dtype to cast to),
        and its metadata by the object's own check."""
        stored = self.graph.nodes[node]
        expected = view.expected_tensors() if stored.attributes else {}
        assert self.reader is not None, "values are checked during a pass only"
        casts = {name: fitted_dtype(self.reader.summary(key), expected[name], cast=self.cast,
                                    key=key, path=self.reader.path)
                 for name, key in stored.attributes.items() if name in expected}
        if stored.metadata:
            with self._naming_file(key=None):
                view.check_restore_metadata(stored.metadata)
        return casts

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
        return [n for n in sorted(self.scope - done)
                if not holding_values or self.graph.nodes[n].attributes]

    def unmatched_checkpoint_paths(self, *, holding_values: bool = False) -> list[str]:
        return sorted(self.graph.path(n) or "(root)"
                      for n in self.unmatched_nodes(holding_values=holding_values))

    def shown_unmatched(self, *, holding_values: bool) -> tuple[int, list[str]]:
        """How many checkpoint objects are unmatched, and the paths a message shows:
        all, sorted, when few; else the first in graph order, each cut to its end, so
        that a message costs time linear in the graph however deep it is."""
        nodes = self.unmatched_nodes(holding_values=holding_values)
        if len(nodes) <= _SORTED_UP_TO:
            return len(nodes), sorted(self.graph.path(n) or "(root)" for n in nodes)
        return len(nodes), [self.graph.path_end(n, _SHOWN_PATH) or "(root)"
                            for n in nodes[:_SHOWN]]


class RestoreStatus:
    """What a restore matched; assertions raise RestoreMismatchError naming paths.

    Examples:
        >>> status = ocf.Checkpoint(model=model).restore(path, partial=True)
        >>> model(first_batch)  # layers built now take their values
        >>> status.assert_consumed()
    """

    def __init__(self, root: object, path: str, session: _Session | None,
                 by_name: _ByName | None = None) -> None:
        self._root = root
        self.path = path
        self._session = session
        self._by_name = by_name

    def __repr__(self) -> str:
        unmatched_objects = len(self.unmatched_object_paths())
        unmatched_values = self._checkpoint_side(holding_values=False)[1]
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

    def unmatched_checkpoint_paths(self, *, holding_values: bool = False) -> list[str]:
        """Checkpoint objects (or, by name, tensor keys) that found no live object;
        with ``holding_values``, only those holding tensors."""
        if self._by_name is not None:
            return self._by_name.unused()
        assert self._session is not None
        return self._session.unmatched_checkpoint_paths(holding_values=holding_values)

    def unmatched_object_paths(self, *, holding_values: bool = False) -> list[str]:
        """Live objects under the root that received nothing from the checkpoint;
        with ``holding_values``, only those holding tensors."""
        return self._unmatched_objects(collect_names(self._root), holding_values=holding_values)

    def _unmatched_objects(self, live: LiveObjects, *, holding_values: bool) -> list[str]:
        if self._by_name is not None:
            return sorted(key for node in live.nodes for key in node.attributes.values()
                          if key not in self._by_name.restored)
        assert self._session is not None
        matched = {id(o) for o in self._session.matched.values()}
        slot_objects = _restored_slot_objects(live.objects, matched)
        return sorted(path or "(root)"
                      for path, obj, node in zip(live.paths, live.objects, live.nodes)
                      if id(obj) not in matched and id(obj) not in slot_objects
                      and (not holding_values or node.attributes))

    def assert_consumed(self) -> RestoreStatus:
        """Every checkpoint object found its live object, and every object its value."""
        self._fail_if("checkpoint values matched no object",
                      *self._checkpoint_side(holding_values=False))
        return self.assert_existing_objects_matched()

    def _checkpoint_side(self, *, holding_values: bool) -> tuple[list[str], int]:
        """The unmatched checkpoint paths to show, and how many there are."""
        if self._by_name is not None:
            unused = self._by_name.unused()
            return unused, len(unused)
        assert self._session is not None
        count, shown = self._session.shown_unmatched(holding_values=holding_values)
        return shown, count

    def assert_existing_objects_matched(self) -> RestoreStatus:
        """Every object that exists now under the root got its value."""
        self._fail_if("objects have no value in the checkpoint", self.unmatched_object_paths())
        return self

    def assert_values_matched(self) -> RestoreStatus:
        """Every checkpoint tensor found its object, and every object holding tensors
        got them; objects holding none (an activation layer, a Keras bookkeeping node)
        may stay unmatched on either side. What a restore without ``partial`` checks;
        the error names the unmatched paths of both sides."""
        return self._assert_values_matched(collect_names(self._root))

    def _assert_values_matched(self, live: LiveObjects) -> RestoreStatus:
        """assert_values_matched with the live objects as ``live`` has them."""
        checkpoint_paths, checkpoint_count = self._checkpoint_side(holding_values=True)
        object_paths = self._unmatched_objects(live, holding_values=True)
        unmatched = {"checkpoint objects holding tensors matched no object":
                     (checkpoint_paths, checkpoint_count),
                     "objects holding tensors have no value in the checkpoint":
                     (object_paths, len(object_paths))}
        parts = [_listed(what, paths, count) for what, (paths, count) in unmatched.items()
                 if count]
        if parts:
            raise RestoreMismatchError("; ".join(parts) + " (restore(..., partial=True) "
                                       "accepts this)", path=self.path)
        return self

    def expect_partial(self) -> RestoreStatus:
        """Declare a partial restore intended; nothing is reported either way."""
        return self

    def _fail_if(self, what: str, paths: list[str], count: int | None = None) -> None:
        if paths:
            raise RestoreMismatchError(_listed(what, paths, count), path=self.path)


# Unmatched checkpoint objects up to this many are shown sorted by path; a message shows
# at most _SHOWN paths, and beyond _SORTED_UP_TO each is cut to its last _SHOWN_PATH
# characters.
_SORTED_UP_TO = 1000
_SHOWN = 20
_SHOWN_PATH = 400


def _listed(what: str, paths: list[str], count: int | None = None) -> str:
    """'3 <what>: 'a', 'b', 'c'', the first 20 paths shown; ``count`` when ``paths``
    holds only the first ones."""
    total = len(paths) if count is None else count
    shown = ", ".join(repr(p) for p in paths[:_SHOWN])
    more = f" and {total - min(len(paths), _SHOWN)} more" if total > _SHOWN else ""
    return f"{total} {what}: {shown}{more}"


@dataclass
class _ByName:
    """A restore of a name-based checkpoint into objects, through a name map."""

    keys: set[str]
    restored: set[str] = field(default_factory=set)  # live keys that got values
    used: set[str] = field(default_factory=set)  # checkpoint keys that were used

    def unused(self) -> list[str]:
        return sorted(self.keys - self.used)


def restore(root: object, path: str | os.PathLike[str], *, start: str = "",
            partial: bool = False, cast: bool = False, name_map: NameMap | None = None,
            verify: bool = True, storage_options: StorageOptions | None = None
            ) -> RestoreStatus:
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
    saved it under that name). A checkpoint without object graph is restored
    by name: each live tensor's flat key, mapped through ``name_map`` (a
    dict or a function), names the checkpoint tensor to take.

    ``path`` may also name a TensorFlow checkpoint (its prefix, as
    ``tf.train.Checkpoint.save`` returns it); TensorFlow's object graph is
    matched like OCF's, its variables' ``VARIABLE_VALUE`` arriving as
    ``value`` (ocf.tensorflow.objects). TensorFlow is not needed.

    A URL (``s3://bucket/run/ckpt-3``) is read through fsspec, with
    ``storage_options`` (endpoint_url, key, secret, ...) given to it.

    Examples:
        >>> status = ocf.restore({"model": model, "optimizer": optimizer}, "training/ckpt-3")
        >>> ocf.restore(model, "ckpt.ocf", start="model")  # the subgraph under the edge "model"
    """
    return _restore(root, os.fspath(path), start, not partial, cast, name_map, verify,
                    storage_options)


def _restore(root: object, path: str, start: str, strict: bool, cast: bool,
             name_map: NameMap | None, verify: bool, storage_options: StorageOptions | None
             ) -> RestoreStatus:
    check_restorable(root)
    reader = open_source(path, verify=verify, storage_options=storage_options)
    try:
        graph = reader.object_graph
    except BaseException:
        reader.close()
        raise
    if graph is None or name_map is not None:
        # closes the reader, also on errors
        return _restore_by_name(root, reader, name_map, strict, cast)
    begin = graph.node_at([p for p in start.split("/") if p])
    if begin is None:
        reader.close()
        raise NotFoundError(f"the checkpoint has no object at {start!r}", path=path)
    reopen = functools.partial(open_source, path, verify=verify,
                               storage_options=storage_options)
    session = _Session(_Opener(reader, reopen), graph, _reachable(graph, begin), cast)
    status = RestoreStatus(root, path, session)
    if strict:
        session.judge = status.assert_values_matched
    session.match(begin, root)  # closes the reader, also on errors
    return status


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


def _restore_by_name(root: object, reader: Source, name_map: NameMap | None, strict: bool,
                     cast: bool) -> RestoreStatus:
    """Each live tensor takes the stored tensor its mapped key names; all are checked
    before the first is handed over."""
    try:
        live = collect_names(root)
        by_name = _ByName(set(reader.keys()))
        plan: list[tuple[Tracked, dict[str, str], dict[str, np.dtype[Any] | None]]] = []
        for node, obj in zip(live.nodes, live.objects):
            view = track(obj)
            expected = view.expected_tensors()
            keys, casts = {}, {}
            for attribute, key in node.attributes.items():
                stored = _mapped_name(name_map, key)
                if stored is not None and stored in reader:
                    keys[attribute] = stored
                    if attribute in expected:
                        casts[attribute] = fitted_dtype(reader.summary(stored),
                                                        expected[attribute], cast=cast,
                                                        key=stored, path=reader.path)
                    by_name.used.add(stored)
                    by_name.restored.add(key)
            if keys:
                plan.append((view, keys, casts))
        status = RestoreStatus(root, reader.path, None, by_name)
        if strict:
            _judge_by_name(status, live, name_map)
        ahead = ReadAhead(reader, [k for _, keys, _ in plan for k in keys.values()])
        for view, keys, casts in plan:
            values = {attribute: ahead.value(k) for attribute, k in keys.items()}
            view.restore_tensors(cast_values(values, casts))
    finally:
        reader.close()
    return status


# Where a restore by name that matched nothing sends the caller.
_FLAT_HINT = ("this checkpoint has no object graph (save_file or a Saver wrote it), so its "
              "tensors are matched by key: read it with load_file (or "
              "ocf.torch.load_model), or give name_map= to map keys")


def _judge_by_name(status: RestoreStatus, live: LiveObjects, name_map: NameMap | None
                   ) -> None:
    try:
        status._assert_values_matched(live)
    except RestoreMismatchError as exc:
        if name_map is not None or exc.path is None:
            raise
        raise RestoreMismatchError(f"{exc.detail}; {_FLAT_HINT}", path=exc.path) from None


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
