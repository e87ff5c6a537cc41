"""Weights trained in one framework, restored by structure into another.

A small conv net trains a few steps in PyTorch and is saved with
``ocf.Checkpoint(model=..., optimizer=...)``. The same network written in
Flax restores its parameters from that checkpoint through
``ocf.jax.TORCH_TO_FLAX`` (kernels transposed, ``weight`` read as
``kernel``), and a NumPy version restores them as they are; all three give
the same outputs on the same input, within float32 tolerance. The other
way, the Flax network trains in JAX, is saved through
``ocf.jax.FLAX_TO_TORCH`` and restores into the PyTorch network.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

import ocf
import ocf.jax
import ocf.torch  # makes torch modules trackable

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
    params = ocf.jax.restore(target, path, start="model", translation=ocf.jax.TORCH_TO_FLAX)
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
    translation = ocf.jax.TORCH_TO_FLAX.rename({"Dense_0": "0", "Dense_1": "2"})
    params = ocf.jax.restore(target, path, start="model", translation=translation)
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
        ocf.jax.restore(target, path, start="model", partial=True)


# -- JAX/Flax -> PyTorch ---------------------------------------------------------------


def nhwc(x: np.ndarray) -> Any:
    return jnp.asarray(x.transpose(0, 2, 3, 1))


@pytest.fixture(scope="module")
def trained_in_flax(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """The Flax net after 5 optax Adam steps, saved for PyTorch, and its output on inputs(1)."""
    model = FlaxNet()
    params = model.init(jax.random.PRNGKey(3), nhwc(inputs(1)))["params"]
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    def loss(p: Any, x: Any) -> Any:
        return (model.apply({"params": p}, x) ** 2).mean()

    for step in range(5):
        grads = jax.grad(loss)(params, nhwc(inputs(200 + step)))
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    path = ocf.jax.save(params, tmp_path_factory.mktemp("flax") / "ckpt.ocf",
                        translation=ocf.jax.FLAX_TO_TORCH)
    return path, np.asarray(model.apply({"params": params}, nhwc(inputs(1))))


def test_flax_weights_saved_for_torch_give_the_same_outputs_in_torch(
        trained_in_flax: tuple[str, np.ndarray]) -> None:
    path, expected = trained_in_flax
    torch.manual_seed(0)
    net = TorchNet()
    ocf.restore(net, path).assert_consumed()
    with torch.no_grad():
        got = net(torch.from_numpy(inputs(1))).numpy()
    np.testing.assert_allclose(got, expected, **TOLERANCE)


def test_flax_weights_saved_for_torch_are_in_torch_names_and_shapes(
        trained_in_flax: tuple[str, np.ndarray]) -> None:
    path, _ = trained_in_flax
    with ocf.open(path) as reader:
        assert sorted(reader) == ["conv/bias/.value", "conv/weight/.value", "fc1/bias/.value",
                                  "fc1/weight/.value", "fc2/bias/.value", "fc2/weight/.value"]
        assert reader["conv/weight/.value"].shape == (4, 1, 3, 3)  # Flax's (3, 3, 1, 4)
        assert reader["fc1/weight/.value"].shape == (16, 144)  # Flax's (144, 16)


def test_sequential_flax_model_saved_for_torch_by_a_rename(tmp_path: Path) -> None:
    class MLP(nn.Module):  # type: ignore[misc]
        @nn.compact
        def __call__(self, x: Any) -> Any:
            hidden = nn.Dense(8)  # Dense_0: named in the order the layers are made
            return nn.Dense(2)(nn.tanh(hidden(x)))  # Dense_1

    x = np.random.default_rng(4).normal(size=(4, 6)).astype(np.float32)
    params = MLP().init(jax.random.PRNGKey(5), x)["params"]
    translation = ocf.jax.FLAX_TO_TORCH.rename({"Dense_0": "0", "Dense_1": "2"})
    path = ocf.jax.save(params, tmp_path / "mlp.ocf", translation=translation)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    status = ocf.restore(net, path)
    assert status.unmatched_checkpoint_paths() == []
    assert status.unmatched_object_paths() == ["1"]  # the Tanh, which Flax has no module for
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, np.asarray(MLP().apply({"params": params}, x)), **TOLERANCE)


def test_a_layout_rule_without_the_saving_conversion_is_refused_on_save(tmp_path: Path
                                                                        ) -> None:
    restore_only = ocf.jax.Translation(leaves={"kernel": ("weight", np.transpose)})
    params = {"fc": {"kernel": np.zeros((2, 3), np.float32)}}
    with pytest.raises(ocf.InvalidError, match="'fc/kernel': the translation's rule for 'kernel' "
                                               "converts only on restore"):
        ocf.jax.save(params, tmp_path / "x.ocf", translation=restore_only)
    assert list(tmp_path.iterdir()) == []


# -- optimizer state: torch Adam -> optax adam ----------------------------------------------


def torch_adam_step(net: Any, optimizer: Any, x: np.ndarray) -> None:
    loss = (net(torch.from_numpy(x)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_adam_state_moves_from_torch_to_optax_and_the_next_step_agrees(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = TorchNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for step in range(5):
        torch_adam_step(net, optimizer, inputs(100 + step))
    path = ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "ckpt.ocf")

    model, tx = FlaxNet(), optax.adam(1e-2)  # torch's Adam defaults: b1, b2, eps equal
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0), nhwc(inputs(1)))["params"]
    target = {"params": params, "opt_state": jax.eval_shape(tx.init, params)}
    translation = ocf.jax.TORCH_TO_FLAX.rename({"params": "model", "opt_state": "optimizer"})
    state = ocf.jax.restore(target, path, translation=translation)
    adam = state["opt_state"][0]
    assert int(adam.count) == 5
    # mu is torch's exp_avg, laid out as the kernel is
    np.testing.assert_array_equal(np.asarray(adam.mu["fc1"]["kernel"]),
                                  optimizer.state[net.fc1.weight]["exp_avg"].numpy().T)

    x = inputs(300)  # the sixth step, in both frameworks
    torch_adam_step(net, optimizer, x)

    def loss(p: Any) -> Any:
        return (model.apply({"params": p}, nhwc(x)) ** 2).mean()

    updates, _ = tx.update(jax.grad(loss)(state["params"]), state["opt_state"], state["params"])
    stepped = optax.apply_updates(state["params"], updates)
    with torch.no_grad():
        expected = net(torch.from_numpy(inputs(1))).numpy()
    np.testing.assert_allclose(np.asarray(model.apply({"params": stepped}, nhwc(inputs(1)))),
                               expected, **TOLERANCE)


def test_torch_step_counts_that_differ_between_parameters_are_refused(tmp_path: Path) -> None:
    net = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for only_weight in (True, False):  # Adam skips a parameter without gradient
        (net(torch.ones(1, 2)) ** 2).sum().backward()
        if only_weight:
            net.bias.grad = None
        optimizer.step()
        optimizer.zero_grad()
    path = ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "ckpt.ocf")
    params = {"kernel": jax.ShapeDtypeStruct((2, 1), jnp.float32),
              "bias": jax.ShapeDtypeStruct((1,), jnp.float32)}
    target = {"params": params, "opt_state": jax.eval_shape(optax.adam(1e-2).init, params)}
    translation = ocf.jax.TORCH_TO_FLAX.rename({"params": "model", "opt_state": "optimizer"})
    with pytest.raises(ocf.InvalidError, match=r"step counts differ \((2.0 and 1.0|1.0 and 2.0)\)"):
        ocf.jax.restore(target, path, translation=translation, partial=True)
