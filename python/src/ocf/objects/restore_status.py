"""What a restore matched: :class:`RestoreStatus`, and the error its assertions raise.

The status judges the live side by the names of its tensors
(:func:`ocf.objects.saving.collect_names`), never asking an object for its
values, and the checkpoint side by the graph matching of ocf.objects.restoring
(or, for a checkpoint without graph, the keys ocf.objects.restore_by_name
used). Its listings and messages cost memory linear in the file, however deep
the graph (ocf.objects.path_listing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ocf.format.errors import InvalidError
from ocf.objects.renames import suggested
from ocf.objects.saving import LiveObjects, collect_names
from ocf.objects.tracking import track

if TYPE_CHECKING:
    from ocf.objects.restoring import _Session


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


class RestoreStatus:
    """What a restore matched; assertions raise RestoreMismatchError naming paths.

    Examples:
        >>> status = ocf.Checkpoint(model=model).restore(path, partial=True)
        >>> model(first_batch)  # layers built now take their values
        >>> status.assert_consumed()
    """

    def __init__(self, root: object, path: str, session: _Session | None,
                 by_name: ByName | None = None) -> None:
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

    def unmatched_checkpoint_paths(self, *, holding_values: bool = False) -> Sequence[str]:
        """Checkpoint objects (or, by name, tensor keys) that found no live object;
        with ``holding_values``, only those holding tensors.

        By structure, a :class:`~ocf.objects.path_listing.CheckpointPaths`: a sequence
        of canonical paths, sorted, that compares equal to a list of them; for a
        hostile graph whose paths would hold more than 16 Mi characters in all (a
        chain of thousands of objects), in the checkpoint's order and built one at a
        time as they are accessed, so that the call costs memory linear in the file.
        By name, a sorted list of tensor keys."""
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
        checkpoint_side = {"checkpoint objects holding tensors matched no object":
                           (checkpoint_paths, checkpoint_count)}
        object_side = {"objects holding tensors have no value in the checkpoint":
                       (object_paths, len(object_paths))}
        if self._session is not None:  # by structure: training state without tensors too
            state_paths = self._session.unmatched_state_paths()
            checkpoint_side[STATE_IN_CHECKPOINT] = (state_paths, len(state_paths))
            live_state = self._unmatched_state_objects(live)
            object_side[STATE_IN_OBJECTS] = (live_state, len(live_state))
        parts = [listed(what, paths, count)
                 for what, (paths, count) in (checkpoint_side | object_side).items() if count]
        if parts:
            raise RestoreMismatchError("; ".join(parts) + self._remedy(
                checkpoint_side, object_side), path=self.path)
        return self

    def _remedy(self, checkpoint_side: Mapping[str, tuple[list[str], int]],
                object_side: Mapping[str, tuple[list[str], int]]) -> str:
        """The way out of a failed strict restore that keeps every value it can.

        Unmatched objects on both sides look renamed: partial=True would leave the
        renamed ones as they are, so the message suggests a rename map, the one that
        matches the paths shown when they differ in one name. By name, what the flat
        file's keys need (restore_by_name adds it)."""
        ours = sum(count for _, count in object_side.values())
        theirs = sum(count for _, count in checkpoint_side.values())
        if self._by_name is not None:
            return ""
        if ours and theirs:
            shown = [path for paths, _ in checkpoint_side.values() for path in paths]
            guess = suggested(shown, [p for paths, _ in object_side.values() for p in paths])
            example = guess or {"old/path": "new/path"}
            return (f" (if objects were renamed, restore(..., rename={example!r}) maps the "
                    "checkpoint's paths to the objects'; partial=True would leave these "
                    "objects as they are)")
        if ours:
            return (" (restore(..., partial=True) accepts this and leaves these objects as "
                    "they are)")
        return " (restore(..., partial=True) accepts this and ignores these values)"

    def _unmatched_state_objects(self, live: LiveObjects) -> list[str]:
        """Live objects holding no tensors but training state (a scheduler's or a
        gradient scaler's metadata) that the restore did not reach."""
        assert self._session is not None
        matched = {id(o) for o in self._session.matched.values()}
        return sorted(path or "(root)"
                      for path, obj, node in zip(live.paths, live.objects, live.nodes)
                      if not node.attributes and id(obj) not in matched
                      and track(obj).holds_state())

    def expect_partial(self) -> RestoreStatus:
        """Declare a partial restore intended; nothing is reported either way."""
        return self

    def _fail_if(self, what: str, paths: list[str], count: int | None = None) -> None:
        if paths:
            raise RestoreMismatchError(listed(what, paths, count), path=self.path)


# How a strict restore lists objects whose only values are metadata: an LR scheduler,
# a gradient scaler, a dict of counters (spec/objects.md, "Type names and metadata").
STATE_IN_CHECKPOINT = "checkpoint objects holding training state (metadata) matched no object"
STATE_IN_OBJECTS = "objects holding training state (metadata) have no value in the checkpoint"

# Unmatched checkpoint objects up to this many are shown sorted by path; a message shows
# at most SHOWN paths, and beyond SORTED_UP_TO each is cut to its last SHOWN_PATH
# characters.
SORTED_UP_TO = 1000
SHOWN = 20
SHOWN_PATH = 400


def listed(what: str, paths: list[str], count: int | None = None) -> str:
    """'3 <what>: 'a', 'b', 'c'', the first 20 paths shown; ``count`` when ``paths``
    holds only the first ones."""
    total = len(paths) if count is None else count
    shown = ", ".join(repr(p) for p in paths[:SHOWN])
    more = f" and {total - min(len(paths), SHOWN)} more" if total > SHOWN else ""
    return f"{total} {what}: {shown}{more}"


@dataclass
class ByName:
    """A restore of a name-based checkpoint into objects, through a name map."""

    keys: set[str]
    restored: set[str] = field(default_factory=set)  # live keys that got values
    used: set[str] = field(default_factory=set)  # checkpoint keys that were used

    def unused(self) -> list[str]:
        return sorted(self.keys - self.used)


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
