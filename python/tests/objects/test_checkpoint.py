"""Object-based checkpoints: the scenarios of the seeds (000, 002, 003)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pytest

import ocf
from ocf.format.object_graph import Node


class Dense(ocf.Module):
    """A layer that builds its variables on first call, as Keras layers do."""

    def __init__(self, units: int, name: str = "dense") -> None:
        self.units = units
        self.name = name

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if not hasattr(self, "kernel"):
            self.kernel = ocf.Variable(np.zeros((x.shape[-1], self.units), np.float32))
            self.bias = ocf.Variable(np.zeros(self.units, np.float32))
        result: np.ndarray = x @ self.kernel.value + self.bias.value
        return result


class Momentum(ocf.Module):
    """SGD with momentum: one slot variable per variable it has updated."""

    def __init__(self, learning_rate: float = 0.1) -> None:
        self.learning_rate = learning_rate
        self.iterations = 0
        self._slots: dict[int, tuple[ocf.Variable, np.ndarray]] = {}

    def ocf_slots(self) -> Iterable[tuple[object, str, object]]:
        return [(variable, "momentum", slot) for variable, slot in self._slots.values()]

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        assert isinstance(variable, ocf.Variable)
        assert name == "momentum"
        self._slots[id(variable)] = (variable, values["value"].copy())

    def apply(self, variables: list[ocf.Variable], grads: list[np.ndarray]) -> None:
        self.iterations += 1
        for variable, grad in zip(variables, grads):
            _, slot = self._slots.setdefault(id(variable),
                                             (variable, np.zeros_like(variable.value)))
            slot *= 0.9
            slot += grad
            variable.value -= self.learning_rate * slot

    def slot(self, variable: ocf.Variable) -> np.ndarray | None:
        entry = self._slots.get(id(variable))
        return None if entry is None else entry[1]


X = np.ones((1, 1), np.float32)


def trained_dense() -> Dense:
    dense = Dense(2)
    dense(X)
    dense.kernel.value[...] = [[1.0, 2.0]]
    dense.bias.value[...] = [3.0, 4.0]
    return dense


def test_values_restore_by_structure_into_differently_named_lazy_layers(tmp_path: Path) -> None:
    save_path = ocf.Checkpoint(dense=trained_dense()).save(tmp_path / "ckpt")
    assert save_path == str(tmp_path / "ckpt-1")
    second = Dense(2, name="dense_1")  # another name, and no variables yet
    status = ocf.Checkpoint(dense=second).restore(save_path, partial=True)
    second(X)  # builds kernel and bias: restore-on-create fills them
    assert second.kernel.value.tolist() == [[1.0, 2.0]]
    assert second.bias.value.tolist() == [3.0, 4.0]
    assert second.name == "dense_1"  # strings are configuration, not restored
    status.assert_consumed()


def _open_files_below(directory: Path) -> list[str]:
    """Files below ``directory`` this process holds open, as the kernel lists them."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc/self/fd to see open files")
    targets = []
    for fd in fds.iterdir():
        try:
            targets.append(str(fd.readlink()))
        except OSError:  # closed since it was listed (the directory's own fd)
            continue
    return sorted(t for t in targets if t.startswith(str(directory)))


def test_restore_waiting_for_a_child_keeps_no_file_open(tmp_path: Path) -> None:
    save_path = ocf.Checkpoint(dense=trained_dense()).write(tmp_path / "ckpt.ocf")
    second = Dense(2)
    status = ocf.Checkpoint(dense=second).restore(save_path, partial=True)
    assert _open_files_below(tmp_path) == []  # closed though kernel and bias still wait
    second(X)  # restore-on-create opens the checkpoint again, and closes it
    assert second.kernel.value.tolist() == [[1.0, 2.0]]
    assert _open_files_below(tmp_path) == []
    status.assert_consumed()


