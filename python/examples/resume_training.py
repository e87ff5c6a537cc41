"""Resume training from an object-based checkpoint, by structure.

A two-layer NumPy network trained with Adam (two slot variables, ``m`` and
``v``, per weight) runs 10 steps uninterrupted. A second run stops after 5
steps and saves ``ocf.Checkpoint(model=..., optimizer=...)``. A fresh
program then builds a network whose layers carry other names and create
their weights only on first use, restores the checkpoint (the weights and
Adam's slots arrive when the layers build: restore-on-create), and trains 5
more steps. Its losses equal the uninterrupted run's, bit for bit.

Run: python python/examples/resume_training.py
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

import ocf


class Dense(ocf.Module):
    """tanh(x @ kernel + bias), with weights created on the first call."""

    def __init__(self, units: int, seed: int, name: str) -> None:
        self.units = units
        self.seed = seed
        self.name = name  # a label only: restoring matches structure, not names

    def build(self, inputs: int) -> None:
        rng = np.random.default_rng(self.seed)
        self.kernel = ocf.Variable(rng.normal(0, 0.5, (inputs, self.units)))
        self.bias = ocf.Variable(np.zeros(self.units))

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not hasattr(self, "kernel"):
            self.build(x.shape[-1])
        self._x = x
        self._y: np.ndarray = np.tanh(x @ self.kernel.value + self.bias.value)
        return self._y

    def backward(self, grad_y: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        grad_z = grad_y * (1 - self._y**2)
        return grad_z @ self.kernel.value.T, [self._x.T @ grad_z, grad_z.sum(axis=0)]


class Network(ocf.Module):
    def __init__(self, prefix: str) -> None:
        self.hidden = Dense(8, seed=1, name=f"{prefix}_hidden")
        self.output = Dense(1, seed=2, name=f"{prefix}_output")

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.output.forward(self.hidden.forward(x))

    def variables(self) -> list[ocf.Variable]:
        return [self.hidden.kernel, self.hidden.bias, self.output.kernel, self.output.bias]

    def gradients(self, grad_out: np.ndarray) -> list[np.ndarray]:
        grad_hidden, output_grads = self.output.backward(grad_out)
        _, hidden_grads = self.hidden.backward(grad_hidden)
        return hidden_grads + output_grads


class Adam(ocf.Module):
    """Adam; its moment estimates are slot variables linked to each weight."""

    def __init__(self, learning_rate: float = 0.05) -> None:
        self.learning_rate = learning_rate
        self.iterations = 0  # saved as metadata, restored
        self._slots: dict[int, tuple[ocf.Variable, dict[str, np.ndarray]]] = {}

    def ocf_slots(self) -> Iterable[tuple[object, str, object]]:
        for variable, slots in self._slots.values():
            for name, value in slots.items():
                yield variable, name, value

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        assert isinstance(variable, ocf.Variable)
        self._slots.setdefault(id(variable), (variable, {}))[1][name] = values["value"].copy()

    def apply(self, variables: list[ocf.Variable], grads: list[np.ndarray]) -> None:
        self.iterations += 1
        t = self.iterations
        for variable, grad in zip(variables, grads):
            _, slots = self._slots.setdefault(id(variable), (variable, {}))
            m = slots.setdefault("m", np.zeros_like(variable.value))
            v = slots.setdefault("v", np.zeros_like(variable.value))
            m[...] = 0.9 * m + 0.1 * grad
            v[...] = 0.999 * v + 0.001 * grad**2
            step = self.learning_rate * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
            variable.value -= step


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3))
    return x, np.sin(x.sum(axis=1, keepdims=True))


def train(model: Network, optimizer: Adam, steps: int) -> list[float]:
    x, y = data()
    losses = []
    for _ in range(steps):
        prediction = model.forward(x)
        losses.append(float(np.mean((prediction - y) ** 2)))
        grads = model.gradients(2 * (prediction - y) / len(x))
        optimizer.apply(model.variables(), grads)
    return losses


def main() -> int:
    uninterrupted = train(Network("a"), Adam(), 10)

    first_model, first_optimizer = Network("b"), Adam()
    before = train(first_model, first_optimizer, 5)
    directory = Path(tempfile.mkdtemp(prefix="ocf-resume-"))
    path = ocf.Checkpoint(model=first_model, optimizer=first_optimizer).save(directory / "ckpt")
    print(f"saved after 5 steps: {path}")

    # A fresh program: other layer names, nothing built yet.
    model, optimizer = Network("renamed"), Adam()
    # partial: strictness is judged below, once the first forward pass has built (and
    # restored) the layers.
    status = ocf.Checkpoint(model=model, optimizer=optimizer).restore(path, partial=True)
    after = train(model, optimizer, 5)  # the first forward pass builds and restores
    status.assert_consumed()

    for step, (a, b) in enumerate(zip(uninterrupted, before + after), start=1):
        print(f"step {step:2d}  uninterrupted {a:.17g}  resumed {b:.17g}")
    if before + after != uninterrupted:
        print("losses differ", file=sys.stderr)
        return 1
    print("losses match bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
