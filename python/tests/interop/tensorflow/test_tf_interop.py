"""TensorFlow checkpoints as OCF checkpoints: object graphs, conversion, restore, CLI.

Every TensorFlow checkpoint here is written by real TensorFlow (tensorflow-cpu
2.21, Keras 3) in tf_scenarios.py, and every expected value is what
TensorFlow itself read (``tf.train.load_checkpoint``) or held (Keras
predictions, optimizer slots). TensorFlow is imported only in the one
TensorFlow process of the session (tf_support.run, shared with the
test_tf_bundle_*.py files): it builds the scenarios, then reads and restores
what OCF wrote. The tests themselves run OCF without TensorFlow, and one of
them in a process where TensorFlow cannot be imported at all.

The bundle layer (SSTable, dtypes, shards, partitioned tensors, hostile
bundles) has its own tests in the test_tf_bundle_*.py files; here are the scenarios.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tf_support
from cli_support import run
from repo_paths import TESTS_DIR
from tf_scenarios import BIG_INDEX_KEYS, DICT_KEYS, KERAS_INPUT, SHARD_LIMIT, decode

import ocf
from ocf.format.errors import (
    IntegrityError,
    InvalidError,
    MalformedError,
    NotFoundError,
)
from ocf.interop.tensorflow.convert import from_ocf, to_ocf
from ocf.interop.tensorflow.objects import (
    to_ocf_attribute,
    to_ocf_name,
    to_tf_attribute,
    to_tf_name,
)
from ocf.interop.tensorflow.source import TFSource
from ocf.tensorflow import BundleReader, BundleWriter
from ocf.tensorflow.v1.trackable_object_graph_pb2 import TrackableObjectGraph

TESTS = TESTS_DIR
GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VALUE_KEY = ".ATTRIBUTES/VARIABLE_VALUE"
READABLE = ("keras", "module", "slots", "v1_saver", "sharded", "big_index")
# Converted to OCF and back, then read (and some restored) by TensorFlow.
ROUND_TRIP = (*READABLE, "exotic")
# What TensorFlow's reader returns for its quantized dtypes (plain integers).
QUANTIZED_AS = {"qint8": "int8", "quint8": "uint8", "qint32": "int32"}


def run_tensorflow(*args: str) -> None:
    """tf_scenarios.py's ``build`` or ``check``, in the TensorFlow process the
    test_tf_bundle_*.py files use too (tf_support.run), so the session imports
    TensorFlow once."""
    tf_support.run(f"scenarios-{args[0]}", *args[1:])


def same(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Bit-exact equality: dtype, shape and bytes (NaNs and signed zeros included)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if expected.dtype == object:
        return bool(actual.tolist() == expected.tolist())
    return np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes()


def assert_values(actual: Mapping[str, np.ndarray], expected: Mapping[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    wrong = [key for key in expected if not same(actual[key], decode(expected[key]))]
    assert not wrong, f"values differ from TensorFlow's: {wrong[:5]}"


# -- TensorFlow's checkpoints, built once per session ------------------------------------


@dataclass
class Built:
    root: Path
    scenarios: dict[str, Any]

    def prefix(self, name: str) -> str:
        return str(self.scenarios[name]["prefix"])

    def values(self, name: str) -> dict[str, Any]:
        return dict(self.scenarios[name]["values"])

    def converted(self, name: str) -> Path:
        """The scenario converted to OCF (once)."""
        path = self.root / "ocf" / f"{name}.ocf"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            to_ocf(self.prefix(name), path)
        return path


@pytest.fixture(scope="session")
def tf_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("tf")
    run_tensorflow("build", str(root))
    return Built(root, json.loads((root / "expected.json").read_text()))


# -- OCF's own training state, for OCF -> TensorFlow --------------------------------------


class NumpyAdam(ocf.Module):
    """An optimizer keeping Adam's slots ``m`` and ``v`` per variable, and the two
    accumulators tf.compat.v1's Adam keeps as its own variables."""

    def __init__(self) -> None:
        self.learning_rate = 0.1
        self.beta1_power = ocf.Variable(np.float32(0.9**3))
        self.beta2_power = ocf.Variable(np.float32(0.999**3))
        self._slots: dict[int, tuple[object, dict[str, np.ndarray]]] = {}

    def set_slot(self, variable: object, name: str, value: np.ndarray) -> None:
        self._slots.setdefault(id(variable), (variable, {}))[1][name] = value

    def slot(self, variable: object, name: str) -> np.ndarray:
        return self._slots[id(variable)][1][name]

    def ocf_slots(self) -> Iterable[tuple[object, str, object]]:
        for variable, slots in self._slots.values():
            for name, value in slots.items():
                yield variable, name, value

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        self.set_slot(variable, name, values["value"].copy())