def test_failed_restore_closes_the_checkpoint(tmp_path: Path) -> None:
    save_path = ocf.Checkpoint(dense=trained_dense()).write(tmp_path / "ckpt.ocf")
    wrong = Dense(3)
    wrong(X)  # a kernel of shape (1, 3), the checkpoint's is (1, 2)
    with pytest.raises(ocf.InvalidError):
        ocf.Checkpoint(dense=wrong).restore(save_path)
    assert _open_files_below(tmp_path) == []


def test_restore_on_create_refuses_a_checkpoint_replaced_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.ocf"
    ocf.Checkpoint(dense=trained_dense()).write(path)
    second = Dense(2)
    ocf.Checkpoint(dense=second).restore(path, partial=True)
    newer = trained_dense()
    newer.bias.value[...] = [5.0, 6.0]
    ocf.Checkpoint(dense=newer).write(path)  # same structure, other values

    with pytest.raises(ocf.InvalidError, match="replaced since the restore began") as caught:
        second(X)
    assert caught.value.path == str(path)
    assert _open_files_below(tmp_path) == []


def test_assert_consumed_names_the_paths_still_waiting_for_their_objects(tmp_path: Path
                                                                         ) -> None:
    save_path = ocf.Checkpoint(dense=trained_dense()).save(tmp_path / "ckpt")
    status = ocf.Checkpoint(dense=Dense(2)).restore(save_path, partial=True)
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        status.assert_consumed()
    assert "'dense/bias'" in str(caught.value)
    assert "'dense/kernel'" in str(caught.value)
    status.assert_existing_objects_matched()  # nothing that exists lacks a value
    status.expect_partial()


def test_save_counter_numbers_checkpoints_and_is_restored(tmp_path: Path) -> None:
    checkpoint = ocf.Checkpoint(dense=trained_dense())
    paths = [checkpoint.save(tmp_path / "ckpt") for _ in range(3)]
    assert [Path(p).name for p in paths] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    resumed = ocf.Checkpoint(dense=Dense(2))
    resumed.restore(paths[1], partial=True).expect_partial()
    assert resumed.save_counter == 2
    assert Path(resumed.save(tmp_path / "ckpt")).name == "ckpt-3"


def test_write_uses_the_exact_path_and_does_not_count(tmp_path: Path) -> None:
    checkpoint = ocf.Checkpoint(dense=trained_dense())
    assert checkpoint.write(tmp_path / "weights.ocf") == str(tmp_path / "weights.ocf")
    assert checkpoint.save_counter == 0


def train_step(model: Dense, optimizer: Momentum) -> None:
    model(X)
    optimizer.apply([model.kernel, model.bias], [np.full((1, 2), 0.5, np.float32),
                                                 np.full(2, 0.25, np.float32)])


@pytest.mark.parametrize("optimizer_first", [True, False])
def test_slot_variables_are_restored_whichever_of_optimizer_and_variable_comes_first(
    tmp_path: Path, optimizer_first: bool,
) -> None:
    model, optimizer = Dense(2), Momentum()
    train_step(model, optimizer)
    train_step(model, optimizer)
    save_path = ocf.Checkpoint(model=model, optimizer=optimizer).save(tmp_path / "ckpt")

    new_model, new_optimizer = Dense(2, name="other"), Momentum()
    if optimizer_first:
        checkpoint = ocf.Checkpoint(optimizer=new_optimizer)
        status = checkpoint.restore(save_path, partial=True)
        checkpoint.model = new_model  # attached later: restored on attach
        new_model(X)
    else:
        new_model(X)
        checkpoint = ocf.Checkpoint(model=new_model)
        status = checkpoint.restore(save_path, partial=True)
        checkpoint.optimizer = new_optimizer
    status.assert_consumed()
    assert new_optimizer.iterations == 2
    for old, new in [(model.kernel, new_model.kernel), (model.bias, new_model.bias)]:
        assert np.array_equal(new.value, old.value)
        assert np.array_equal(new_optimizer.slot(new), optimizer.slot(old))


