"""Restoring objects from a checkpoint without object graph, by tensor key.

Each live tensor's flat key, mapped through a name map (a dict or a
function), names the checkpoint tensor to take; every value is checked
against its object and read before the first is handed over, as a restore by
structure does (ocf.objects.restoring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ocf.format.source import AnySource
from ocf.objects.fitting import cast_values, fitted_dtype
from ocf.objects.read_ahead import ReadAhead
from ocf.objects.restore_status import ByName, RestoreMismatchError, RestoreStatus
from ocf.objects.saving import LiveObjects, collect_names
from ocf.objects.tracking import VALUE, Tracked, track

NameMap = Mapping[str, str] | Callable[[str], str]


def restore_by_name(root: object, reader: AnySource, name_map: NameMap | None, strict: bool,
                     cast: bool) -> RestoreStatus:
    """Each live tensor takes the stored tensor its mapped key names; all are checked
    before the first is handed over."""
    try:
        live = collect_names(root)
        by_name = ByName(set(reader.keys()))
        plan: list[tuple[Tracked, dict[str, str], dict[str, np.dtype[Any] | None]]] = []
        for node, obj in zip(live.nodes, live.objects):
            view = track(obj)
            expected = view.expected_tensors()
            keys, casts = {}, {}
            for attribute, key in node.attributes.items():
                stored = _stored_key(reader, name_map, key)
                if stored is not None:
                    keys[attribute] = stored
                    if attribute in expected:
                        casts[attribute] = fitted_dtype(reader.summary(stored),
                                                        expected[attribute], cast=cast,
                                                        key=stored, path=str(reader.path))
                    by_name.used.add(stored)
                    by_name.restored.add(key)
            if keys:
                plan.append((view, keys, casts))
        status = RestoreStatus(root, str(reader.path), None, by_name)
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
              "tensors are matched by key (a live object's path, or its dotted state_dict "
              "form): load a module's state_dict with ocf.torch.load_model(model, path), "
              "read the tensors with load_file, or give name_map= to map keys")


def _judge_by_name(status: RestoreStatus, live: LiveObjects, name_map: NameMap | None
                   ) -> None:
    try:
        status._assert_values_matched(live)
    except RestoreMismatchError as exc:
        if name_map is not None or exc.path is None:
            raise
        raise RestoreMismatchError(f"{exc.detail}; {_FLAT_HINT}", path=exc.path) from None


def _stored_key(reader: AnySource, name_map: NameMap | None, key: str) -> str | None:
    """The checkpoint key holding the value of the live ``key``, None if none does:
    the mapped key; without a map, the key itself, else its dotted ``state_dict``
    form (a PyTorch state dict saved flat: ``fc1/weight/.value`` is ``fc1.weight``)."""
    if name_map is None:
        if key in reader:
            return key
        dotted = key.removesuffix(f"/.{VALUE}").replace("/", ".")
        return dotted if dotted in reader else None
    stored = name_map.get(key, key) if isinstance(name_map, Mapping) else name_map(key)
    return stored if stored in reader else None
