"""The state file of a checkpoint directory, ``checkpoint.json``, and finding the latest
checkpoint from it.

The file records which checkpoints a :class:`ocf.CheckpointManager` manages
(names relative to the directory, oldest first, with their timestamps) and
which is the latest. It is read as hostile input: at most 1 MiB, strict
JSON, every field type-checked, every name a plain file name inside the
directory. It is replaced whole and atomically (a temporary file, fsync,
rename, directory fsync; one PUT on an object store).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    OCFError,
    UnsupportedVersionError,
)
from ocf.format.storage.backend import backend_of
from ocf.format.storage.location import StorageOptions, join_path, locate, url_scheme
from ocf.interop.registry import latest_in
from ocf.objects.recovery import announce, is_committed, scan, usable_state_error

STATE_FILE_NAME = "checkpoint.json"
STATE_FORMAT = "ocf-checkpoint-state"
STATE_VERSION = 1
MAX_STATE_BYTES = 1 << 20

StrPath: TypeAlias = "str | os.PathLike[str]"
# What a checkpoint was saved with for a keep-best manager: metric name -> value.
Metrics: TypeAlias = "Mapping[str, float]"


# -- the state file -------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointState:
    """The content of ``checkpoint.json``: names relative to its directory."""

    latest: str
    names: tuple[str, ...]  # oldest first
    timestamps: tuple[float, ...]  # unix seconds, one per name
    last_preserved_timestamp: float
    # The metrics each checkpoint was saved with (keep-best managers), one per name,
    # None for a checkpoint saved without; empty when no checkpoint has any.
    metrics: tuple[Metrics | None, ...] = ()

    def to_json(self) -> bytes:
        document: dict[str, object] = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "latest": self.latest,
            "all": list(self.names),
            "timestamps": list(self.timestamps),
            "last_preserved_timestamp": self.last_preserved_timestamp,
        }
        if any(m is not None for m in self.metrics):
            document["metrics"] = [None if m is None else dict(m) for m in self.metrics]
        return (json.dumps(document, indent=1, allow_nan=False) + "\n").encode("utf-8")


def check_name(name: object, path: StrPath, what: str = "checkpoint name") -> str:
    """``name`` if it is a plain file name inside the directory, else InvalidError."""
    if not isinstance(name, str):
        raise InvalidError(f"{what} must be a string, got {type(name).__name__}", path=path)
    bad = (name in ("", ".", "..") or "\0" in name or "/" in name or "\\" in name
           or os.path.isabs(name) or (os.altsep is not None and os.altsep in name))
    if bad:
        raise InvalidError(f"{what} {name!r} is not a plain file name inside the directory",
                           path=path)
    return name


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("an object has a duplicate key")
    return result


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _decode(data: bytes, path: StrPath) -> object:
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicate_keys,
                          parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise MalformedError(f"state file is not valid UTF-8 JSON: {exc}", path=path) from None


def _number(value: object, what: str, path: StrPath) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidError(f"{what} must be a finite number, got {value!r:.40}", path=path)
    return float(value)


def _list(document: dict[str, object], key: str, path: StrPath) -> list[object]:
    value = document.get(key)
    if not isinstance(value, list):
        raise InvalidError(f"field {key!r} must be a list, got {type(value).__name__}",
                           path=path)
    return value


def _check_header(document: object, path: StrPath) -> dict[str, object]:
    if not isinstance(document, dict):
        raise InvalidError("state file must hold a JSON object", path=path)
    if document.get("format") != STATE_FORMAT:
        raise InvalidError(f"field 'format' must be {STATE_FORMAT!r}", path=path)
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidError("field 'version' must be an integer", path=path)
    if version != STATE_VERSION:
        raise UnsupportedVersionError(f"state file version {version}; this reader reads "
                                      f"version {STATE_VERSION}", path=path)
    return document


def parse_state(data: bytes, path: StrPath) -> CheckpointState:
    """Decode and check the bytes of a state file; OCFError naming ``path`` if bad."""
    document = _check_header(_decode(data, path), path)
    latest = check_name(document.get("latest"), path, "field 'latest'")
    names = tuple(check_name(n, path, "entry of 'all'") for n in _list(document, "all", path))
    if len(set(names)) != len(names):
        raise InvalidError("field 'all' names a checkpoint twice", path=path)
    timestamps = tuple(_number(t, "timestamp", path)
                       for t in _list(document, "timestamps", path))
    if len(timestamps) != len(names):
        raise InvalidError(f"{len(timestamps)} timestamps for {len(names)} checkpoints",
                           path=path)
    preserved = _number(document.get("last_preserved_timestamp"),
                        "field 'last_preserved_timestamp'", path)
    return CheckpointState(latest, names, timestamps, preserved,
                           _metrics(document, len(names), path))


def _metrics(document: dict[str, object], count: int, path: StrPath
             ) -> tuple[Metrics | None, ...]:
    """The optional field 'metrics': one object of finite numbers (or null) per name."""
    if "metrics" not in document:
        return ()
    entries = _list(document, "metrics", path)
    if len(entries) != count:
        raise InvalidError(f"{len(entries)} metrics entries for {count} checkpoints", path=path)
    return tuple(None if entry is None else check_metrics(entry, path) for entry in entries)


def check_metrics(value: object, path: StrPath) -> dict[str, float]:
    """``value`` as metrics: a mapping of string names to finite numbers, else INVALID."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidError(f"metrics must map names to numbers, got {value!r:.60}", path=path)
    return {name: _number(number, f"metric {name!r}", path) for name, number in value.items()}


