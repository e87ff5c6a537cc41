"""A Keras callback that saves OCF checkpoints while ``model.fit`` trains, and the
function that resumes from them.

:class:`ModelCheckpoint` plays the part of ``keras.callbacks.ModelCheckpoint``
(and of ``BackupAndRestore``): after every epoch, or every ``save_freq``
batches, it saves the model, its optimizer (slots included) and the number
of epochs done as one object-based checkpoint, through an
:class:`ocf.CheckpointManager` that keeps the newest ``max_to_keep`` (or,
with ``monitor``, the latest and the best by that metric). Every save is
atomic: a run killed at any moment leaves the previous checkpoint whole.
:func:`restore_latest` puts the newest checkpoint back into a model and
returns the epochs it had done, for ``fit(initial_epoch=...)``.

Examples:
    >>> from ocf.keras.callbacks import ModelCheckpoint, restore_latest
    >>> done = restore_latest("run", model)                 # 0 on a fresh start
    >>> model.fit(x, y, epochs=10, initial_epoch=done,
    ...           callbacks=[ModelCheckpoint("run", max_to_keep=3)])
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.storage.location import StorageOptions
from ocf.keras._framework import keras
from ocf.objects.checkpoint import Checkpoint
from ocf.objects.manager import CheckpointManager
from ocf.objects.state_file import latest_checkpoint
from ocf.objects.tracking import Variable

__all__ = ["ModelCheckpoint", "restore_latest"]

EPOCHS = "epochs_done"


def _checkpoint_of(model: Any, epochs: Variable, include_optimizer: bool) -> Checkpoint:
    parts: dict[str, object] = {"model": model, EPOCHS: epochs}
    if include_optimizer and getattr(model, "optimizer", None) is not None:
        parts["optimizer"] = model.optimizer
    return Checkpoint(**parts)


class ModelCheckpoint(keras.callbacks.Callback):  # type: ignore[misc]
    """Save the model being trained (and its optimizer) as OCF checkpoints in ``directory``.

    ``save_freq`` is ``"epoch"`` or a number of batches. With ``monitor``
    (a metric of the logs, such as ``"val_loss"``) the manager keeps the
    latest checkpoint and the best ones by it (``mode`` ``"min"`` or
    ``"max"``). ``blocking=False`` writes in the background while training
    goes on; the last write is waited for when training ends.
    ``incremental=True`` (a local directory) writes only the blocks whose
    bytes changed since the previous checkpoint into the directory's pool and
    references the others, as :class:`ocf.CheckpointManager` does with it.

    Examples:
        >>> from ocf.keras.callbacks import ModelCheckpoint
        >>> model.fit(x, y, epochs=10, validation_split=0.2,
        ...           callbacks=[ModelCheckpoint("run", monitor="val_loss", max_to_keep=2)])
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_to_keep: int | None = 5,
                 save_freq: Literal["epoch"] | int = "epoch", monitor: str | None = None,
                 mode: Literal["min", "max"] = "min", include_optimizer: bool = True,
                 blocking: bool = True, storage_options: StorageOptions | None = None,
                 incremental: bool = False) -> None:
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise InvalidError(f"save_freq must be 'epoch' or a positive number of batches, "
                               f"not {save_freq!r}")
        self.directory = os.fspath(directory)
        self.max_to_keep, self.save_freq, self.monitor = max_to_keep, save_freq, monitor
        self.mode, self.include_optimizer, self.blocking = mode, include_optimizer, blocking
        self.storage_options, self.incremental = storage_options, incremental
        self._epochs = Variable(np.array(0, dtype=np.int64))
        self._manager: CheckpointManager | None = None
        self._pending: Any = None
        self._batches = 0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        checkpoint = _checkpoint_of(self.model, self._epochs, self.include_optimizer)
        monitor = self.monitor
        self._manager = CheckpointManager(
            checkpoint, self.directory, max_to_keep=self.max_to_keep,
            storage_options=self.storage_options, best_mode=self.mode,
            incremental=self.incremental,
            best_fn=None if monitor is None else (lambda metrics: float(metrics[monitor])))

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epochs.value[...] = epoch  # a batch-frequency save counts whole epochs done

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._batches += 1
        if isinstance(self.save_freq, int) and self._batches % self.save_freq == 0:
            self._save(self._batches, logs)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epochs.value[...] = epoch + 1
        if self.save_freq == "epoch":
            self._save(epoch + 1, logs)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._wait()
        if self._manager is not None:
            self._manager.close()

    def _save(self, number: int, logs: dict[str, Any] | None) -> None:
        assert self._manager is not None, "on_train_begin made the manager"
        metrics = None
        if self.monitor is not None:
            if logs is None or self.monitor not in logs:
                raise InvalidError(f"ModelCheckpoint monitors {self.monitor!r}, which the logs "
                                   f"lack (they hold {sorted(logs or {})})")
            metrics = {self.monitor: float(logs[self.monitor])}
        self._wait()  # one save in flight at a time
        if self.blocking:
            self._manager.save(checkpoint_number=number, metrics=metrics)
        else:
            self._pending = self._manager.save(checkpoint_number=number, metrics=metrics,
                                               blocking=False)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.wait()


def restore_latest(directory: str | os.PathLike[str], model: Any, *,
                   include_optimizer: bool = True,
                   storage_options: StorageOptions | None = None) -> int:
    """Restore the newest checkpoint :class:`ModelCheckpoint` saved in ``directory``
    into ``model`` (built) and its optimizer; return the epochs it had done (0 when
    there is none, and then nothing changes).

    An optimizer that has not built its variables yet builds them first, so
    the restore is strict: every value finds its variable, or nothing changes.

    Examples:
        >>> from ocf.keras.callbacks import ModelCheckpoint, restore_latest
        >>> done = restore_latest("run", model)  # epochs done by the newest checkpoint
        >>> model.fit(x, y, epochs=10, initial_epoch=done, callbacks=[ModelCheckpoint("run")])
    """
    path = latest_checkpoint(directory, storage_options)
    if path is None:
        return 0
    optimizer = getattr(model, "optimizer", None)
    if include_optimizer and optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    epochs = Variable(np.array(0, dtype=np.int64))
    checkpoint = _checkpoint_of(model, epochs, include_optimizer)
    checkpoint.restore(path, storage_options=storage_options)
    return int(epochs.value)
