"""ocf.jax with real JAX, Flax and optax: pytrees as object graphs, restore into new trees."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import flax.linen as nn
import flax.struct as flax_struct
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
from flax.training import train_state

import ocf
import ocf.jax
from ocf.jax.trees import view_of
from ocf.objects.saving import collect, collect_names


class MLP(nn.Module):  # type: ignore[misc]
    @nn.compact
    def __call__(self, x: Any) -> Any:
        x = nn.tanh(nn.Dense(16, name="hidden")(x))
        return nn.Dense(1, name="out")(x)


MODEL = MLP()
TX = optax.adam(1e-2)


def batch(step: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(step)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(np.sin(x.sum(axis=1, keepdims=True)))


@jax.jit
def train_step(state: dict[str, Any], x: Any, y: Any) -> tuple[dict[str, Any], Any]:
    def loss_fn(params: Any) -> Any:
        return jnp.mean((MODEL.apply({"params": params}, x) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt_state = TX.update(grads, state["opt_state"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state}, loss


def fresh_state(seed: int) -> dict[str, Any]:
    params = MODEL.init(jax.random.PRNGKey(seed), jnp.ones((1, 4)))["params"]
    return {"params": params, "opt_state": TX.init(params)}


def train(state: dict[str, Any], steps: range) -> tuple[dict[str, Any], list[bytes]]:
    losses = []
    for step in steps:
        state, loss = train_step(state, *batch(step))
        losses.append(np.asarray(loss).tobytes())
    return state, losses


def test_every_leaf_of_a_tree_names_its_tensors_as_its_values_do() -> None:
    # What a restore's strictness check asks instead of the values (device arrays
    # would be copied to the host): the same keys, node by node.
    state, _ = train(fresh_state(0), range(2))
    root = view_of(state).root
    named = collect_names(root)
    assert [n.attributes for n in named.nodes] == [n.attributes for n in collect(root).nodes]
    assert sum(len(n.attributes) for n in named.nodes) == len(jax.tree_util.tree_leaves(state))


def leaf_bytes(tree: Any) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """Every leaf as (path, dtype, shape, bytes); Python scalars become their NumPy arrays."""
    result = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        array = np.asarray(leaf)
        result.append((jax.tree_util.keystr(path), str(array.dtype), array.shape,
                       array.tobytes()))
    return result


# -- resuming training -----------------------------------------------------------------


def test_resumed_training_continues_bit_identically_through_ocf_checkpoint(
        tmp_path: Path) -> None:
    full, full_losses = train(fresh_state(0), range(8))

    first, first_losses = train(fresh_state(0), range(4))
    holder = ocf.jax.TreeState(first)
    saved = ocf.Checkpoint(state=holder).save(tmp_path / "ckpt")

    resumed_holder = ocf.jax.TreeState(fresh_state(1))  # other initial values
    status = ocf.Checkpoint(state=resumed_holder).restore(saved)
    status.assert_consumed()
    resumed, later_losses = train(resumed_holder.tree, range(4, 8))

    assert first_losses + later_losses == full_losses
    assert leaf_bytes(resumed) == leaf_bytes(full)


def test_resume_from_an_abstract_target_with_save_and_restore(tmp_path: Path) -> None:
    full, full_losses = train(fresh_state(0), range(6))
    first, first_losses = train(fresh_state(0), range(3))
    ocf.jax.save(first, tmp_path / "state.ocf")

    target = jax.eval_shape(lambda: fresh_state(5))
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree_util.tree_leaves(target))
    restored = ocf.jax.restore(target, tmp_path / "state.ocf")
    assert all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(restored))
    assert jax.tree_util.tree_structure(restored) == jax.tree_util.tree_structure(first)
    resumed, later_losses = train(restored, range(3, 6))
    assert first_losses + later_losses == full_losses
    assert leaf_bytes(resumed) == leaf_bytes(full)


# -- optax moments as slot variables -------------------------------------------------------


def test_adam_moments_are_slot_variables_of_their_parameters(tmp_path: Path) -> None:
    state, _ = train(fresh_state(0), range(2))
    ocf.jax.save(state, tmp_path / "s.ocf")
    adam = state["opt_state"][0]
    with ocf.open(tmp_path / "s.ocf") as reader:
        graph = reader.object_graph
        assert graph is not None
        owner = graph.node_at(["opt_state", "0"])
        assert owner is not None
        assert graph.nodes[owner].type_name.endswith("ScaleByAdamState")
        assert set(graph.nodes[owner].children) == {"count"}  # mu, nu are slots now
        slots = {(graph.path(s.variable), s.name): s.slot_node for s in graph.nodes[owner].slots}
        assert set(slots) == {(f"params/{layer}/{leaf}", moment)
                              for layer in ("hidden", "out") for leaf in ("kernel", "bias")
                              for moment in ("mu", "nu")}
        key = "opt_state/0/.slot/params/hidden/kernel/mu/.value"
        np.testing.assert_array_equal(reader.get_tensor(key), adam.mu["hidden"]["kernel"])
        nu = graph.nodes[slots[("params/out/bias", "nu")]].attributes["value"]
        np.testing.assert_array_equal(reader.get_tensor(nu), adam.nu["out"]["bias"])


def test_moments_stay_plain_children_without_parameters_in_the_tree(tmp_path: Path) -> None:
    state = fresh_state(0)
    ocf.jax.save(state["opt_state"], tmp_path / "s.ocf")
    with ocf.open(tmp_path / "s.ocf") as reader:
        assert "0/mu/hidden/kernel/.value" in reader
        graph = reader.object_graph
        assert graph is not None
        assert not any(node.slots for node in graph.nodes)
    restored = ocf.jax.restore(jax.eval_shape(lambda: state["opt_state"]), tmp_path / "s.ocf")
    assert leaf_bytes(restored) == leaf_bytes(state["opt_state"])


def test_moments_link_to_the_subtree_named_params_when_two_trees_match(
        tmp_path: Path) -> None:
    state = fresh_state(0)
    tree = {"ema": jax.tree_util.tree_map(lambda x: x * 2, state["params"]), **state}
    ocf.jax.save(tree, tmp_path / "s.ocf")
    with ocf.open(tmp_path / "s.ocf") as reader:
        assert "opt_state/0/.slot/params/out/bias/nu/.value" in reader
        assert "ema/out/bias/.value" in reader


def test_chained_optimizer_and_flax_train_state_restore_with_slots(tmp_path: Path) -> None:
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3),
                     optax.trace(decay=0.9))
    params = MODEL.init(jax.random.PRNGKey(0), jnp.ones((1, 4)))["params"]
    state = train_state.TrainState.create(apply_fn=MODEL.apply, params=params, tx=tx)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    state = state.apply_gradients(grads=grads).apply_gradients(grads=grads)
    ocf.jax.save(state, tmp_path / "ts.ocf")
    with ocf.open(tmp_path / "ts.ocf") as reader:
        keys = set(reader)
    assert "opt_state/1/0/.slot/params/out/kernel/mu/.value" in keys
    assert "opt_state/2/.slot/params/hidden/bias/trace/.value" in keys
    blank = train_state.TrainState.create(
        apply_fn=MODEL.apply, params=MODEL.init(jax.random.PRNGKey(9), jnp.ones((1, 4)))
        ["params"], tx=tx)
    restored = ocf.jax.restore(blank, tmp_path / "ts.ocf")
    assert int(restored.step) == 2
    assert restored.apply_fn is blank.apply_fn  # static fields come from the target
    assert restored.tx is tx
    assert leaf_bytes(restored) == leaf_bytes(state)


# -- tree kinds ------------------------------------------------------------------------------


class Pair(NamedTuple):
    left: Any
    right: Any


@flax_struct.dataclass
class Record:
    weights: Any
    count: int
    name: str = flax_struct.field(pytree_node=False, default="fixed")


def test_containers_scalars_and_none_round_trip_with_their_types(tmp_path: Path) -> None:
    tree = {
        "list": [jnp.arange(3), 7, None, "text"],
        "tuple": (jnp.ones(2, jnp.bfloat16), 2.5),
        "pair": Pair(jnp.zeros((2, 2)), True),
        "record": Record(weights={"w": jnp.full((3,), 4.0)}, count=11),
        "numpy": np.arange(4, dtype=np.int16),
        "np_scalar": np.float32(1.5),
        "odd/key.": jnp.array(1),
    }
    ocf.jax.save(tree, tmp_path / "t.ocf")
    target = {
        "list": [jnp.zeros(3, jnp.int32), 0, None, "other"],
        "tuple": (jnp.zeros(2, jnp.bfloat16), 0.0),
        "pair": Pair(jnp.ones((2, 2)), False),
        "record": Record(weights={"w": jnp.zeros(3)}, count=0),
        "numpy": np.zeros(4, dtype=np.int16),
        "np_scalar": np.float32(0),
        "odd/key.": jnp.array(0),
    }
    out = ocf.jax.restore(target, tmp_path / "t.ocf")
    assert out["list"][1:] == [7, None, "other"]  # numbers restored, strings kept
    assert out["tuple"][1] == 2.5
    assert out["tuple"][0].dtype == ml_dtypes.bfloat16
    assert isinstance(out["pair"], Pair)
    assert out["pair"].right is True
    assert isinstance(out["record"], Record)
    assert out["record"].count == 11
    assert isinstance(out["numpy"], np.ndarray)
    assert isinstance(out["np_scalar"], np.float32)
    assert isinstance(out["list"][0], jax.Array)
    assert leaf_bytes(out) == leaf_bytes({**tree, "list": [*tree["list"][:3], "other"]})


def test_numbers_saved_as_metadata_restore_into_zero_d_abstract_leaves(
        tmp_path: Path) -> None:
    ocf.jax.save({"step": 12, "w": jnp.ones(2)}, tmp_path / "t.ocf")
    out = ocf.jax.restore(jax.eval_shape(lambda: {"step": 0, "w": jnp.zeros(2)}),
                          tmp_path / "t.ocf")
    assert out["step"].dtype == jnp.int32
    assert int(out["step"]) == 12


def test_restored_leaves_are_new_arrays_and_the_target_is_untouched(tmp_path: Path) -> None:
    ocf.jax.save({"w": jnp.ones(3)}, tmp_path / "t.ocf")
    target = {"w": jnp.zeros(3)}
    out = ocf.jax.restore(target, tmp_path / "t.ocf")
    assert out["w"] is not target["w"]
    np.testing.assert_array_equal(target["w"], np.zeros(3))
    np.testing.assert_array_equal(out["w"], np.ones(3))


# -- mismatches -------------------------------------------------------------------------------


def test_shape_mismatch_names_the_leaf_and_both_shapes(tmp_path: Path) -> None:
    ocf.jax.save({"layer": {"kernel": jnp.ones((2, 3))}}, tmp_path / "t.ocf")
    with pytest.raises(ocf.InvalidError, match=r"'layer/kernel' is float32 \[3, 2\], the "
                       r"checkpoint holds float32 \[2, 3\]"):
        ocf.jax.restore({"layer": {"kernel": jnp.ones((3, 2))}}, tmp_path / "t.ocf")


def test_dtype_mismatch_is_an_error(tmp_path: Path) -> None:
    ocf.jax.save({"w": jnp.ones(2, jnp.float32)}, tmp_path / "t.ocf")
    with pytest.raises(ocf.InvalidError, match="bfloat16"):
        ocf.jax.restore({"w": jnp.ones(2, jnp.bfloat16)}, tmp_path / "t.ocf")


def test_missing_and_extra_leaves_are_named_unless_partial(tmp_path: Path) -> None:
    ocf.jax.save({"a": jnp.ones(2), "old": jnp.ones(1)}, tmp_path / "t.ocf")
    target = {"a": jnp.zeros(2), "new": jnp.full(1, 5.0)}
    with pytest.raises(ocf.InvalidError, match="received no value: 'new'"):
        ocf.jax.restore(target, tmp_path / "t.ocf")
    with pytest.raises(ocf.InvalidError, match="matched no leaf of the target: 'old'"):
        ocf.jax.restore({"a": jnp.zeros(2)}, tmp_path / "t.ocf")
    out = ocf.jax.restore(target, tmp_path / "t.ocf", partial=True)
    np.testing.assert_array_equal(out["a"], np.ones(2))
    np.testing.assert_array_equal(out["new"], [5.0])  # kept from the target


def test_abstract_leaf_without_value_is_an_error_even_when_partial(tmp_path: Path) -> None:
    ocf.jax.save({"a": jnp.ones(2)}, tmp_path / "t.ocf")
    target = {"a": jax.ShapeDtypeStruct((2,), jnp.float32),
              "b": jax.ShapeDtypeStruct((1,), jnp.float32)}
    with pytest.raises(ocf.InvalidError, match=r"abstract leaves .* 'b'"):
        ocf.jax.restore(target, tmp_path / "t.ocf", partial=True)


def test_saving_an_abstract_tree_or_an_unknown_leaf_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match="abstract leaf 'w'"):
        ocf.jax.save({"w": jax.ShapeDtypeStruct((2,), jnp.float32)}, tmp_path / "a.ocf")
    with pytest.raises(ocf.InvalidError, match="x: a leaf of type object"):
        ocf.jax.save({"x": object()}, tmp_path / "b.ocf")


def test_restore_starts_at_a_named_object_of_a_larger_checkpoint(tmp_path: Path) -> None:
    extra = ocf.Variable(np.arange(3))
    path = ocf.Checkpoint(state=ocf.jax.TreeState({"w": jnp.ones(2)}), extra=extra).save(
        tmp_path / "ck")
    out = ocf.jax.restore({"w": jnp.zeros(2)}, path, start="state")
    np.testing.assert_array_equal(out["w"], np.ones(2))


def test_tree_state_restore_status_names_unmatched_leaves(tmp_path: Path) -> None:
    path = ocf.Checkpoint(state=ocf.jax.TreeState({"a": jnp.ones(2)})).save(tmp_path / "ck")
    holder = ocf.jax.TreeState({"a": jnp.zeros(2), "b": jnp.zeros(1)})
    status = ocf.Checkpoint(state=holder).restore(path, partial=True)
    with pytest.raises(ocf.RestoreMismatchError, match="state/b"):
        status.assert_existing_objects_matched()
    np.testing.assert_array_equal(holder.tree["a"], np.ones(2))


# -- flat files ------------------------------------------------------------------------------


def test_checkpoint_without_graph_restores_by_tree_path_through_a_name_map(
        tmp_path: Path) -> None:
    ocf.jax.save_file({"model.dense.kernel": jnp.ones((2, 3)), "model.dense.bias": jnp.ones(3),
                       "unused": jnp.ones(1)}, tmp_path / "flat.ocf")
    target = {"dense": {"kernel": jax.ShapeDtypeStruct((2, 3), jnp.float32),
                        "bias": jax.ShapeDtypeStruct((3,), jnp.float32)}}

    def to_key(path: str) -> str:
        return path.replace("/", ".")

    out = ocf.jax.restore(target, tmp_path / "flat.ocf", start="model", name_map=to_key,
                          partial=True)
    np.testing.assert_array_equal(out["dense"]["kernel"], np.ones((2, 3)))
    with pytest.raises(ocf.InvalidError, match="matched no leaf of the target: 'unused'"):
        ocf.jax.restore(target, tmp_path / "flat.ocf", start="model", name_map=to_key)


# -- packaging --------------------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)


def test_importing_ocf_does_not_import_jax() -> None:
    done = run_python("import sys, ocf, ocf.interop.registry, ocf.cli.main\n"
                      "assert 'jax' not in sys.modules, 'jax imported'\n")
    assert done.returncode == 0, done.stderr


def test_ocf_jax_without_jax_names_the_extra_to_install() -> None:
    done = run_python("import sys\nsys.modules['jax'] = None\nimport ocf.jax\n")
    assert done.returncode != 0
    assert "pip install 'ocf[jax]'" in done.stderr