def read_state(directory: StrPath, storage_options: StorageOptions | None = None
               ) -> CheckpointState | None:
    """The checked state file of ``directory``, or None if it has none."""
    path = locate(directory, storage_options) / STATE_FILE_NAME
    data = backend_of(path).read_small(path, MAX_STATE_BYTES)
    return None if data is None else parse_state(data, path)


def write_state(directory: StrPath, state: CheckpointState,
                storage_options: StorageOptions | None = None) -> None:
    """Replace the state file of ``directory`` atomically and durably."""
    target = locate(directory, storage_options) / STATE_FILE_NAME
    data = state.to_json()
    if len(data) > MAX_STATE_BYTES:  # never write what read_state would refuse
        raise LimitExceededError(f"state file would be {len(data)} bytes, above the limit of "
                                 f"{MAX_STATE_BYTES}; lower max_to_keep", path=target)
    backend_of(target).write_small(target, data)  # temporary file, fsync, rename; or a PUT


# -- finding the latest checkpoint ----------------------------------------------


def _newest_first(state: CheckpointState) -> Iterator[str]:
    yield state.latest
    yield from (name for name in reversed(state.names) if name != state.latest)


def first_intact(directory: str, state: CheckpointState,
                  storage_options: StorageOptions | None) -> str | None:
    for name in _newest_first(state):
        if is_committed(join_path(directory, name), storage_options):
            return name
    return None


def recovered_state(directory: str, checkpoint_name: str | None,
                    storage_options: StorageOptions | None, now: float
                    ) -> CheckpointState | None:
    """The state of ``directory``: its state file when it is usable and names a
    checkpoint that opens; else, with a :class:`~ocf.objects.recovery.RecoveryWarning`,
    one made from the committed checkpoints a scan finds (ocf.objects.recovery),
    named ``<checkpoint_name>-<number>`` (any name when None); None when there is
    neither. A state file of an unsupported version raises."""
    try:
        state = read_state(directory, storage_options)
    except OCFError as error:
        if not usable_state_error(error):
            raise
        return _scanned(directory, checkpoint_name, storage_options, now,
                        f"its state file is damaged and was not used ({error})")
    if state is None:  # quiet when nothing is found: a fresh directory
        return _scanned(directory, checkpoint_name, storage_options, now, None)
    if first_intact(directory, state, storage_options) is not None:
        return state
    return _scanned(directory, checkpoint_name, storage_options, now,
                    f"no checkpoint its state file ({STATE_FILE_NAME}) names opens") or state


def _scanned(directory: str, checkpoint_name: str | None,
             storage_options: StorageOptions | None, now: float, why: str | None
             ) -> CheckpointState | None:
    """The state a scan finds, announced with ``why`` the state file was not used
    (None: there is none, and finding nothing is not worth a warning)."""
    found = scan(directory, checkpoint_name, storage_options)
    if why is None:
        if found.newest is None:
            return None
        why = f"it has no state file ({STATE_FILE_NAME})"
    announce(directory, found, why)
    if found.newest is None:
        return None
    # Timestamps unknown: now, so the hours rule counts from the recovery.
    return CheckpointState(found.newest, found.names, (now,) * len(found.names), now - 1.0)


def latest_checkpoint(directory: StrPath, storage_options: StorageOptions | None = None
                      ) -> str | None:
    """The path of the newest committed checkpoint of ``directory``.

    The state file's ``latest`` if it opens, else the newest entry of its
    list that does. Without a usable state file (missing, damaged, or naming
    nothing that opens), the newest committed checkpoint found by scanning
    the directory for numbered checkpoints (``ckpt-7``, a file or a
    directory), announced by an ``ocf.objects.recovery.RecoveryWarning``;
    None when there is none. A state file of an unsupported version raises.
    ``directory`` may be a URL (``s3://bucket/run``), whose
    ``storage_options`` go to fsspec. A local directory without OCF's state
    file may hold another format's (TensorFlow's ``checkpoint``): the
    checkpoint it names is returned.

    Examples:
        >>> path = ocf.latest_checkpoint("training")  # "training/ckpt-7", or None
        >>> if path is not None:
        ...     ocf.Checkpoint(model=model).restore(path)
    """
    directory = os.fspath(directory)
    if url_scheme(directory) is None and not (Path(directory) / STATE_FILE_NAME).exists():
        foreign = latest_in(directory)
        if foreign is not None:
            return foreign
    state = recovered_state(directory, None, storage_options, time.time())
    name = None if state is None else first_intact(directory, state, storage_options)
    return None if name is None else join_path(directory, name)
