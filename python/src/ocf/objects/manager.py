"""Checkpoint management: numbered checkpoints in one directory, like
tf.train.CheckpointManager (the state file it keeps, and
:func:`~ocf.objects.state_file.latest_checkpoint` to find the newest, are in
:mod:`ocf.objects.state_file`).

A manager saves ``<directory>/<checkpoint_name>-<number>`` through the
object it manages (any :class:`Saveable`), records them in the state file
``<directory>/checkpoint.json``, keeps the newest ``max_to_keep`` and
deletes older ones unless ``keep_checkpoint_every_n_hours`` preserves them.

Crash-safety contract. :meth:`CheckpointManager.save` runs these steps in
this order, and a process killed at any instant (SIGKILL, preemption)
leaves :func:`latest_checkpoint` naming a complete checkpoint that
restores, or None if no save ever finished:

1. The new checkpoint is written completely; the write is atomic by itself
   (temporary name, fsync, rename, fsync of the directory).
2. The state file is replaced atomically the same way, naming the new
   checkpoint as latest and still listing the ones about to be deleted.
3. Only then are the checkpoints beyond ``max_to_keep`` deleted (never the
   newest, never one kept by the hours rule; files already gone are
   ignored), and the state file is replaced again without them.

So the state file is always whole, and it never names a checkpoint that was
not complete when it was written. A kill between steps 1 and 2 leaves the
new checkpoint on disk unnamed (the next save of the same number replaces
it); a kill during step 3 leaves entries whose files are gone, which
readers skip and the next manager drops. :func:`latest_checkpoint` also
skips entries that do not open (deleted or damaged by hand) and falls back
to the newest that does. Unknown files in the directory are never deleted;
leftover temporary files of this manager's own names (a killed write's) are
removed after the next successful save.

The state file is read as hostile input: at most 1 MiB, strict JSON, every
field type-checked, and every name a plain file name inside the directory.
A directory whose state file is missing or damaged is recovered by scanning
for committed checkpoints (:mod:`ocf.objects.recovery`, [R-COMMIT-010]), and
a save numbered by the checkpoint's counter at or below the newest of them
is refused: a run restarted without restoring would overwrite its own.

One manager at a time saves into a local directory: the first save takes
the directory's writer lock (:mod:`ocf.format.storage.directory_lock`), held
until :meth:`CheckpointManager.close` or the end of the process (SIGKILL
included), and a second manager's save is refused with an error naming the
holder. Any number may read the directory (constructing a manager writes
nothing and takes no lock). On an object store there is no such lock: one
writer per prefix is the caller's duty.

On an object store (``directory`` an ``s3://`` URL, with ``storage_options``
for fsspec) the same three steps run with uploads for renames
(spec/commit.md, "Object stores"): step 1 ends when the checkpoint's index
object is acknowledged (its commit point, R-COMMIT-005); step 2 uploads
``checkpoint.json`` as one object in one PUT, atomic by itself, so a reader
sees the previous state or the new one, whole; step 3 deletes each old
checkpoint's objects, its ``index.ocf`` first. The contract above holds
there as stated, on a store with the guarantees of R-COMMIT-005. What a
killed directory-form upload leaves (shards without an index) is removed
by the next write at the same name.

``save(blocking=False)`` (with an :class:`ocf.Checkpoint`) returns once the
tensors are copied (ocf.format.async_save); the checkpoint is written in the
background and steps 2 and 3 run there after its commit, so the state never
names a checkpoint before it exists. Its :class:`ocf.SaveHandle` waits for
all three steps; the next save waits for them too.
"""

from __future__ import annotations

import math
import operator
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Literal, Protocol, SupportsIndex, TypeAlias, overload, runtime_checkable

from ocf.format.async_save import SaveHandle, then, wait_for_pending
from ocf.format.commit import temp_names_of
from ocf.format.errors import (
    InvalidError,
)
from ocf.format.storage.backend import WriterLock, backend_of
from ocf.format.storage.location import StorageOptions, join_path, locate
from ocf.objects.incremental import IncrementalSaves
from ocf.objects.pool_root import local_pool_root
from ocf.objects.recovery import refuse_number_below
from ocf.objects.state_file import (
    STATE_FILE_NAME,
    CheckpointState,
    Metrics,
    StrPath,
    check_metrics,
    check_name,
    first_intact,
    recovered_state,
    write_state,
)