def test_restoring_only_the_model_leaves_the_optimizer_unmatched(tmp_path: Path) -> None:
    model, optimizer = Dense(2), Momentum()
    train_step(model, optimizer)
    save_path = ocf.Checkpoint(model=model, optimizer=optimizer).save(tmp_path / "ckpt")
    new_model = Dense(2)
    new_model(X)
    status = ocf.Checkpoint(model=new_model).restore(save_path, partial=True)
    status.assert_existing_objects_matched()
    with pytest.raises(ocf.RestoreMismatchError, match="'optimizer'"):
        status.assert_consumed()
    assert np.array_equal(new_model.kernel.value, model.kernel.value)


def test_a_checkpoint_with_another_root_restores_from_a_named_start(tmp_path: Path) -> None:
    save_path = ocf.Checkpoint(model=trained_dense()).save(tmp_path / "ckpt")
    bare = Dense(2)
    bare(X)
    ocf.restore(bare, save_path, start="model").assert_consumed()
    assert bare.kernel.value.tolist() == [[1.0, 2.0]]
    # and the reverse: weights saved with the model as root, restored under a Checkpoint
    weights = ocf.write(trained_dense(), tmp_path / "weights.ocf")
    holder = Dense(2)
    holder(X)
    ocf.restore(holder, weights).assert_consumed()
    assert holder.bias.value.tolist() == [3.0, 4.0]
    with pytest.raises(ocf.NotFoundError, match="'nope'"):
        ocf.restore(bare, save_path, start="nope")


def test_object_based_checkpoints_are_readable_by_name(tmp_path: Path) -> None:
    save_path = ocf.Checkpoint(model=trained_dense()).save(tmp_path / "ckpt")
    assert ocf.load_variable(save_path, "model/kernel/.value").tolist() == [[1.0, 2.0]]
    assert [name for name, _, _ in ocf.list_variables(save_path)] == [
        "model/bias/.value", "model/kernel/.value", "save_counter/.value"]


def test_a_name_based_checkpoint_restores_into_objects_through_a_name_map(tmp_path: Path
                                                                          ) -> None:
    path = ocf.Saver({"dense/kernel": np.array([[5.0, 6.0]], np.float32),
                      "dense/bias": np.array([7.0, 8.0], np.float32)}).save(tmp_path / "v1.ocf")
    model = Dense(2)
    model(X)
    names = {"kernel/.value": "dense/kernel", "bias/.value": "dense/bias"}
    ocf.restore(model, path, name_map=names).assert_consumed()
    assert model.kernel.value.tolist() == [[5.0, 6.0]]
    partial = Dense(2)
    partial(X)
    kernel_only = {"kernel/.value": "dense/kernel"}
    with pytest.raises(ocf.RestoreMismatchError, match="dense/bias"):
        ocf.restore(partial, path, name_map=kernel_only)  # strict: the bias is left over
    assert partial.kernel.value.tolist() != [[5.0, 6.0]]  # and nothing was restored
    status = ocf.restore(partial, path, name_map=lambda key: names.get(key) if "kernel" in key
                         else None, partial=True)
    with pytest.raises(ocf.RestoreMismatchError, match="dense/bias"):
        status.assert_consumed()


def test_containers_arrays_and_scalars_restore_in_place(tmp_path: Path) -> None:
    state = {"weights": [np.arange(3.0), np.ones((2, 2))], "step": 7, "lr": 0.5,
             "pair": (np.zeros(2, np.int32), 1), "name": "run-1"}
    ocf.write(state, tmp_path / "s.ocf")
    fresh = {"weights": [np.zeros(3), np.zeros((2, 2))], "step": 0, "lr": 0.0,
             "pair": (np.ones(2, np.int32), 1), "name": "run-1"}
    weights_before = fresh["weights"][0]
    ocf.restore(fresh, str(tmp_path / "s.ocf")).assert_consumed()
    assert fresh["weights"][0] is weights_before  # in place
    assert fresh["weights"][0].tolist() == [0.0, 1.0, 2.0]
    assert fresh["step"] == 7
    assert fresh["lr"] == 0.5
    assert fresh["pair"][0].tolist() == [0, 0]