def numpy_training_state(zero: bool = False) -> ocf.Checkpoint:
    """A model with one dense layer and an Adam with slots, shaped like the "slots"
    scenario's TensorFlow objects; ``zero`` leaves every value zero and no slots."""
    fill = np.zeros_like if zero else (lambda a: a)
    model = ocf.Module()
    model.dense = ocf.Module()
    model.dense.kernel = ocf.Variable(fill(np.arange(6, dtype=np.float32).reshape(2, 3) / 3))
    model.dense.bias = ocf.Variable(fill(np.array([0.5, -0.25, 2.0], np.float32)))
    optimizer = NumpyAdam()
    if zero:
        optimizer.beta1_power.value[...] = 0
        optimizer.beta2_power.value[...] = 0
    else:
        for i, variable in enumerate((model.dense.kernel, model.dense.bias)):
            optimizer.set_slot(variable, "m", np.full_like(variable.value, 0.125 * (i + 1)))
            optimizer.set_slot(variable, "v", np.full_like(variable.value, 1e-3 * (i + 1)))
    return ocf.Checkpoint(model=model, optimizer=optimizer)


NATIVE_SLOT_KEYS = {  # the keys TensorFlow derives for these objects (trackable_utils.py)
    "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE",
    "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE",
    "model/dense/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
    "model/dense/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
    "model/dense/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
    "model/dense/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
    "optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE",
    "optimizer/beta2_power/.ATTRIBUTES/VARIABLE_VALUE",
    "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
}


def native_values(state: ocf.Checkpoint) -> dict[str, np.ndarray]:
    """The native state's arrays under the keys TensorFlow gives the same objects."""
    model, optimizer = state.model, state.optimizer  # type: ignore[attr-defined]
    values = {"save_counter/.ATTRIBUTES/VARIABLE_VALUE": np.array(0, np.int64),
              f"optimizer/beta1_power/{VALUE_KEY}": optimizer.beta1_power.value,
              f"optimizer/beta2_power/{VALUE_KEY}": optimizer.beta2_power.value}
    for name in ("kernel", "bias"):
        variable = getattr(model.dense, name)
        values[f"model/dense/{name}/{VALUE_KEY}"] = variable.value
        for slot in ("m", "v"):
            values[f"model/dense/{name}/.OPTIMIZER_SLOT/optimizer/{slot}/{VALUE_KEY}"] = \
                optimizer.slot(variable, slot)
    return values


# -- what TensorFlow makes of OCF's files, checked once per session ------------------------


@dataclass
class Checked:
    results: dict[str, Any]
    prefixes: dict[str, str]
    native: dict[str, np.ndarray]

    def result(self, name: str) -> dict[str, Any]:
        """What TensorFlow made of job ``name``; fails with TensorFlow's error if it raised."""
        result: dict[str, Any] = self.results[name]
        assert "error" not in result, result.get("error")
        return result


