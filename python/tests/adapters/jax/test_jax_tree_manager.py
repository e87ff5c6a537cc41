"""JAX without a holder to keep in sync (issue 24, item 4).

``ocf.jax.TreeManager`` saves the tree it is given at each step and restores
new trees, over the files ``ocf.Checkpoint(state=TreeState(tree))`` writes; a
TreeState about to save the very arrays it saved last (training replaced the
tree, the holder was not told) warns, or refuses under an error filter.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ocf
import ocf.jax
from ocf.objects.recovery import RecoveryWarning
from ocf.objects.state_file import STATE_FILE_NAME

OPTIMIZER = optax.adam(0.1)


def init() -> dict[str, Any]:
    params = {"dense": {"kernel": jnp.ones((3, 2)), "bias": jnp.zeros(2)}}
    return {"params": params, "opt_state": OPTIMIZER.init(params), "step": jnp.array(0)}


def train_step(state: dict[str, Any]) -> dict[str, Any]:
    grads = jax.tree_util.tree_map(lambda p: p * 0.5 + 1.0, state["params"])
    updates, opt_state = OPTIMIZER.update(grads, state["opt_state"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
            "step": state["step"] + 1}


def same(a: Any, b: Any) -> bool:
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    return tree_a == tree_b and all(np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b))


def test_save_takes_the_tree_and_restore_returns_a_new_one(tmp_path: Path) -> None:
    state = init()
    with ocf.jax.TreeManager(tmp_path, max_to_keep=2) as manager:
        for step in range(1, 4):
            state = train_step(state)
            assert manager.save(step, state) == str(tmp_path / f"ckpt-{step}")
        assert manager.all_steps() == [2, 3]
        assert manager.latest_step() == 3
    reopened = ocf.jax.TreeManager(tmp_path)
    restored = reopened.restore(reopened.latest_step(), jax.eval_shape(init))
    assert same(restored, state)
    assert int(restored["step"]) == 3
    earlier = reopened.restore(2, init())
    assert int(earlier["step"]) == 2
    reopened.close()


def test_tree_manager_files_are_those_of_the_holder_form(tmp_path: Path) -> None:
    state = train_step(init())
    with ocf.jax.TreeManager(tmp_path) as manager:
        path = manager.save(7, state)
    holder = ocf.jax.TreeState(init())
    ocf.Checkpoint(state=holder).restore(str(path)).assert_consumed()
    assert same(holder.tree, state)
    ocf.Checkpoint(state=ocf.jax.TreeState(state)).write(tmp_path / "ckpt-8")
    assert same(ocf.jax.TreeManager(tmp_path).restore(8, init()), state)


def test_restore_without_a_checkpoint_is_not_found(tmp_path: Path) -> None:
    manager = ocf.jax.TreeManager(tmp_path)
    assert manager.latest_step() is None
    with pytest.raises(ocf.NotFoundError, match="no committed checkpoint"):
        manager.restore(None, init())


def test_a_tree_manager_recovers_a_directory_whose_state_file_is_lost(tmp_path: Path) -> None:
    state = init()
    with ocf.jax.TreeManager(tmp_path) as manager:
        for step in (10, 20):
            state = train_step(state)
            manager.save(step, state)
    (tmp_path / STATE_FILE_NAME).unlink()
    with pytest.warns(RecoveryWarning, match="the newest is 'ckpt-20'"):
        manager = ocf.jax.TreeManager(tmp_path)
    assert manager.latest_step() == 20
    assert same(manager.restore(None, init()), state)


def test_a_tree_state_not_reassigned_after_a_step_warns_at_the_save(tmp_path: Path) -> None:
    state = init()
    holder = ocf.jax.TreeState(state)
    checkpoint = ocf.Checkpoint(state=holder)
    checkpoint.save(tmp_path / "ckpt")
    state = train_step(state)  # holder.tree = state forgotten
    with pytest.warns(ocf.jax.StaleTreeWarning, match="saves the same 8 arrays it saved or "
                      "restored last: .* assign holder.tree = state"):
        checkpoint.save(tmp_path / "ckpt")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ocf.jax.StaleTreeWarning)  # a refusal: nothing written
        with pytest.raises(ocf.jax.StaleTreeWarning):
            checkpoint.save(tmp_path / "ckpt")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-1", "ckpt-2"]
        holder.tree = state
        checkpoint.save(tmp_path / "ckpt")  # reassigned: no warning
        restored = ocf.jax.TreeState(init())
        ocf.Checkpoint(state=restored).restore(tmp_path / "ckpt-3")  # numbered after the refusal
        assert same(restored.tree, state)
        for _ in range(2):  # after a restore, each step reassigned: no warning either
            restored.tree = train_step(restored.tree)
            ocf.Checkpoint(state=restored).write(tmp_path / "again")


def test_a_restored_tree_state_saved_without_its_new_tree_warns(tmp_path: Path) -> None:
    ocf.Checkpoint(state=ocf.jax.TreeState(train_step(init()))).write(tmp_path / "a")
    holder = ocf.jax.TreeState(init())
    checkpoint = ocf.Checkpoint(state=holder)
    checkpoint.restore(tmp_path / "a")
    state = train_step(holder.tree)  # trains on the restored tree, forgets to reassign
    assert int(state["step"]) == 2
    with pytest.warns(ocf.jax.StaleTreeWarning):
        checkpoint.write(tmp_path / "b")