def test_shared_objects_are_one_node_restored_once(tmp_path: Path) -> None:
    shared = ocf.Variable(np.arange(4.0))
    root = {"a": shared, "b": [shared], "c": {"again": shared}}
    ocf.write(root, tmp_path / "s.ocf")
    with ocf.open(tmp_path / "s.ocf") as reader:
        assert list(reader) == ["a/.value"]
        assert reader.object_graph is not None
        # root, "a" (the variable, shared), "b" (the list), "c" (the dict)
        assert len(reader.object_graph.nodes) == 4
    target = ocf.Variable(np.zeros(4))
    fresh = {"a": target, "b": [target], "c": {"again": target}}
    ocf.restore(fresh, str(tmp_path / "s.ocf")).assert_consumed()
    assert target.value.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_cycles_are_saved_and_restored(tmp_path: Path) -> None:
    parent = ocf.Module()
    parent.child = ocf.Module()
    parent.child.back = parent  # a cycle
    parent.child.weight = ocf.Variable(np.ones(2))
    ocf.write(parent, tmp_path / "c.ocf")
    copy = ocf.Module()
    copy.child = ocf.Module()
    copy.child.back = copy
    copy.child.weight = ocf.Variable(np.zeros(2))
    ocf.restore(copy, str(tmp_path / "c.ocf")).assert_consumed()
    assert copy.child.weight.value.tolist() == [1.0, 1.0]


def test_a_value_of_another_shape_is_refused(tmp_path: Path) -> None:
    ocf.write({"w": np.zeros(3)}, tmp_path / "s.ocf")
    with pytest.raises(ocf.InvalidError, match="shape"):
        ocf.restore({"w": np.zeros(4)}, str(tmp_path / "s.ocf"))


def test_slots_of_untracked_variables_are_refused_at_save(tmp_path: Path) -> None:
    optimizer = Momentum()
    optimizer.apply([ocf.Variable(np.zeros(2))], [np.ones(2)])
    with pytest.raises(ocf.InvalidError, match="not part of the saved objects"):
        ocf.Checkpoint(optimizer=optimizer).save(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []


class Centimeters(np.ndarray):
    """An array subclass with its own tensors: stored in meters, not as ``value``."""

    ocf_type_name = "tests.Centimeters"

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {"meters": np.asarray(self) / 100}

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        np.asarray(self)[...] = values["meters"] * 100


class Labelled(np.ndarray):
    """An array subclass adding metadata only; its values are left to the array adapter."""

    label = ""

    def ocf_metadata(self) -> Mapping[str, object]:
        return {"label": self.label}

    def ocf_restore_metadata(self, values: Mapping[str, object]) -> None:
        self.label = str(values["label"])


def stored_node(reader: ocf.Reader, name: str) -> Node:
    """The node of the checkpoint's object graph under the root's edge ``name``."""
    graph = reader.object_graph
    assert graph is not None
    index = graph.node_at([name])
    assert index is not None
    return graph.nodes[index]


def test_own_protocol_methods_win_over_the_adapter_of_a_base_class(tmp_path: Path) -> None:
    length = np.array([150.0, 20.0]).view(Centimeters)
    ocf.write({"length": length}, tmp_path / "s.ocf")
    with ocf.open(tmp_path / "s.ocf") as reader:
        assert list(reader) == ["length/.meters"]  # not the array adapter's ".value"
        assert reader.get_tensor("length/.meters").tolist() == [1.5, 0.2]
        node = stored_node(reader, "length")
        assert node.type_name == "tests.Centimeters"
    fresh = np.zeros(2).view(Centimeters)
    ocf.restore({"length": fresh}, str(tmp_path / "s.ocf")).assert_consumed()
    assert fresh.tolist() == [150.0, 20.0]


def test_the_adapter_still_provides_the_parts_an_object_does_not_define(tmp_path: Path
                                                                       ) -> None:
    scores = np.array([1, 2, 3], np.int32).view(Labelled)
    scores.label = "epoch-3"
    ocf.write({"scores": scores}, tmp_path / "s.ocf")
    with ocf.open(tmp_path / "s.ocf") as reader:
        assert list(reader) == ["scores/.value"]  # the array adapter's tensor
        node = stored_node(reader, "scores")
        assert node.metadata == {"label": "epoch-3"}
        assert node.type_name == "numpy.ndarray"  # the adapter's: Labelled names none
    fresh = np.zeros(3, np.int32).view(Labelled)
    ocf.restore({"scores": fresh}, str(tmp_path / "s.ocf")).assert_consumed()
    assert (fresh.tolist(), fresh.label) == ([1, 2, 3], "epoch-3")


# -- property: random object graphs round-trip ------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_leaf = st.one_of(
    st.integers(0, 5).map(lambda n: np.arange(n, dtype=np.float32) * 1.5),
    st.integers(1, 4).map(lambda n: ocf.Variable(np.full((n, 2), n, np.int64))),
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=32),
)