# Something whose value is the current training step: a callable returning it, or
# an object with __index__ whose value changes (e.g. a 0-d integer NumPy array).
StepCounter: TypeAlias = "Callable[[], SupportsIndex] | SupportsIndex"


@runtime_checkable
class Saveable(Protocol):
    """What a :class:`CheckpointManager` calls on the object it manages.

    A manager given ``storage_options`` also passes them as a keyword to
    ``save``, ``write`` and ``restore``, and ``save(blocking=False)`` passes
    ``blocking=False`` to ``save`` or ``write``, which then return an
    :class:`ocf.SaveHandle`; :class:`ocf.Checkpoint` takes both.
    """

    @property
    def save_counter(self) -> int:
        """How many times :meth:`save` numbered a checkpoint so far."""
        ...

    def write(self, path: str) -> str:
        """Write one complete checkpoint atomically at ``path``; return ``path``."""
        ...

    def save(self, prefix: str) -> str:
        """Increment save_counter, write ``f"{prefix}-{save_counter}"``, return that path."""
        ...

    def restore(self, path: str) -> object:
        """Restore from the checkpoint at ``path``; return a status object."""
        ...


# -- the manager ----------------------------------------------------------------


def _check_options(max_to_keep: int | None, keep_hours: float | None,
                   step_counter: StepCounter | None, interval: int | None) -> None:
    if max_to_keep is not None and (isinstance(max_to_keep, bool)
                                    or not isinstance(max_to_keep, int) or max_to_keep < 1):
        raise InvalidError(f"max_to_keep must be a positive integer or None, not {max_to_keep!r}")
    if keep_hours is not None and (isinstance(keep_hours, bool) or not (
            isinstance(keep_hours, (int, float))
            and math.isfinite(keep_hours) and keep_hours > 0)):
        raise InvalidError("keep_checkpoint_every_n_hours must be a positive number or None, "
                           f"not {keep_hours!r}")
    if interval is not None:
        if step_counter is None:
            raise InvalidError("step_counter must be given with checkpoint_interval")
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise InvalidError(f"checkpoint_interval must be a positive integer, not {interval!r}")


