"""Numbered checkpoints of a pytree without a holder to keep in sync: :class:`TreeManager`.

JAX training replaces its state at every step, so a manager that saves an
object it was given once (:class:`ocf.CheckpointManager` over an
``ocf.Checkpoint(state=TreeState(tree))``) needs that holder reassigned after
every step. :class:`TreeManager` is the functional form, as Orbax's
``CheckpointManager.save(step, args=...)`` is: each save takes the tree,
each restore returns a new one. Underneath it is an
:class:`ocf.CheckpointManager` writing ``<directory>/ckpt-<step>`` as
``ocf.Checkpoint(state=TreeState(tree))`` would, with the same state file,
retention, crash safety and recovery, so the files are interchangeable with
the holder form's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

from ocf.format.async_save import SaveHandle
from ocf.format.errors import NotFoundError
from ocf.format.storage.location import StorageOptions, join_path
from ocf.jax.trees import TreeState, restore
from ocf.objects.checkpoint import Checkpoint
from ocf.objects.manager import CheckpointManager
from ocf.objects.recovery import number_of
from ocf.objects.state_file import Metrics

# The edge the tree is saved under, as ocf.Checkpoint(state=TreeState(tree)) saves it.
EDGE = "state"


class TreeManager:
    """Saves a pytree as numbered checkpoints ``<directory>/ckpt-<step>``; restores new trees.

    The options are those of :class:`ocf.CheckpointManager` (``max_to_keep``,
    ``keep_checkpoint_every_n_hours``, ``best_fn`` and ``best_mode``,
    ``storage_options`` for an ``s3://`` directory, ``incremental=True`` for
    saves that write only the arrays' blocks whose bytes changed into the
    directory's pool, on a local directory). A directory whose state file
    was lost is recovered as that manager recovers it.

    Examples:
        >>> manager = ocf.jax.TreeManager("run", max_to_keep=3)
        >>> state = init()
        >>> if manager.latest_step() is not None:
        ...     state = manager.restore(manager.latest_step(), jax.eval_shape(init))
        >>> for step in range(manager.latest_step() or 0, 1000):
        ...     state = train_step(state)
        ...     manager.save(step + 1, state)  # the tree itself: nothing to keep in sync
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_to_keep: int | None = 5,
                 keep_checkpoint_every_n_hours: float | None = None,
                 checkpoint_name: str = "ckpt",
                 storage_options: StorageOptions | None = None,
                 best_fn: Callable[[Metrics], float] | None = None,
                 best_mode: Literal["max", "min"] = "max",
                 incremental: bool = False) -> None:
        self._checkpoint = Checkpoint(**{EDGE: TreeState(None)})
        self._name = checkpoint_name
        self._storage_options = storage_options
        self._manager = CheckpointManager(
            self._checkpoint, directory, max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            checkpoint_name=checkpoint_name, storage_options=storage_options,
            best_fn=best_fn, best_mode=best_mode, incremental=incremental)

    @property
    def directory(self) -> str:
        return self._manager.directory

    def save(self, step: int, tree: Any, *, metrics: Metrics | None = None,
             blocking: bool = True) -> str | SaveHandle:
        """Write ``tree`` as checkpoint ``step``; its path, or with ``blocking=False``
        an :class:`ocf.SaveHandle` once the arrays are copied."""
        setattr(self._checkpoint, EDGE, TreeState(tree))  # a fresh holder: no stale state
        if blocking:
            path = self._manager.save(checkpoint_number=step, metrics=metrics)
            assert path is not None  # no checkpoint_interval: every save writes
            return path
        handle = self._manager.save(checkpoint_number=step, metrics=metrics, blocking=False)
        assert handle is not None
        return handle

    def restore(self, step: int | None, target: Any, *, partial: bool = False,
                cast: bool = False) -> Any:
        """A new tree shaped like ``target`` (arrays or ``jax.ShapeDtypeStruct``) with
        the values of checkpoint ``step`` (None: the latest); strict unless
        ``partial``, as :func:`ocf.jax.restore` is. NOT_FOUND when there is none."""
        if step is None:
            path = self._manager.latest_checkpoint
            if path is None:
                raise NotFoundError("no committed checkpoint to restore",
                                    path=self.directory)
        else:
            path = join_path(self.directory, f"{self._name}-{int(step)}")
        return restore(target, path, start=EDGE, partial=partial, cast=cast,
                       storage_options=self._storage_options)

    def latest_step(self) -> int | None:
        """The step of the newest committed checkpoint, or None."""
        path = self._manager.latest_checkpoint
        return None if path is None else number_of(os.path.basename(path), self._name)

    def all_steps(self) -> list[int]:
        """The steps of the managed checkpoints, oldest first."""
        return [n for path in self._manager.checkpoints
                if (n := number_of(os.path.basename(path), self._name)) is not None]

    def close(self) -> None:
        """Wait for a background save and give up the directory's writer lock."""
        self._manager.close()

    def __enter__(self) -> TreeManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