def _containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    names = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1,
                    max_size=6)
    return st.one_of(st.lists(children, max_size=4), st.dictionaries(names, children,
                                                                       max_size=4),
                     st.dictionaries(st.sampled_from(["a", "b", "c"]), children,
                                     max_size=3).map(_module))


def _module(attributes: dict[str, object]) -> ocf.Module:
    module = ocf.Module()
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def _clone(obj: object, memo: dict[int, object]) -> object:
    """The same structure (sharing included) with every array zeroed."""
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, np.ndarray):
        copy: object = np.zeros_like(obj)
    elif isinstance(obj, ocf.Variable):
        copy = ocf.Variable(np.zeros_like(obj.value))
    elif isinstance(obj, list):
        copy = []
        memo[id(obj)] = copy
        copy.extend(_clone(x, memo) for x in obj)
    elif isinstance(obj, dict):
        copy = {}
        memo[id(obj)] = copy
        copy.update({k: _clone(v, memo) for k, v in obj.items()})
    elif isinstance(obj, ocf.Module):
        copy = ocf.Module()
        memo[id(obj)] = copy
        for k, v in vars(obj).items():
            setattr(copy, k, _clone(v, memo))
    else:
        copy = 0 if isinstance(obj, int) else 0.0 if isinstance(obj, float) else obj
    memo[id(obj)] = copy
    return copy


def _arrays(obj: object, seen: set[int]) -> list[np.ndarray]:
    """Every array and Python number under ``obj``, in traversal order."""
    if isinstance(obj, (int, float)):
        return [np.array(obj)]
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, ocf.Variable):
        return [obj.value]
    items = obj.values() if isinstance(obj, dict) else vars(obj).values() \
        if isinstance(obj, ocf.Module) else obj if isinstance(obj, list) else []
    return [a for x in items for a in _arrays(x, seen)]


@settings(max_examples=60, deadline=None)
@given(tree=st.recursive(_leaf, _containers, max_leaves=12), share=st.booleans())
def test_random_object_graphs_restore_bit_exactly_into_fresh_copies(
    tmp_path_factory: pytest.TempPathFactory, tree: object, share: bool,
) -> None:
    shared = ocf.Variable(np.arange(3, dtype=np.float64))
    root = {"tree": tree, "x": shared, "y": [shared, {"z": shared}] if share else []}
    path = tmp_path_factory.mktemp("graph") / "g.ocf"
    ocf.write(root, path)
    fresh = _clone(root, {})
    ocf.restore(fresh, str(path)).assert_consumed()
    before, after = _arrays(root, set()), _arrays(fresh, set())
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()


