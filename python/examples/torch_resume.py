"""Resume PyTorch training from an OCF checkpoint, bit for bit.

A small network with a lazy first layer, AdamW and a one-cycle
learning-rate schedule trains 10 steps uninterrupted. A second run stops
after 5 steps and saves model, optimizer and scheduler as one object-based
checkpoint. A fresh program builds everything again (other initial
weights, the lazy layer not materialised yet), restores, and trains 5 more
steps: the lazy layer gets its weights and AdamW its moments when the first
forward pass creates them (restore-on-create), and the losses equal the
uninterrupted run's.

(With dropout, also save ``rng=torch.default_generator``, and run one
forward pass before restoring: a lazy layer draws its initial weights from
that generator when it materialises.)

Run: python python/examples/torch_resume.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

import ocf
import ocf.torch  # makes modules, optimizers and schedulers trackable

STEPS, SAVE_AT = 10, 5


def build() -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    model = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=STEPS)
    return model, optimizer, schedule


def train(model: nn.Module, optimizer: torch.optim.Optimizer,
          schedule: torch.optim.lr_scheduler.LRScheduler, steps: int) -> list[float]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=generator)
    y = x.sum(dim=1, keepdim=True).sin()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


def main() -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    uninterrupted = train(*build(), STEPS)

    torch.manual_seed(0)
    model, optimizer, schedule = build()
    before = train(model, optimizer, schedule, SAVE_AT)
    directory = Path(tempfile.mkdtemp(prefix="ocf-torch-resume-"))
    path = ocf.Checkpoint(model=model, optimizer=optimizer, schedule=schedule).save(
        directory / "ckpt")
    print(f"saved after {SAVE_AT} steps: {path}")

    torch.manual_seed(1234)  # a fresh program: other initial weights
    model, optimizer, schedule = build()
    # partial: the lazy layer takes its values when its first forward pass builds it.
    status = ocf.Checkpoint(model=model, optimizer=optimizer, schedule=schedule).restore(
        path, partial=True)
    after = train(model, optimizer, schedule, STEPS - SAVE_AT)
    status.assert_consumed()  # everything arrived, the lazy layer's values included

    for step, (a, b) in enumerate(zip(uninterrupted, before + after), start=1):
        print(f"step {step:2d}  uninterrupted {a:.9g}  resumed {b:.9g}")
    if before + after != uninterrupted:
        print("losses differ", file=sys.stderr)
        return 1
    print("losses match bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