class CheckpointManager:
    """Saves numbered checkpoints in ``directory``, keeping the newest ``max_to_keep``.

    Semantics of tf.train.CheckpointManager: checkpoints are numbered by
    ``checkpoint.save_counter`` (through ``checkpoint.save``) unless
    ``save`` is given ``checkpoint_number``; once more than ``max_to_keep``
    are managed the oldest leave the managed set, and are deleted unless
    ``keep_checkpoint_every_n_hours`` have passed since the last one
    preserved, in which case they stay on disk for good, unlisted.
    ``max_to_keep=None`` keeps and lists everything. With
    ``checkpoint_interval``, ``save`` does nothing until ``step_counter``
    advanced that many steps since the last save. With ``best_fn`` (a function
    of a checkpoint's metrics, as Orbax's), the checkpoints that fall out are
    the worst-ranked instead of the oldest (see :meth:`save`). With
    ``incremental=True`` (a local directory, a managed object that takes
    ocf.Writer's options, as :class:`ocf.Checkpoint`), each save writes only the
    blocks whose bytes changed since the latest checkpoint and references the
    others in the directory's pool (:mod:`ocf.objects.incremental`).

    A manager reopened on the same directory continues from its state file,
    dropping entries whose files are gone. ``clock`` gives the timestamps
    (unix seconds) the hours rule works on. ``directory`` may be a URL
    (``s3://bucket/run``) whose ``storage_options`` go to fsspec, and to the
    managed object's save, write and restore (see the module docstring).

    Examples:
        >>> checkpoint = ocf.Checkpoint(model=model, optimizer=optimizer)
        >>> manager = ocf.CheckpointManager(checkpoint, "training", max_to_keep=3)
        >>> manager.restore_or_initialize()  # resumes from the latest, if any
        >>> for step in range(1000):
        ...     train_step()
        ...     manager.save(checkpoint_number=step)
    """

    def __init__(
        self,
        checkpoint: Saveable,
        directory: StrPath,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float | None = None,
        checkpoint_name: str = "ckpt",
        step_counter: StepCounter | None = None,
        checkpoint_interval: int | None = None,
        init_fn: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.time,
        storage_options: StorageOptions | None = None,
        best_fn: Callable[[Metrics], float] | None = None,
        best_mode: Literal["max", "min"] = "max",
        incremental: bool = False,
    ) -> None:
        _check_options(max_to_keep, keep_checkpoint_every_n_hours, step_counter,
                       checkpoint_interval)
        if best_mode not in ("max", "min"):
            raise InvalidError(f"best_mode must be 'max' or 'min', not {best_mode!r}")
        self._best_fn = best_fn
        self._best_sign = 1.0 if best_mode == "max" else -1.0
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._storage_options = storage_options
        self._where = locate(self._directory, storage_options)
        self._storage = backend_of(self._where)
        self._directory = self._directory.rstrip("/") or self._directory
        self._name = check_name(checkpoint_name, self._directory, "checkpoint_name")
        self._max_to_keep = max_to_keep
        self._keep_seconds = (None if keep_checkpoint_every_n_hours is None
                              else keep_checkpoint_every_n_hours * 3600.0)
        self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        self._last_checkpoint_step: int | None = None
        self._init_fn = init_fn
        self._clock = clock
        self._leftover = temp_names_of(
            rf"{re.escape(self._name)}-\d+|{re.escape(STATE_FILE_NAME)}")
        self._entries: dict[str, float] = {}  # name -> timestamp, oldest first
        self._metrics: dict[str, Metrics] = {}  # name -> what it was saved with
        self._latest: str | None = None
        # Held while the entries change: an asynchronous save changes them in the
        # background while the training thread may read the properties.
        self._lock = threading.Lock()
        self._writer_lock: WriterLock | None = None  # taken by the first save
        self._pool = IncrementalSaves(local_pool_root(self._where)) if incremental else None
        now = clock()
        self._recover(recovered_state(self._directory, self._name, storage_options, now), now)

    def _recover(self, state: CheckpointState | None, now: float) -> None:
        """Take over a previous manager's state, dropping entries whose files are gone."""
        if state is None:
            # A second back, so a manager recreated at once still preserves by the hour rule.
            self._last_preserved = now - 1.0
            return
        self._last_preserved = min(state.last_preserved_timestamp, now)  # clock went back?
        metrics = state.metrics or (None,) * len(state.names)
        for name, timestamp, saved_with in zip(state.names, state.timestamps, metrics):
            timestamp = min(timestamp, now)
            if timestamp > self._last_preserved and self._exists(name):
                self._entries[name] = timestamp
                if saved_with is not None:
                    self._metrics[name] = saved_with
        self._latest = first_intact(self._directory, state, self._storage_options)

    def _exists(self, name: str) -> bool:
        return self._storage.exists(self._where / name)

    # -- properties -------------------------------------------------------------

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Saveable:
        return self._checkpoint

    @property
    def checkpoint_interval(self) -> int | None:
        return self._checkpoint_interval

    @property
    def checkpoints(self) -> list[str]:
        """Paths of the managed checkpoints, oldest first (not those kept by the hours)."""
        with self._lock:
            return [self._path(name) for name in self._entries]

    @property
    def latest_checkpoint(self) -> str | None:
        """Path of the newest checkpoint, or None; what ``ocf.latest_checkpoint`` finds.

        After ``save(blocking=False)``, the previous one until the new one committed.
        """
        latest = self._latest
        return None if latest is None else self._path(latest)

    def _path(self, name: str) -> str:
        return join_path(self._directory, name)

    # -- saving -----------------------------------------------------------------

    @overload
    def save(self, checkpoint_number: SupportsIndex | None = None,
             check_interval: bool = True, *, blocking: Literal[True] = True,
             metrics: Metrics | None = None) -> str | None: ...

    @overload
    def save(self, checkpoint_number: SupportsIndex | None = None,
             check_interval: bool = True, *, blocking: Literal[False],
             metrics: Metrics | None = None) -> SaveHandle | None: ...

    def save(self, checkpoint_number: SupportsIndex | None = None,
             check_interval: bool = True, *, blocking: bool = True,
             metrics: Metrics | None = None) -> str | SaveHandle | None:
        """Write a new checkpoint, record it as latest, then delete what falls out.

        Returns its path, or None when ``checkpoint_interval`` says it is too
        early (``check_interval=False`` saves anyway, unless this step was
        saved already). With ``blocking=False``, returns an
        :class:`ocf.SaveHandle` once the tensors are copied; the write, the
        state update and the deletions run in the background, in that order,
        and ``wait()`` returns the path once all are done.

        ``metrics`` (name -> number, such as ``{"loss": 0.31}``) are recorded
        with the checkpoint; a manager with ``best_fn`` needs them. It keeps
        ``max_to_keep`` checkpoints: the latest (to resume from) and those
        ``best_fn(metrics)`` ranks best among the others (the highest score,
        or the lowest with ``best_mode="min"``).
        """
        saved_with = self._checked_metrics(metrics)
        step = None if self._checkpoint_interval is None else self._current_step()
        if step is not None and not self._due(step, check_interval):
            return None
        self._make_directory()
        self._take_writer_lock()
        result = self._write(checkpoint_number, blocking)  # step 1 (atomic by itself)
        timestamp = self._clock()
        if isinstance(result, str):
            self._commit(result, timestamp, saved_with)
            if step is not None:
                self._last_checkpoint_step = step
            return self._path(result)
        name, handle = result
        if step is not None:  # the interval counts from the call, as the values do
            self._last_checkpoint_step = step

        def record(path: str) -> str:
            self._commit(name, timestamp, saved_with)
            return path

        return then(handle, record)

    def _checked_metrics(self, metrics: Metrics | None) -> Metrics | None:
        if metrics is None:
            if self._best_fn is not None:
                raise InvalidError("this manager keeps the best checkpoints by best_fn: "
                                   "save(metrics={...}) must say how good each one is",
                                   path=self._directory)
            return None
        checked = check_metrics(metrics, self._directory)
        if self._best_fn is not None:
            self._score(checked)  # a best_fn that fails on them fails now, before the save
        return checked

    def _score(self, metrics: Metrics) -> float:
        assert self._best_fn is not None
        score = self._best_fn(metrics)
        if isinstance(score, bool) or not isinstance(score, int | float) or \
                not math.isfinite(score):
            raise InvalidError(f"best_fn returned {score!r}, not a finite number",
                               path=self._directory)
        return self._best_sign * float(score)

    def _commit(self, name: str, timestamp: float, metrics: Metrics | None) -> None:
        """Steps 2 and 3, once checkpoint ``name`` has committed."""
        with self._lock:
            self._entries.pop(name, None)  # saved again: it moves to the end
            self._entries[name] = timestamp
            self._metrics.pop(name, None)
            if metrics is not None:
                self._metrics[name] = metrics
            self._latest = name
            self._record()  # step 2: the state names the new checkpoint
            if self._sweep():  # step 3: deletions, then the state without them
                self._record()
            self._remove_leftovers()
            if self._pool is not None:  # what no retained checkpoint references any more
                self._pool.collect()

    def _current_step(self) -> int:
        counter = self._step_counter
        assert counter is not None  # checked with checkpoint_interval
        return operator.index(counter() if callable(counter) else counter)

    def _due(self, step: int, check_interval: bool) -> bool:
        """Whether checkpoint_interval allows a save at ``step``."""
        last, interval = self._last_checkpoint_step, self._checkpoint_interval
        assert interval is not None
        return last is None or (step != last and (not check_interval or step >= last + interval))

    def _make_directory(self) -> None:
        self._storage.make_directory(self._where)

    def _take_writer_lock(self) -> None:
        if self._writer_lock is None:
            self._writer_lock = self._storage.lock_writer(self._where)

    def collect_garbage(self) -> list[str]:
        """Delete the pool objects (``incremental=True``) that no checkpoint of the
        directory references, as each save does after its deletions; their names."""
        if self._pool is None:
            return []
        wait_for_pending()
        self._take_writer_lock()
        return self._pool.collect()

    def close(self) -> None:
        """Wait for a background save, then give up the directory's writer lock."""
        wait_for_pending()
        lock, self._writer_lock = self._writer_lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, checkpoint_number: SupportsIndex | None, blocking: bool
               ) -> str | tuple[str, SaveHandle]:
        """Write the checkpoint through the managed object: its name in the directory,
        with the handle of the background write when not ``blocking``."""
        prefix = self._path(self._name)
        if checkpoint_number is None:
            with self._lock:  # never at or below a checkpoint the directory holds
                refuse_number_below(self._entries, self._name,
                                    self._checkpoint.save_counter + 1, self._directory)
            result = self._call(self._checkpoint.save, prefix, blocking)
        else:
            if isinstance(checkpoint_number, bool) or operator.index(checkpoint_number) < 0:
                raise InvalidError("checkpoint_number must be a non-negative integer, not "
                                   f"{checkpoint_number!r}")
            path = f"{prefix}-{operator.index(checkpoint_number)}"
            result = self._call(self._checkpoint.write, path, blocking)
        if blocking:
            return self._name_of(result)
        if not isinstance(result, SaveHandle):
            raise InvalidError(f"save(blocking=False) of the managed {type(self._checkpoint)}"
                               f" returned a {type(result).__name__}, not an ocf.SaveHandle",
                               path=self._directory)
        return self._name_of(result.path), result

    def _call(self, method: Callable[..., object], path: str, blocking: bool) -> object:
        """``method(path)``, with the keywords a Saveable needs to take only when they
        differ from the defaults (storage_options, blocking=False)."""
        options: dict[str, object] = {}
        if self._storage_options is not None:
            options["storage_options"] = self._storage_options
        if not blocking:
            options["blocking"] = False
        if self._pool is not None:
            # The previous save, its deletions and its collection are over: its
            # checkpoint is the latest, and nothing removes what the new one reuses.
            wait_for_pending()
            options.update(self._pool.writer_options(self.latest_checkpoint))
        return method(path, **options)

    def _name_of(self, path: object) -> str:
        """The name in the directory of the checkpoint the managed object wrote at ``path``."""
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidError(f"the managed object returned a {type(path).__name__}, not the "
                               "path of the checkpoint", path=self._directory)
        text = os.fspath(path)
        name = self._storage.entry_name(self._directory, text)
        if name is None:
            raise InvalidError(f"the checkpoint was written at {text!r}, outside the "
                               "manager's directory", path=self._directory)
        return check_name(name, self._directory)

    def _record(self) -> None:
        assert self._latest is not None
        metrics = tuple(self._metrics.get(name) for name in self._entries) \
            if self._metrics else ()
        write_state(self._directory, CheckpointState(
            self._latest, tuple(self._entries), tuple(self._entries.values()),
            self._last_preserved, metrics), self._storage_options)

    def _sweep(self) -> bool:
        """Drop the entries beyond max_to_keep (the oldest, or with best_fn the worst,
        never the latest); True if any was dropped."""
        if self._max_to_keep is None or len(self._entries) <= self._max_to_keep:
            return False
        while len(self._entries) > self._max_to_keep:
            name = self._next_to_drop()
            timestamp = self._entries.pop(name)
            self._metrics.pop(name, None)
            if (self._keep_seconds is not None
                    and timestamp - self._keep_seconds >= self._last_preserved):
                self._last_preserved = timestamp  # kept on disk for good, no longer listed
                continue
            # The index goes first, so that what remains of a cut deletion never opens.
            self._storage.remove_checkpoint(self._where / name)
        return True

    def _next_to_drop(self) -> str:
        if self._best_fn is None:
            return next(iter(self._entries))
        # The worst-ranked first; a checkpoint without metrics (saved before best_fn was
        # given) ranks below every scored one; the latest stays, to resume from.
        candidates = [name for name in self._entries if name != self._latest]
        return min(candidates, key=lambda name: (name in self._metrics,
                                                 self._score(self._metrics[name])
                                                 if name in self._metrics else 0.0))

    def _remove_leftovers(self) -> None:
        """Remove temporary files of this manager's names left by a killed save."""
        if not self._storage.temporary_names:
            return  # uploads use no temporary names (spec/commit.md, "Object stores")
        for name in self._storage.list_names(self._where):
            if self._leftover.fullmatch(name):
                self._storage.remove(self._where / name)

    # -- restoring --------------------------------------------------------------

    def restore_or_initialize(self, *, partial: bool = False) -> str | None:
        """Restore the latest checkpoint and return its path; else call init_fn, return None.

        Strict unless ``partial``, as :func:`ocf.restore` is; ``partial`` is for
        objects that build lazily and take their values when they do.
        """
        path = self.latest_checkpoint
        if path is not None:
            restore: Callable[..., object] = self._checkpoint.restore
            # Only the options asked for: a checkpoint-like object may not take them.
            options: dict[str, object] = {"partial": True} if partial else {}
            if self._storage_options is not None:
                options["storage_options"] = self._storage_options
            restore(path, **options)
            if self._checkpoint_interval is not None:
                self._last_checkpoint_step = self._current_step()
            return path
        if self._init_fn is not None:
            self._init_fn()
        return None