def test_checkpoint_manager_keeps_the_newest_and_resumes_a_fresh_program(tmp_path: Path
                                                                          ) -> None:
    model, optimizer = Dense(2), Momentum()
    manager = ocf.CheckpointManager(ocf.Checkpoint(model=model, optimizer=optimizer),
                                    tmp_path, max_to_keep=2)
    for _ in range(4):
        train_step(model, optimizer)
        manager.save()
    assert [Path(p).name for p in manager.checkpoints] == ["ckpt-3", "ckpt-4"]
    assert ocf.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-4")

    fresh_model, fresh_optimizer = Dense(2, name="fresh"), Momentum()
    manager.close()  # the first program ends
    fresh = ocf.CheckpointManager(ocf.Checkpoint(model=fresh_model, optimizer=fresh_optimizer),
                                  tmp_path, max_to_keep=2)
    # partial: the fresh model builds its weights (and receives them) on first use.
    assert fresh.restore_or_initialize(partial=True) == str(tmp_path / "ckpt-4")
    fresh_model(X)
    assert np.array_equal(fresh_model.kernel.value, model.kernel.value)
    assert fresh_optimizer.iterations == 4
    assert Path(fresh.save()).name == "ckpt-5"  # numbering continues from the restored counter


class _Untracked:
    """An object OCF has no adapter for, as a framework's module is before its adapter
    is imported."""


def test_a_keyword_that_would_save_nothing_is_refused_naming_it() -> None:
    with pytest.raises(ocf.InvalidError, match=r"Checkpoint\(model=\.\.\.\): a .*_Untracked "
                                               r"is neither trackable nor a scalar"):
        ocf.Checkpoint(model=_Untracked())


def test_scalars_and_trackable_keywords_are_still_taken() -> None:
    checkpoint = ocf.Checkpoint(step=3, name=None, weights=np.zeros(2, np.float32))
    assert checkpoint.step == 3
    assert checkpoint.name is None


def test_a_torch_module_passed_before_its_adapter_is_imported_names_the_adapter() -> None:
    # A fresh process: this test session may already have imported ocf.torch.
    program = "import ocf, torch\nocf.Checkpoint(model=torch.nn.Linear(2, 2))\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 1
    assert "Checkpoint(model=...): a torch.nn.modules.linear.Linear is neither trackable" \
        in result.stderr
    assert "import ocf.torch first" in result.stderr


def test_a_jax_array_outside_a_tree_state_is_refused_saying_where_it_goes() -> None:
    import jax.numpy as jnp  # the test environment has JAX (scripts/setup.sh)

    with pytest.raises(ocf.InvalidError, match=r"Checkpoint\(w=\.\.\.\): a jax.*ArrayImpl "
                                               r"is neither trackable.*ocf\.jax\.TreeState"):
        ocf.Checkpoint(w=jnp.zeros(3))


@pytest.mark.parametrize(("value", "named"), [
    ([np.zeros(2), _Untracked()], r"Checkpoint\(model=\.\.\.\)\[1\]: a .*_Untracked"),
    ({"layers": ({"w": _Untracked()},)}, r"\['layers'\]\[0\]\['w'\]: a .*_Untracked"),
    ({0: np.zeros(2)}, r"Checkpoint\(model=\.\.\.\): the key 0 is not a string"),
])
def test_a_part_of_a_dict_or_list_that_would_save_nothing_is_refused_naming_where(
        value: object, named: str) -> None:
    with pytest.raises(ocf.InvalidError, match=named):
        ocf.Checkpoint(model=value)


def test_dicts_and_lists_of_arrays_and_scalars_are_taken_and_saved(tmp_path: Path) -> None:
    state = {"layers": [np.arange(3.0), {"bias": np.ones(2)}], "step": 7, "name": "run"}
    path = ocf.Checkpoint(model=state).save(tmp_path / "ckpt")
    restored = {"layers": [np.zeros(3), {"bias": np.zeros(2)}], "step": 0, "name": ""}
    ocf.Checkpoint(model=restored).restore(path).assert_consumed()
    np.testing.assert_array_equal(restored["layers"][0], np.arange(3.0))
    np.testing.assert_array_equal(restored["layers"][1]["bias"], np.ones(2))
    assert restored["step"] == 7
