"""Flax and optax training states restore as Flax users build them: a fresh
``TrainState.create(...)``, ``nnx.state(model)``, optax chains, abstract targets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import flax.linen as linen
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from flax.training import train_state

import ocf
import ocf.jax


class Mlp(linen.Module):
    @linen.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return linen.Dense(2)(linen.relu(linen.Dense(4)(x)))


def fresh_state(tx: optax.GradientTransformation, seed: int = 0) -> train_state.TrainState:
    model = Mlp()
    params = model.init(jax.random.PRNGKey(seed), jnp.ones((1, 3)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def trained(state: train_state.TrainState, steps: int) -> train_state.TrainState:
    @jax.jit
    def step(state: train_state.TrainState) -> train_state.TrainState:
        def loss(params: Any) -> jax.Array:
            return jnp.sum(state.apply_fn({"params": params}, jnp.ones((2, 3))) ** 2)
        return state.apply_gradients(grads=jax.grad(loss)(state.params))
    for _ in range(steps):
        state = step(state)
    return state


def assert_trees_equal(a: Any, b: Any) -> None:
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_fresh_train_state_takes_the_step_a_jitted_update_made_an_array(
        tmp_path: Path) -> None:
    state = trained(fresh_state(optax.adam(1e-2)), 10)
    assert isinstance(state.step, jax.Array)  # the jitted update turned 0 into an array
    path = ocf.jax.save(state, tmp_path / "ts.ocf")

    fresh = fresh_state(optax.adam(1e-2), seed=1)
    assert fresh.step == 0
    assert isinstance(fresh.step, int)
    restored = ocf.jax.restore(fresh, path)
    assert restored.step == 10
    assert isinstance(restored.step, int)  # the target's kind of leaf
    assert_trees_equal(restored.params, state.params)
    assert_trees_equal(restored.opt_state, state.opt_state)


def test_partial_never_leaves_a_saved_step_behind(tmp_path: Path) -> None:
    path = ocf.jax.save(trained(fresh_state(optax.adam(1e-2)), 10), tmp_path / "ts.ocf")
    restored = ocf.jax.restore(fresh_state(optax.adam(1e-2), seed=1), path, partial=True)
    assert restored.step == 10


def test_a_step_that_is_not_a_whole_number_is_refused_for_an_int_leaf(tmp_path: Path) -> None:
    path = ocf.jax.save({"step": jnp.asarray(2.5)}, tmp_path / "s.ocf")
    with pytest.raises(ocf.InvalidError, match=r"s\.ocf: .*holds 2\.5 for 'step', which a "
                       r"Python int cannot hold exactly"):
        ocf.jax.restore({"step": 0}, path)


def test_an_optax_chain_restores_into_a_fresh_chain(tmp_path: Path) -> None:
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2))
    state = trained(fresh_state(tx), 3)
    path = ocf.jax.save(state, tmp_path / "chain.ocf")
    restored = ocf.jax.restore(fresh_state(tx, seed=2), path)
    assert_trees_equal(restored.opt_state, state.opt_state)
    assert restored.step == 3


class Counter(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.linear = nnx.Linear(3, 2, rngs=rngs)
        self.seen = nnx.BatchStat(jnp.array(0))


def test_nnx_state_restores_into_a_concrete_and_an_abstract_model(tmp_path: Path) -> None:
    model = Counter(nnx.Rngs(0))
    model.seen[...] = jnp.array(7)
    path = ocf.jax.save(nnx.state(model), tmp_path / "nnx.ocf")

    other = Counter(nnx.Rngs(1))
    nnx.update(other, ocf.jax.restore(nnx.state(other), path))
    np.testing.assert_array_equal(other.linear.kernel[...], model.linear.kernel[...])
    assert int(other.seen[...]) == 7

    abstract = nnx.eval_shape(lambda: Counter(nnx.Rngs(0)))
    restored = ocf.jax.restore(nnx.state(abstract), path)
    built = nnx.merge(nnx.graphdef(abstract), restored)
    np.testing.assert_array_equal(built.linear.kernel[...], model.linear.kernel[...])
