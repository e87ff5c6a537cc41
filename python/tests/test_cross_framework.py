"""Weights trained in PyTorch, restored by structure into Flax and into NumPy.

A small conv net trains a few steps in PyTorch and is saved with
``ocf.Checkpoint(model=..., optimizer=...)``. The same network written in
Flax restores its parameters from that checkpoint through
``ocf.jax.TORCH_TO_FLAX`` (kernels transposed, ``weight`` read as
``kernel``), and a NumPy version restores them as they are; all three give
the same outputs on the same input, within float32 tolerance.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ocf

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
nn = pytest.importorskip("flax.linen")
pytest.importorskip("ocf.torch")

import ocf.jax  # noqa: E402
import ocf.torch  # noqa: E402  (makes torch modules trackable)

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


class TorchNet(torch.nn.Module):  # type: ignore[misc]
    """conv 3x3 (1 -> 4 channels) -> relu -> flatten (NCHW) -> 144 -> 16 -> tanh -> 3."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: Any) -> Any:
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.tanh(self.fc1(x)))


class FlaxNet(nn.Module):  # type: ignore[misc]
    """The same network in Flax: NHWC input, features flattened in NCHW order like torch's."""

    @nn.compact
    def __call__(self, x: Any) -> Any:
        x = nn.relu(nn.Conv(4, (3, 3), padding="VALID", name="conv")(x))
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
        return nn.Dense(3, name="fc2")(nn.tanh(nn.Dense(16, name="fc1")(x)))


class NumpyLayer(ocf.Module):
    """Weights in PyTorch's layout, named as PyTorch names them."""

    def __init__(self, weight_shape: tuple[int, ...], out: int) -> None:
        self.weight = ocf.Variable(np.zeros(weight_shape, np.float32))
        self.bias = ocf.Variable(np.zeros(out, np.float32))


class NumpyNet(ocf.Module):
    def __init__(self) -> None:
        self.conv = NumpyLayer((4, 1, 3, 3), 4)
        self.fc1 = NumpyLayer((16, 144), 16)
        self.fc2 = NumpyLayer((3, 16), 3)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
        conv = np.einsum("nchwij,ocij->nohw", windows, self.conv.weight.value)
        conv = np.maximum(conv + self.conv.bias.value[:, None, None], 0).reshape(len(x), -1)
        hidden = np.tanh(conv @ self.fc1.weight.value.T + self.fc1.bias.value)
        out: np.ndarray = hidden @ self.fc2.weight.value.T + self.fc2.bias.value
        return out


def inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(5, 1, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """A checkpoint of the torch net after 5 Adam steps, and its output on inputs(1)."""
    torch.manual_seed(0)
    net = TorchNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for step in range(5):
        x = torch.from_numpy(inputs(100 + step))
        loss = (net(x) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    path = ocf.Checkpoint(model=net, optimizer=optimizer).save(
        tmp_path_factory.mktemp("torch") / "ckpt")
    with torch.no_grad():
        expected = net(torch.from_numpy(inputs(1))).numpy()
    return path, expected


def test_torch_weights_restored_into_flax_give_the_same_outputs(
        trained: tuple[str, np.ndarray]) -> None:
    path, expected = trained
    model = FlaxNet()
    nhwc = jnp.asarray(inputs(1).transpose(0, 2, 3, 1))
    target = jax.eval_shape(model.init, jax.random.PRNGKey(0), nhwc)["params"]
    params = ocf.jax.restore(path, target, start="model", layout=ocf.jax.TORCH_TO_FLAX)
    assert params["fc1"]["kernel"].shape == (144, 16)  # torch's (16, 144), transposed
    assert params["conv"]["kernel"].shape == (3, 3, 1, 4)  # torch's (4, 1, 3, 3)
    np.testing.assert_allclose(np.asarray(model.apply({"params": params}, nhwc)), expected,
                               **TOLERANCE)


def test_torch_weights_restored_into_numpy_give_the_same_outputs(
        trained: tuple[str, np.ndarray]) -> None:
    path, expected = trained
    net = NumpyNet()
    ocf.restore(net, path, start="model").assert_consumed()
    np.testing.assert_allclose(net(inputs(1)), expected, **TOLERANCE)


def test_sequential_torch_model_restores_into_flax_default_names_by_a_rename(
        tmp_path: Path) -> None:
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    path = ocf.Checkpoint(model=net).save(tmp_path / "seq")

    class MLP(nn.Module):  # type: ignore[misc]
        @nn.compact
        def __call__(self, x: Any) -> Any:
            hidden = nn.Dense(8)  # Dense_0
            return nn.Dense(2)(nn.tanh(hidden(x)))  # Dense_1

    x = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    target = jax.eval_shape(MLP().init, jax.random.PRNGKey(0), x)["params"]
    layout = ocf.jax.TORCH_TO_FLAX.rename({"Dense_0": "0", "Dense_1": "2"})
    params = ocf.jax.restore(path, target, start="model", layout=layout)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.asarray(MLP().apply({"params": params}, x)), expected,
                               **TOLERANCE)


def test_without_the_layout_the_transposed_kernel_is_reported(
        trained: tuple[str, np.ndarray]) -> None:
    path, _ = trained
    target = {"fc2": {"weight": jax.ShapeDtypeStruct((16, 3), jnp.float32)}}
    with pytest.raises(ocf.InvalidError, match=r"'fc2/weight' is float32 \[16, 3\], the "
                       r"checkpoint holds float32 \[3, 16\]"):
        ocf.jax.restore(path, target, start="model", partial=True)
