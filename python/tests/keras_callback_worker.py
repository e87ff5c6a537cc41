"""A small Keras training run saving through ocf.keras.callbacks.ModelCheckpoint.

``python keras_callback_worker.py WORKDIR KILL_EPOCH``: restores the newest
checkpoint of WORKDIR/run (none on a fresh start), trains a Dense network
with seeded Dropout and Adam for 4 epochs in all (batches in a fixed order)
on the torch backend, a checkpoint after each epoch, and writes the final
weights to WORKDIR/final.npz. With KILL_EPOCH >= 0 it prints "ready" at the
second batch of that epoch and waits to be killed. A third argument
``incremental`` saves with ``ModelCheckpoint(..., incremental=True)``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ["KERAS_BACKEND"] = "torch"

import keras
import numpy as np

from ocf.keras.callbacks import ModelCheckpoint, restore_latest


class KillPoint(keras.callbacks.Callback):  # type: ignore[misc]
    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch, self.current = epoch, -1

    def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
        self.current = epoch

    def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
        if self.current == self.epoch and batch == 1:
            print("ready", flush=True)
            time.sleep(600)


def main() -> None:
    workdir, kill_epoch = Path(sys.argv[1]), int(sys.argv[2])
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.3, seed=1), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    data = np.random.default_rng(1)
    x = data.standard_normal((32, 4)).astype("float32")
    y = data.standard_normal((32, 1)).astype("float32")
    done = restore_latest(workdir / "run", model)
    incremental = sys.argv[3:] == ["incremental"]
    callbacks: list[keras.callbacks.Callback] = [
        ModelCheckpoint(workdir / "run", max_to_keep=2, incremental=incremental)]
    if kill_epoch >= 0:
        callbacks.append(KillPoint(kill_epoch))
    model.fit(x, y, batch_size=8, epochs=4, initial_epoch=done, shuffle=False, verbose=0,
              callbacks=callbacks)
    weights = {v.path: keras.ops.convert_to_numpy(v) for v in model.variables}
    weights.update({f"optimizer/{v.path}": keras.ops.convert_to_numpy(v)
                    for v in model.optimizer.variables})
    np.savez(workdir / "final.npz", **weights)
    print(f"started at epoch {done}", flush=True)


if __name__ == "__main__":
    main()