@pytest.fixture(scope="session")
def tf_checked(tf_built: Built) -> Checked:
    """TensorFlow reads back, and restores from, checkpoints OCF's TensorFlow writer wrote:
    every readable scenario converted to OCF and back, and OCF's own training state."""
    out = tf_built.root / "written_by_ocf"
    jobs = []
    prefixes = {}
    for name in ROUND_TRIP:
        prefix = str(out / name / "ckpt")
        # Several data files for the big index too: both are written by OCF here.
        from_ocf(tf_built.converted(name), prefix,
                 max_shard_bytes=4096 if name == "big_index" else None)
        prefixes[name] = prefix
        kind = name if name in ("keras", "module", "slots", "exotic") else "read"
        jobs.append({"name": name, "prefix": prefix, "kind": kind})
    state = numpy_training_state()
    state.write(out / "native.ocf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the optimizer's learning_rate has no place in TF
        from_ocf(out / "native.ocf", out / "native" / "ckpt")
    prefixes["native"] = str(out / "native" / "ckpt")
    jobs.append({"name": "native", "prefix": prefixes["native"], "kind": "slots"})
    (out / "jobs.json").write_text(json.dumps(jobs))
    run_tensorflow("check", str(out / "jobs.json"), str(out))
    return Checked(json.loads((out / "results.json").read_text()), prefixes,
                   native_values(state))


# -- names --------------------------------------------------------------------------


@pytest.mark.parametrize(("tf_name", "ocf_name"), [
    ("kernel", "kernel"), ("a/b", "a%2Fb"), (".hidden", "%2Ehidden"), ("x.y", "x.y"),
    ("per%cent", "per%25cent"), ("", "%"), ("%", "%25"), ("nul\0", "nul%00"),
    ("%2F", "%252F"), ("a.%2E", "a.%252E"),
])
def test_tensorflow_names_become_valid_ocf_names_and_come_back(tf_name: str,
                                                               ocf_name: str) -> None:
    assert to_ocf_name(tf_name) == ocf_name
    assert to_tf_name(ocf_name) == tf_name


@pytest.mark.parametrize(("tf_name", "ocf_name"), [
    ("VARIABLE_VALUE", "value"), ("value", "%76alue"), ("ITERATOR_STATE", "ITERATOR_STATE"),
    ("py_state", "py_state"), (".odd", "%2Eodd"),
])
def test_variable_value_is_ocf_value_and_other_attributes_keep_their_names(
        tf_name: str, ocf_name: str) -> None:
    assert to_ocf_attribute(tf_name) == ocf_name
    assert to_tf_attribute(ocf_name) == tf_name


# -- the object graph ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["keras", "module", "slots", "sharded"])
def test_object_graph_mirrors_tensorflow_node_for_node(tf_built: Built, name: str) -> None:
    expected = tf_built.scenarios[name]["graph"]
    with TFSource(tf_built.prefix(name)) as source:
        graph = source.object_graph
        assert graph is not None
        assert len(graph.nodes) == len(expected)
        for node, tf_node in zip(graph.nodes, expected):
            assert [(to_tf_name(n), i) for n, i in node.children.items()] == \
                [tuple(c) for c in tf_node["children"]]
            assert [(to_tf_attribute(n), k) for n, k in node.attributes.items()] == \
                [(a[0], a[1]) for a in tf_node["attributes"]]
            assert [(s.variable, to_tf_name(s.name), s.slot_node) for s in node.slots] == \
                [tuple(s) for s in tf_node["slots"]]


def test_slot_variables_of_a_v1_optimizer_are_ocf_slot_variables(tf_built: Built) -> None:
    with TFSource(tf_built.prefix("slots")) as source:
        graph = source.object_graph
        assert graph is not None
        optimizer = graph.node_at(["optimizer"])
        kernel = graph.node_at(["model", "dense", "kernel"])
        assert optimizer is not None
        assert kernel is not None
        slots = {s.name: s.slot_node for s in graph.nodes[optimizer].slots
                 if s.variable == kernel}
        assert sorted(slots) == ["m", "v"]
        assert graph.path(slots["m"]) == "optimizer/.slot/model/dense/kernel/m"
        assert graph.nodes[slots["m"]].attributes == {
            "value": "model/dense/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"}


def test_keras_weights_reachable_by_two_paths_are_one_node(tf_built: Built) -> None:
    """Keras 3 stores the model's weights under the optimizer's path; the model's own
    edges lead to the same nodes."""
    with TFSource(tf_built.prefix("keras")) as source:
        graph = source.object_graph
        assert graph is not None
        through_model = graph.node_at(["model", "_operations", "1", "_kernel"])
        through_optimizer = graph.node_at(["optimizer", "_trainable_variables", "0"])
        assert through_model is not None
        assert through_model == through_optimizer
        assert graph.nodes[through_model].attributes == {
            "value": f"optimizer/_trainable_variables/0/{VALUE_KEY}"}


def test_dict_keys_tensorflow_escapes_are_percent_encoded_edges(tf_built: Built) -> None:
    with TFSource(tf_built.prefix("module")) as source:
        graph = source.object_graph
        assert graph is not None
        named = graph.node_at(["module", "named"])
        assert named is not None
        assert list(graph.nodes[named].children) == [
            "plain", "a%2Fb", "%2Ehidden", "x.y", "per%25cent"]
        leaf = graph.nodes[graph.nodes[named].children["a%2Fb"]]
        assert leaf.attributes == {"value": f"module/named/a.Sb/{VALUE_KEY}"}


# -- restoring TensorFlow checkpoints into NumPy objects -----------------------------------


@pytest.mark.parametrize("form", ["tensorflow prefix", "converted to ocf"])
def test_v1_optimizer_checkpoint_restores_into_numpy_objects_with_slots(
        tf_built: Built, form: str) -> None:
    path = tf_built.prefix("slots") if form == "tensorflow prefix" else \
        tf_built.converted("slots")
    state = numpy_training_state(zero=True)
    ocf.restore(state, os.fspath(path)).assert_consumed()
    expected = tf_built.values("slots")
    model, optimizer = state.model, state.optimizer  # type: ignore[attr-defined]
    assert same(model.dense.kernel.value, decode(expected[f"model/dense/kernel/{VALUE_KEY}"]))
    assert same(optimizer.beta1_power.value,
                decode(expected[f"optimizer/beta1_power/{VALUE_KEY}"]))
    assert state.save_counter == 1
    tf_slots = tf_built.scenarios["slots"]["slots"]  # as the TF optimizer held them
    for name in ("kernel", "bias"):
        for slot in ("m", "v"):
            assert same(optimizer.slot(getattr(model.dense, name), slot),
                        decode(tf_slots[f"{name}/{slot}"]))


def test_restore_from_tensorflow_waits_for_lazily_built_objects(tf_built: Built) -> None:
    class Dense(ocf.Module):
        def build(self) -> None:
            self.kernel = ocf.Variable(np.zeros((2, 3), np.float32))
            self.bias = ocf.Variable(np.zeros(3, np.float32))

    root = ocf.Module()
    root.model = ocf.Module()
    root.model.dense = Dense()
    status = ocf.restore(root, tf_built.prefix("slots"), partial=True)
    root.model.dense.build()  # restore-on-create
    status.assert_existing_objects_matched()
    expected = tf_built.values("slots")[f"model/dense/bias/{VALUE_KEY}"]
    assert same(root.model.dense.bias.value, decode(expected))


def keras_numpy_model(values: Mapping[str, Any]) -> dict[str, Any]:
    """The Keras model's weights as NumPy arrays in dicts and lists named like Keras 3's
    attributes (its functional model keeps its layers in ``_operations``)."""
    def zeros(i: int) -> np.ndarray:
        return np.zeros_like(decode(values[f"optimizer/_trainable_variables/{i}/{VALUE_KEY}"]))

    return {"_operations": [{}, {"_kernel": zeros(0), "bias": zeros(1)},
                            {"_kernel": zeros(2), "bias": zeros(3)}]}


@pytest.mark.parametrize("form", ["tensorflow prefix", "converted to ocf"])
def test_keras_checkpoint_restores_into_numpy_model_with_tensorflow_outputs(
        tf_built: Built, form: str) -> None:
    path = tf_built.prefix("keras") if form == "tensorflow prefix" else \
        tf_built.converted("keras")
    values = tf_built.values("keras")
    model = keras_numpy_model(values)
    ocf.Checkpoint(model=model).restore(path, partial=True).assert_existing_objects_matched()
    hidden, out = model["_operations"][1], model["_operations"][2]
    keras_weights = [decode(w) for w in tf_built.scenarios["keras"]["weights"]]
    for array, expected in zip([hidden["_kernel"], hidden["bias"], out["_kernel"], out["bias"]],
                               keras_weights):
        assert same(array, expected)
    outputs = np.maximum(KERAS_INPUT @ hidden["_kernel"] + hidden["bias"], 0) @ out["_kernel"] \
        + out["bias"]
    np.testing.assert_allclose(outputs, decode(tf_built.scenarios["keras"]["predictions"]),
                               rtol=1e-6, atol=1e-6)


def test_keras_model_alone_restores_from_its_edge_by_start(tf_built: Built) -> None:
    values = tf_built.values("keras")
    model = keras_numpy_model(values)
    ocf.restore(model, tf_built.prefix("keras"), start="model",
                partial=True).assert_existing_objects_matched()
    assert same(model["_operations"][2]["bias"],
                decode(values[f"optimizer/_trainable_variables/3/{VALUE_KEY}"]))


def module_numpy_objects(values: Mapping[str, Any]) -> tuple[ocf.Module, dict[str, np.ndarray]]:
    """NumPy arrays (all zero) arranged like the "module" scenario's tf.Module, and each
    array by the TensorFlow key of the variable it mirrors."""
    def zeros(path: str) -> np.ndarray:
        value = decode(values[f"module/{path}/{VALUE_KEY}"])
        if value.dtype == object:
            return np.full(value.shape, b"", dtype=object)
        return np.zeros_like(value)

    arrays: dict[str, np.ndarray] = {}

    def array(path: str) -> np.ndarray:
        arrays[f"module/{path}/{VALUE_KEY}"] = zeros(path)
        return arrays[f"module/{path}/{VALUE_KEY}"]

    module = ocf.Module()
    module.dtypes = {k.split("/")[2]: array(f"dtypes/{k.split('/')[2]}")
                     for k in values if k.startswith("module/dtypes/")}
    module.text, module.text_scalar = array("text"), array("text_scalar")
    module.scalar, module.empty = array("scalar"), array("empty")
    module.inner = ocf.Module()
    module.inner.deeper = ocf.Module()
    module.inner.deeper.leaf = array("alias/leaf")  # TF's key follows the shorter path
    module.alias = module.inner.deeper
    child = ocf.Module()
    child.w = array("layers/1/w")
    module.layers = [array("layers/0"), child, [array("layers/2/0")]]
    tf_keys = {"plain": "plain", "a/b": "a.Sb", ".hidden": "..hidden", "x.y": "x..y",
               "per%cent": "per%cent"}
    module.named = {key: array(f"named/{tf_keys[key]}") for key in DICT_KEYS}
    root = ocf.Module()
    root.module = module
    return root, arrays


@pytest.mark.parametrize("form", ["tensorflow prefix", "converted to ocf"])
def test_module_with_every_dtype_restores_bit_exactly_by_structure(tf_built: Built,
                                                                  form: str) -> None:
    path = tf_built.prefix("module") if form == "tensorflow prefix" else \
        tf_built.converted("module")
    values = tf_built.values("module")
    root, arrays = module_numpy_objects(values)
    ocf.restore(root, os.fspath(path)).assert_consumed()
    assert_values(arrays, values)


# -- conversion TensorFlow -> OCF --------------------------------------------------------


@pytest.mark.parametrize("name", READABLE)
def test_conversion_keeps_every_tensorflow_key_and_value(tf_built: Built, name: str) -> None:
    with ocf.open(tf_built.converted(name)) as reader:
        assert_values({key: reader.read_tensor(key) for key in reader}, tf_built.values(name))
        assert (reader.object_graph is None) == (name == "v1_saver")


def test_partitioned_variables_stay_partitioned_in_ocf(tf_built: Built) -> None:
    with ocf.open(tf_built.converted("v1_saver")) as reader:
        assert len(reader["embedding"].slices) == 3  # fixed_size_partitioner(3)
        assert not reader["dense/kernel"].slices
        rows = reader.get_slice("embedding", np.s_[4:6])
    assert same(rows, decode(tf_built.values("v1_saver")["embedding"])[4:6])


def test_sharded_checkpoint_spans_several_data_files_and_converts_whole(
        tf_built: Built) -> None:
    prefix = tf_built.prefix("sharded")
    data_files = sorted(Path(prefix).parent.glob("ckpt.data-*"))
    assert len(data_files) > 2
    assert all(f.stat().st_size <= SHARD_LIMIT for f in data_files)
    large = f"large/{VALUE_KEY}"
    assert same(ocf.load_variable(tf_built.converted("sharded"), large),
                decode(tf_built.values("sharded")[large]))


def test_big_index_spans_several_sstable_blocks_and_converts(tf_built: Built) -> None:
    prefix = tf_built.prefix("big_index")
    assert Path(prefix + ".index").stat().st_size > 262144  # a block is cut at 256 KiB
    with ocf.open(tf_built.converted("big_index")) as reader:
        assert len(reader) == BIG_INDEX_KEYS
        graph = reader.object_graph
        assert graph is not None
        assert len(graph.nodes) == BIG_INDEX_KEYS + 3


def test_sub_byte_and_quantized_variables_read_as_tensorflow_reads_them(
        tf_built: Built) -> None:
    prefix = tf_built.prefix("exotic")
    values = tf_built.values("exotic")
    assert len(values) == 8  # int4, uint4, int2, uint2, float4_e2m1fn, qint8, quint8, qint32
    for key, expected in values.items():
        assert same(ocf.load_variable(prefix, key), decode(expected))
    tf_dtypes = tf_built.scenarios["exotic"]["tf_dtypes"]
    assert {key: dtype for key, dtype, _ in ocf.list_variables(prefix)} == \
        {k: v for k, v in tf_dtypes.items() if k != GRAPH_KEY}


def test_sub_byte_and_quantized_tensors_convert_to_ocf_as_the_bytes_tensorflow_stores(
        tf_built: Built) -> None:
    """Sub-byte tensors become uint8 (one byte per element, as TensorFlow stores them),
    quantized ones the plain integers TensorFlow reads; the TensorFlow dtype of both is
    recorded in the metadata."""
    tf_dtypes = {k: v for k, v in tf_built.scenarios["exotic"]["tf_dtypes"].items()
                 if k != GRAPH_KEY}
    with ocf.open(tf_built.converted("exotic")) as reader:
        assert reader.metadata == {"tensorflow.dtypes": tf_dtypes}
        for key, expected in tf_built.values("exotic").items():
            value, want = reader.read_tensor(key), decode(expected)
            stored_as = QUANTIZED_AS.get(tf_dtypes[key], "uint8")
            assert value.dtype == np.dtype(stored_as), key
            assert value.tobytes() == want.tobytes(), key


# -- name-based: tf.compat.v1.train.Saver checkpoints ----------------------------------------


def test_v1_saver_checkpoint_lists_and_loads_variables_by_name(tf_built: Built) -> None:
    prefix = tf_built.prefix("v1_saver")
    values = tf_built.values("v1_saver")
    assert ocf.list_variables(prefix) == [
        ("dense/bias", "float32", (3,)), ("dense/kernel", "float32", (2, 3)),
        ("embedding", "float32", (10, 2)), ("global_step", "int64", ())]
    assert same(ocf.load_variable(prefix, "embedding"), decode(values["embedding"]))
    assert ocf.load_variable(prefix, "global_step") == 5


def test_saver_restores_a_v1_checkpoint_in_place_with_renames(tf_built: Built) -> None:
    kernel, table = np.zeros((2, 3), np.float32), np.zeros((10, 2), np.float32)
    ocf.Saver({"dense/kernel": kernel, "embedding": table}).restore(tf_built.prefix("v1_saver"))
    values = tf_built.values("v1_saver")
    assert same(kernel, decode(values["dense/kernel"]))
    assert same(table, decode(values["embedding"]))


def test_object_restore_of_a_v1_checkpoint_goes_by_name(tf_built: Built) -> None:
    root = {"dense": {"kernel": np.zeros((2, 3), np.float32)}}
    status = ocf.restore(root, tf_built.prefix("v1_saver"),
                         name_map={"dense/kernel/.value": "dense/kernel"}, partial=True)
    status.assert_existing_objects_matched()
    assert same(root["dense"]["kernel"], decode(tf_built.values("v1_saver")["dense/kernel"]))
    with pytest.raises(ocf.RestoreMismatchError, match="embedding"):
        status.assert_consumed()


# -- conversion OCF -> TensorFlow, checked by TensorFlow ------------------------------------


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_tensorflow_reads_ocf_written_checkpoints_bit_exactly(
        tf_built: Built, tf_checked: Checked, name: str) -> None:
    result = tf_checked.result(name)
    assert result["values"] == tf_built.scenarios[name]["values"]  # base64 of the bytes
    assert result["tf_dtypes"] == tf_built.scenarios[name]["tf_dtypes"]


@pytest.mark.parametrize("name", ["keras", "module", "slots", "sharded", "big_index", "exotic"])
def test_tensorflow_graph_survives_the_round_trip_through_ocf(
        tf_built: Built, tf_checked: Checked, name: str) -> None:
    assert tf_checked.result(name)["graph"] == tf_built.scenarios[name]["graph"]


def test_ocf_writer_spread_data_over_several_files_and_index_blocks(
        tf_built: Built, tf_checked: Checked) -> None:
    prefix = Path(tf_checked.prefixes["big_index"])
    assert len(list(prefix.parent.glob("ckpt.data-*"))) > 1
    assert Path(f"{prefix}.index").stat().st_size > 262144


def test_tensorflow_restores_converted_v1_optimizer_slots(tf_built: Built,
                                                          tf_checked: Checked) -> None:
    result = tf_checked.result("slots")
    assert result["slots"] == tf_built.scenarios["slots"]["slots"]
    assert result["rewritten"] == tf_built.scenarios["slots"]["values"]


def test_tensorflow_restores_converted_keras_model_and_optimizer(
        tf_built: Built, tf_checked: Checked) -> None:
    result, original = tf_checked.result("keras"), tf_built.scenarios["keras"]
    for field in ("weights", "optimizer_variables", "predictions"):
        assert result[field] == original[field], field


def test_tensorflow_restores_converted_module_of_every_dtype(
        tf_built: Built, tf_checked: Checked) -> None:
    assert tf_checked.result("module")["rewritten"] == tf_built.scenarios["module"]["values"]


def test_tensorflow_restores_converted_sub_byte_and_quantized_variables(
        tf_built: Built, tf_checked: Checked) -> None:
    assert tf_checked.result("exotic")["rewritten"] == tf_built.scenarios["exotic"]["values"]


def test_tensorflow_restores_native_ocf_state_with_slot_variables(
        tf_checked: Checked) -> None:
    result = tf_checked.result("native")
    assert set(result["values"]) == NATIVE_SLOT_KEYS  # TensorFlow-style keys
    assert_values(tf_checked.native, result["values"])
    assert_values(tf_checked.native, result["rewritten"])  # what TF restored, written by TF
    model_slots = {f"{name}/{slot}": tf_checked.native[
        f"model/dense/{name}/.OPTIMIZER_SLOT/optimizer/{slot}/{VALUE_KEY}"]
        for name in ("kernel", "bias") for slot in ("m", "v")}
    assert_values(model_slots, {k: v for k, v in result["slots"].items() if "/" in k})


def test_ocf_metadata_is_dropped_with_a_warning(tmp_path: Path) -> None:
    numpy_training_state().write(tmp_path / "state.ocf")
    with pytest.warns(UserWarning, match="learning_rate"):
        from_ocf(tmp_path / "state.ocf", tmp_path / "tf" / "ckpt")


def test_dtypes_ocf_lacks_travel_as_their_bits_and_come_back(tmp_path: Path) -> None:
    values = np.array([0.5, -1.0, 2.0], dtype=ml_dtypes.float8_e4m3fnuz)
    with BundleWriter(str(tmp_path / "ckpt")) as bundle:
        bundle.add("x", values)
    to_ocf(tmp_path / "ckpt", tmp_path / "x.ocf")
    with ocf.open(tmp_path / "x.ocf") as reader:
        assert reader.metadata == {"tensorflow.dtypes": {"x": "float8_e4m3fnuz"}}
        assert same(reader.read_tensor("x"), values.view(np.uint8))
    from_ocf(tmp_path / "x.ocf", tmp_path / "back" / "ckpt")
    with BundleReader(tmp_path / "back" / "ckpt") as back:
        assert same(back.read("x"), values)


def ocf_with_recorded_dtype(path: Path, value: np.ndarray, recorded: object) -> Path:
    ocf.save_file({"x": value}, path, metadata={"tensorflow.dtypes": {"x": recorded}})
    return path


@pytest.mark.parametrize(("value", "recorded", "match"), [
    (np.array([1, 0x10], np.uint8), "int4", "element 1 is stored as byte 0x10, which is no int4"),
    (np.array([0xC0], np.uint8), "uint2", "element 0 is stored as byte 0xc0, which is no uint2"),
    (np.ones(2, np.float32), "qint8", "'qint8', which cannot hold the stored float32"),
    (np.ones(2, np.int8), "resource", "no fixed-width TensorFlow dtype"),
    (np.ones(2, np.int8), "string", "no fixed-width TensorFlow dtype"),
    (np.ones(2, np.int8), "int3", "no fixed-width TensorFlow dtype"),
    (np.ones(2, np.int8), 4, "no fixed-width TensorFlow dtype"),
    (np.array([b"a"], dtype=object), "qint8", "cannot hold the stored object"),
])
def test_bad_recorded_tensorflow_dtypes_are_invalid_and_write_nothing(
        tmp_path: Path, value: np.ndarray, recorded: object, match: str) -> None:
    src = ocf_with_recorded_dtype(tmp_path / "x.ocf", value, recorded)
    with pytest.raises(InvalidError, match=match) as caught:
        from_ocf(src, tmp_path / "tf" / "ckpt")
    assert caught.value.key == "x"
    assert caught.value.path is not None
    assert Path(caught.value.path) == src
    assert not (tmp_path / "tf").exists() or list((tmp_path / "tf").iterdir()) == []


def test_a_tensor_named_like_tensorflows_graph_is_refused(tmp_path: Path) -> None:
    ocf.save_file({GRAPH_KEY: np.ones(1)}, tmp_path / "named.ocf")
    with pytest.raises(InvalidError, match=GRAPH_KEY):
        from_ocf(tmp_path / "named.ocf", tmp_path / "tf" / "ckpt")
    assert not (tmp_path / "tf" / "ckpt.index").exists()


# -- without TensorFlow ----------------------------------------------------------------------

NO_TENSORFLOW = """
import importlib.abc, json, sys

class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
            raise ImportError(f"{name} is blocked in this process")
        return None

sys.meta_path.insert(0, NoTensorFlow())
import numpy as np
import ocf
from ocf.interop.tensorflow.convert import from_ocf, to_ocf
from ocf.tensorflow import BundleReader
from tf_scenarios import decode

root, work = sys.argv[1], sys.argv[2]
scenarios = json.load(open(root + "/expected.json"))
checked = 0
for name in ("module", "slots", "v1_saver", "sharded", "keras"):
    expected = scenarios[name]["values"]
    to_ocf(scenarios[name]["prefix"], f"{work}/{name}.ocf")
    from_ocf(f"{work}/{name}.ocf", f"{work}/{name}/ckpt")
    with ocf.open(f"{work}/{name}.ocf") as reader, BundleReader(f"{work}/{name}/ckpt") as back:
        for key, stored in expected.items():
            want = decode(stored)
            for got in (reader.read_tensor(key), back.read(key),
                        ocf.load_variable(scenarios[name]["prefix"], key)):
                assert got.dtype == want.dtype and got.shape == want.shape, key
                assert got.tolist() == want.tolist() if want.dtype == object else \\
                    got.tobytes() == want.tobytes(), key
            checked += 1
try:
    import tensorflow
except ImportError:
    pass
else:
    raise SystemExit("tensorflow was importable")
assert not any(m.split(".")[0] in ("tensorflow", "keras") for m in sys.modules)
print(checked)
"""


def test_reads_and_converts_where_tensorflow_cannot_be_imported(tf_built: Built,
                                                                 tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", NO_TENSORFLOW, str(tf_built.root),
                           str(tmp_path)], capture_output=True, text=True, cwd=TESTS,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = sum(len(tf_built.values(n)) for n in ("module", "slots", "v1_saver", "sharded",
                                                     "keras"))
    assert int(done.stdout) == expected


# -- bad files -----------------------------------------------------------------------------


def copy_scenario(tf_built: Built, name: str, target: Path) -> str:
    prefix = Path(tf_built.prefix(name))
    target.mkdir()
    for file in prefix.parent.glob(prefix.name + ".*"):
        shutil.copy(file, target / file.name)
    return str(target / prefix.name)


def test_truncated_data_file_is_malformed_for_restore_and_convert(tf_built: Built,
                                                                   tmp_path: Path) -> None:
    prefix = copy_scenario(tf_built, "slots", tmp_path / "bad")
    data = Path(prefix + ".data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:-10])
    with pytest.raises(MalformedError):
        ocf.restore(numpy_training_state(zero=True), prefix)
    with pytest.raises(MalformedError):
        to_ocf(prefix, tmp_path / "out.ocf")
    assert not (tmp_path / "out.ocf").exists()


def test_flipped_data_byte_is_an_integrity_error_naming_the_key(tf_built: Built,
                                                                 tmp_path: Path) -> None:
    prefix = copy_scenario(tf_built, "v1_saver", tmp_path / "bad")
    data = Path(prefix + ".data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    with BundleReader(prefix) as bundle:
        at = bundle.entry("dense/kernel").offset
    raw[at] ^= 0x40
    data.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="dense/kernel"):
        ocf.load_variable(prefix, "dense/kernel")


def test_missing_prefix_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        ocf.restore(numpy_training_state(zero=True), str(tmp_path / "nothing" / "ckpt-1"))


def write_graph(tmp_path: Path, graph: TrackableObjectGraph | bytes) -> str:
    """A bundle with one variable and the given object graph."""
    prefix = str(tmp_path / "hostile" / "ckpt")
    os.makedirs(os.path.dirname(prefix))
    data = graph if isinstance(graph, bytes) else graph.SerializeToString()
    with BundleWriter(prefix) as bundle:
        bundle.add(f"v/{VALUE_KEY}", np.ones(2, np.float32))
        bundle.add(GRAPH_KEY, np.array(data, dtype=object))
    return prefix


def one_variable_graph() -> TrackableObjectGraph:
    graph = TrackableObjectGraph()
    graph.nodes.add().children.add(node_id=1, local_name="v")
    graph.nodes.add().attributes.add(name="VARIABLE_VALUE", checkpoint_key=f"v/{VALUE_KEY}")
    return graph


def test_hand_made_tensorflow_graph_restores(tmp_path: Path) -> None:
    root = {"v": np.zeros(2, np.float32)}
    ocf.restore(root, write_graph(tmp_path, one_variable_graph())).assert_consumed()
    assert root["v"].tolist() == [1.0, 1.0]


def test_edge_to_a_missing_node_is_invalid(tmp_path: Path) -> None:
    graph = one_variable_graph()
    graph.nodes[0].children.add(node_id=7, local_name="ghost")
    prefix = write_graph(tmp_path, graph)
    with pytest.raises(InvalidError, match="ghost"):
        ocf.restore({}, prefix)
    with pytest.raises(InvalidError):
        to_ocf(prefix, tmp_path / "out.ocf")


def test_attribute_naming_a_missing_tensor_is_invalid(tmp_path: Path) -> None:
    graph = one_variable_graph()
    graph.nodes[1].attributes[0].checkpoint_key = "elsewhere"
    with pytest.raises(InvalidError, match="R-GRAPH-004"):
        ocf.restore({}, write_graph(tmp_path, graph))


def test_unreachable_node_is_invalid(tmp_path: Path) -> None:
    graph = one_variable_graph()
    graph.nodes.add()
    with pytest.raises(InvalidError, match="R-GRAPH-005"):
        ocf.restore({}, write_graph(tmp_path, graph))


def test_graph_that_is_not_a_protobuf_is_malformed(tmp_path: Path) -> None:
    with pytest.raises(MalformedError, match=GRAPH_KEY):
        ocf.restore({}, write_graph(tmp_path, b"\xff\xff\xff"))


# -- the command line ----------------------------------------------------------------------


def test_cli_converts_tensorflow_to_ocf_and_back(tf_built: Built, tmp_path: Path) -> None:
    done = run("convert", tf_built.prefix("slots"), str(tmp_path / "slots.ocf"))
    assert done.returncode == 0, done.stderr
    assert "(tensorflow)" in done.stdout
    back = tmp_path / "tf" / "ckpt"
    done = run("convert", str(tmp_path / "slots.ocf"), "--to", "tensorflow", str(back))
    assert done.returncode == 0, done.stderr
    expected = tf_built.values("slots")
    with BundleReader(back) as bundle:
        stored = bundle.keys()
        assert sorted(k for k in stored if k != GRAPH_KEY) == sorted(expected)
        assert_values({k: bundle.read(k) for k in expected}, expected)


def test_cli_inspect_lists_a_tensorflow_prefix(tf_built: Built) -> None:
    done = run("inspect", tf_built.prefix("v1_saver"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "name-based" in lines[1]
    assert "4 tensors" in lines[1]
    assert lines[2].split() == ["KEY", "DTYPE", "SHAPE", "STORED"]
    assert lines[3].split() == ["dense/bias", "float32", "[3]", "12", "B"]
    assert lines[5].split() == ["embedding", "float32", "[10,", "2]", "3", "slices"]
    one = run("inspect", tf_built.prefix("v1_saver"), "--tensor", "global_step")
    assert one.stdout.splitlines() == ["tensor_name: global_step", "5"]


def test_cli_inspect_and_tree_take_a_tensorflow_directory(tf_built: Built) -> None:
    directory = str(Path(tf_built.prefix("slots")).parent)  # latest from its `checkpoint`
    done = run("inspect", directory)
    assert done.returncode == 0, done.stderr
    assert f"model/dense/kernel/{VALUE_KEY}" in done.stdout
    assert GRAPH_KEY not in done.stdout
    tree = run("tree", directory)
    assert tree.returncode == 0, tree.stderr
    assert "slot 'm' of model/dense/kernel" in tree.stdout


def test_cli_tree_draws_shared_keras_weights_once(tf_built: Built) -> None:
    done = run("tree", tf_built.prefix("keras"))
    assert done.returncode == 0, done.stderr
    assert "_kernel -> (shared: optimizer/_trainable_variables/0)" in done.stdout
    assert done.stdout.count(".value: float32 [3, 4]") == 3  # kernel, momentum, velocity


def test_cli_reports_a_bad_tensorflow_graph_as_invalid(tmp_path: Path) -> None:
    graph = one_variable_graph()
    graph.nodes[0].children.add(node_id=7, local_name="ghost")
    prefix = write_graph(tmp_path, graph)
    for command in (["tree", prefix], ["convert", prefix, str(tmp_path / "x.ocf")]):
        done = run(*command)
        assert done.returncode == 1
        assert done.stderr.startswith("INVALID:"), done.stderr


def test_cli_verify_reads_and_checks_a_tensorflow_prefix(tf_built: Built,
                                                         tmp_path: Path) -> None:
    done = run("verify", tf_built.prefix("v1_saver"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK: ")
    assert "4 tensors read and checked (TensorFlow checkpoint)" in done.stdout
    source = Path(tf_built.prefix("v1_saver"))
    copy = tmp_path / source.name
    for file in source.parent.glob(source.name + ".*"):
        shutil.copy(file, tmp_path / file.name)
    data = next(tmp_path.glob(source.name + ".data-*"))
    damaged = bytearray(data.read_bytes())
    damaged[0] ^= 0xFF
    data.write_bytes(bytes(damaged))
    bad = run("verify", str(copy))
    assert bad.returncode == 1
    assert bad.stderr.startswith("INTEGRITY: "), bad.stderr
