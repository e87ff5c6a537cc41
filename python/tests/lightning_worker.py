"""A small Lightning training run whose checkpoints go through ocf.lightning.

Run as ``python lightning_worker.py WORKDIR EPOCHS KILL_EPOCH RESUME ASYNC``:
trains a tiny model with dropout, shuffling, AdamW and a step scheduler on
the CPU, saving an OCF checkpoint every epoch, and at the end writes
WORKDIR/final.ckpt. With KILL_EPOCH >= 0 it prints "ready" at the third
batch of that epoch (once the previous epoch's checkpoint is on disk) and
waits to be killed. RESUME is a checkpoint path to resume from, or "-";
ASYNC is 1 to wrap the plugin in Lightning's AsyncCheckpointIO. A sixth
argument ``incremental`` makes the plugin ``OCFCheckpointIO(incremental=True)``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from lightning.pytorch import LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import AsyncCheckpointIO
from torch.utils.data import DataLoader, TensorDataset

from ocf.lightning import OCFCheckpointIO, RandomStates


class Tiny(LightningModule):
    def __init__(self, hidden: int = 8, lr: float = 0.01, label: str = "tiny") -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.3), torch.nn.Linear(hidden, 1))

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> object:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"])
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler,
                                                         "interval": "step"}}


class KillPoint(Callback):
    """Say "ready" in the middle of an epoch, once the last epoch's checkpoint exists."""

    def __init__(self, epoch: int, checkpoints: Path) -> None:
        self.epoch, self.checkpoints = epoch, checkpoints

    def on_train_batch_start(self, trainer: Trainer, module: LightningModule, batch: object,
                             batch_idx: int) -> None:
        if trainer.current_epoch == self.epoch and batch_idx == 2:
            while not list(self.checkpoints.glob(f"epoch={self.epoch - 1}-*.ckpt")):
                time.sleep(0.01)  # an async save may still be writing it
            print("ready", flush=True)
            time.sleep(600)


def main() -> None:
    workdir, epochs, kill_epoch = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    resume, use_async = sys.argv[4], sys.argv[5] == "1"
    torch.set_num_threads(1)
    seed_everything(0)
    data = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(48, 4, generator=data), torch.randn(48, 1, generator=data))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    checkpoints = workdir / "checkpoints"
    callbacks: list[Callback] = [ModelCheckpoint(dirpath=checkpoints, save_top_k=-1,
                                                 every_n_epochs=1), RandomStates()]
    if kill_epoch >= 0:
        callbacks.append(KillPoint(kill_epoch, checkpoints))
    plugin = OCFCheckpointIO(incremental=sys.argv[6:] == ["incremental"])
    io = AsyncCheckpointIO(plugin) if use_async else plugin
    trainer = Trainer(max_epochs=epochs, accelerator="cpu", devices=1, plugins=[io],
                      callbacks=callbacks, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, num_sanity_val_steps=0, deterministic=True)
    trainer.fit(Tiny(), loader, ckpt_path=None if resume == "-" else resume)
    trainer.save_checkpoint(workdir / "final.ckpt")
    io.teardown()  # an async save finishes before the process ends


if __name__ == "__main__":
    main()
