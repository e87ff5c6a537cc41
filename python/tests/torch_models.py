"""Small PyTorch models and a deterministic training loop for the torch adapter tests."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


class ConvNet(nn.Module):
    """Conv, BatchNorm (running stats and num_batches_tracked as buffers), MLP head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, kernel_size=3)
        self.norm = nn.BatchNorm2d(3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 8), nn.Tanh(),
                                  nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.head(torch.relu(self.norm(self.conv(x))))
        return result


def mlp(lazy: bool = False) -> nn.Sequential:
    """3 -> 8 -> 1; with ``lazy``, both layers infer their input size on first call."""
    first = nn.LazyLinear(8) if lazy else nn.Linear(3, 8)
    last = nn.LazyLinear(1) if lazy else nn.Linear(8, 1)
    return nn.Sequential(first, nn.Tanh(), last)


def image_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1234)
    x = torch.randn(16, 1, 6, 6, generator=generator)
    return x, x.mean(dim=(1, 2, 3)).sin().unsqueeze(1)


def vector_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(99)
    x = torch.randn(32, 3, generator=generator)
    return x, x.sum(dim=1, keepdim=True).sin()


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int,
          batch: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """``steps`` steps of mean squared error; the loss of each, before its update."""
    x, y = batch()
    losses = []
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
