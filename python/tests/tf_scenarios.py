"""Checkpoints written, read and restored by real TensorFlow, for test_tf_interop.py.

Importing TensorFlow takes seconds, so the tests run these two commands in
the one TensorFlow process of the session that tf_support.py serves (as its
``scenarios-build`` and ``scenarios-check``), each doing all its TensorFlow
work at once; run on their own they are:

    python tf_scenarios.py build OUT
        Writes every scenario checkpoint under OUT and OUT/expected.json:
        for each scenario its prefix, what ``tf.train.load_checkpoint``
        reads under every key (the values TensorFlow itself reads), the
        object graph as TensorFlow's own proto class parses it, and the
        outputs of the objects saved (Keras predictions, slot variables).

    python tf_scenarios.py check JOBS OUT
        JOBS is a JSON list of {"name", "prefix", "kind"}; for each job
        TensorFlow reads the checkpoint at "prefix" (written by OCF), and
        for the kinds other than "read" restores it into fresh TensorFlow
        objects built like a scenario's, creates the optimizer's slots,
        asserts the restore status and writes the restored objects again
        under TensorFlow's own keys. OUT/results.json gets, per job, the
        values read and the values of the rewritten checkpoint, or the
        "error" TensorFlow raised.

Values travel as JSON: dtype name, shape and base64 of the raw bytes, or a
list of base64 strings for string tensors. Nothing here imports ocf.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import traceback
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import ml_dtypes
import numpy as np

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
KERAS_INPUT = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
DICT_KEYS = ("plain", "a/b", ".hidden", "x.y", "per%cent")
SHARD_LIMIT = 600  # bytes per data file of the "sharded" scenario
BIG_INDEX_KEYS = 2500  # enough long keys to fill more than one 256 KiB SSTable block


def encode(value: Any) -> dict[str, Any]:
    if isinstance(value, bytes):  # TensorFlow reads a scalar string as bytes
        return {"shape": [], "strings": [base64.b64encode(value).decode()]}
    array = np.asarray(value)
    if array.dtype == object:
        return {"shape": list(array.shape),
                "strings": [base64.b64encode(bytes(x)).decode() for x in array.ravel()]}
    return {"dtype": array.dtype.name, "shape": list(array.shape),
            "data": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()}


def decode(stored: dict[str, Any]) -> np.ndarray:
    """The array of :func:`encode` (used by the tests, which cannot import TensorFlow)."""
    shape = tuple(stored["shape"])
    if "strings" in stored:
        items = [base64.b64decode(s) for s in stored["strings"]]
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(shape)
    name = stored["dtype"]
    dtype = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    return np.frombuffer(base64.b64decode(stored["data"]), dtype=dtype).reshape(shape).copy()


# -- reading what TensorFlow reads ----------------------------------------------------


def read_all(prefix: str) -> dict[str, Any]:
    """Every tensor as tf.train.load_checkpoint reads it, and TensorFlow's dtype names."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    dtype_map = reader.get_variable_to_dtype_map()
    values = {key: encode(reader.get_tensor(key)) for key in reader.get_variable_to_shape_map()
              if key != OBJECT_GRAPH_KEY}
    return {"values": values, "tf_dtypes": {k: d.name for k, d in dtype_map.items()}}


def object_graph(prefix: str) -> list[dict[str, Any]] | None:
    """The object graph as TensorFlow's own TrackableObjectGraph class parses it."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(prefix)
    if not reader.has_tensor(OBJECT_GRAPH_KEY):
        return None
    proto = trackable_object_graph_pb2.TrackableObjectGraph()
    proto.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    return [{"children": [[c.local_name, c.node_id] for c in node.children],
             "attributes": [[a.name, a.checkpoint_key, a.full_name] for a in node.attributes],
             "slots": [[s.original_variable_node_id, s.slot_name, s.slot_variable_node_id]
                       for s in node.slot_variables]}
            for node in proto.nodes]


# -- the scenarios ------------------------------------------------------------------


def keras_model() -> Any:
    import keras

    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(2, name="out")(hidden)
    return keras.Model(inputs, outputs)


def keras_optimizer() -> Any:
    import keras

    return keras.optimizers.Adam(0.01)


def build_keras(out: str) -> dict[str, Any]:
    """A Keras 3 functional model trained a little, saved with its optimizer."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(1)
    model, optimizer = keras_model(), keras_optimizer()
    model.compile(optimizer, "mse")
    rng = np.random.default_rng(0)
    model.fit(rng.normal(size=(16, 3)).astype(np.float32),
              rng.normal(size=(16, 2)).astype(np.float32), epochs=2, verbose=0)
    prefix = tf.train.Checkpoint(model=model, optimizer=optimizer).save(f"{out}/keras/ckpt")
    return {"prefix": prefix, "predictions": encode(model(KERAS_INPUT).numpy()),
            "weights": [encode(w.numpy()) for w in model.weights],
            "optimizer_variables": [encode(v.numpy()) for v in optimizer.variables]}


def every_dtype_values() -> dict[str, np.ndarray]:
    """One (2, 3) array per dtype a tf.Variable can hold that OCF's reader reads, with
    edge values (signed zeros, infinities, NaN, integer extremes)."""
    floats = np.array([[0.0, -0.0, 1.5], [np.inf, -np.inf, np.nan]])
    values: dict[str, np.ndarray] = {
        "bool": np.array([[True, False, True], [False, False, True]]),
        "complex64": (floats + 2j).astype(np.complex64),
        "complex128": (floats - 1j * np.pi).astype(np.complex128),
    }
    for name in ("float16", "float32", "float64"):
        values[name] = floats.astype(name)
    for name, top in (("bfloat16", 3.0e38), ("float8_e4m3fn", 448.0), ("float8_e5m2", 57344.0)):
        values[name] = np.array([[0.0, -0.0, 1.5], [0.25, -2.0, top]],
                                dtype=getattr(ml_dtypes, name))
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(name)
        values[name] = np.array([[info.min, info.max, 0], [1, 7, 5]], dtype=name)
    return values


def exotic_dtype_values() -> dict[str, Any]:
    """The other dtypes a tf.Variable can hold: sub-byte and quantized ones, given as
    (array, TensorFlow dtype name or None)."""
    values: dict[str, Any] = {
        "float4_e2m1fn": (np.array([[0.0, -0.0, 1.5], [0.5, -6.0, 3.0]],
                                   dtype=ml_dtypes.float4_e2m1fn), None)}
    for name, low, high in (("int4", -8, 7), ("uint4", 0, 15), ("int2", -2, 1), ("uint2", 0, 3)):
        values[name] = (np.array([[low, high, 0], [1, high, low]], dtype=getattr(ml_dtypes, name)),
                        None)
    # qint16 and quint16 cannot be variables (no AssignVariableOp kernel); the
    # test_tf_bundle_*.py files cover them through SaveV2.
    for name, base in (("qint8", np.int8), ("quint8", np.uint8), ("qint32", np.int32)):
        info = np.iinfo(base)
        values[name] = (np.array([[info.min, info.max, 0], [1, 5, info.max // 3]], base), name)
    return values


def build_module_objects(zero: bool) -> Any:
    """A tf.Module holding every dtype, strings, rank 0 and empty tensors, nested modules,
    lists, dicts and one module reachable by two paths. ``zero`` fills with zeros."""
    import tensorflow as tf

    def var(value: Any, dtype: Any = None) -> Any:
        array = np.asarray(value)
        if zero:
            array = np.zeros_like(array) if array.dtype != object else \
                np.full(array.shape, b"", dtype=object)
        if dtype is not None:
            return tf.Variable(tf.constant(array, dtype=dtype))
        return tf.Variable(array)

    root = tf.Module()
    root.dtypes = {name: var(value) for name, value in every_dtype_values().items()}
    strings = np.array([[b"", b"a"], [b"\x00\xff bytes", b"long" * 100]], dtype=object)
    root.text = var(strings, tf.string)
    root.text_scalar = var(np.array(b"one string", dtype=object), tf.string)
    root.scalar = var(np.float64(2.5))
    root.empty = var(np.zeros((0, 3), np.float32))
    root.inner = tf.Module()
    root.inner.deeper = tf.Module()
    root.inner.deeper.leaf = var(np.arange(4, dtype=np.int32))
    root.alias = root.inner.deeper  # one object, two paths
    child = tf.Module()
    child.w = var(np.array([1.0, 2.0], np.float32))
    root.layers = [var(np.array([7], np.int64)), child, [var(np.array(3.0, np.float32))]]
    root.named = {key: var(np.array([i], np.int16)) for i, key in enumerate(DICT_KEYS)}
    return root


def build_module(out: str) -> dict[str, Any]:
    import tensorflow as tf

    prefix = tf.train.Checkpoint(module=build_module_objects(zero=False)).write(
        f"{out}/module/ckpt")
    return {"prefix": prefix}


def build_exotic_objects(zero: bool) -> Any:
    """A tf.Module holding a variable of each sub-byte and quantized dtype; ``zero``
    fills with zeros."""
    import tensorflow as tf

    def var(value: np.ndarray, tf_name: str | None) -> Any:
        array = np.zeros_like(value) if zero else value
        return tf.Variable(tf.constant(array, dtype=getattr(tf, tf_name))) if tf_name \
            else tf.Variable(array)

    root = tf.Module()
    root.dtypes = {name: var(value, tf_name)
                   for name, (value, tf_name) in exotic_dtype_values().items()}
    return root


def build_exotic(out: str) -> dict[str, Any]:
    """Sub-byte and quantized variables, in a checkpoint of their own."""
    import tensorflow as tf

    root = build_exotic_objects(zero=False)
    return {"prefix": tf.train.Checkpoint(module=root).write(f"{out}/exotic/ckpt")}


def slot_objects() -> tuple[Any, Any]:
    """A model of one dense layer and a tf.compat.v1 Adam optimizer (slots m and v)."""
    import tensorflow as tf

    model = tf.Module()
    model.dense = tf.Module()
    model.dense.kernel = tf.Variable(np.zeros((2, 3), np.float32))
    model.dense.bias = tf.Variable(np.zeros(3, np.float32))
    return model, tf.compat.v1.train.AdamOptimizer(0.1)


def slot_values(model: Any, optimizer: Any) -> dict[str, Any]:
    """The optimizer's slots and non-slot variables as TensorFlow holds them."""
    result = {}
    for name in ("kernel", "bias"):
        for slot in ("m", "v"):
            result[f"{name}/{slot}"] = encode(optimizer.get_slot(getattr(model.dense, name),
                                                                 slot).numpy())
    for power in optimizer._get_beta_accumulators():  # beta1_power, beta2_power
        result[power.name.split(":")[0]] = encode(power.numpy())
    return result


def build_slots(out: str) -> dict[str, Any]:
    import tensorflow as tf

    model, optimizer = slot_objects()
    model.dense.kernel.assign(np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
    variables = [model.dense.kernel, model.dense.bias]
    for _ in range(3):
        optimizer.minimize(lambda: tf.reduce_sum(
            (tf.matmul(tf.ones((1, 2)), model.dense.kernel) + model.dense.bias) ** 2),
            var_list=variables)
    prefix = tf.train.Checkpoint(model=model, optimizer=optimizer).save(f"{out}/slots/ckpt")
    return {"prefix": prefix, "slots": slot_values(model, optimizer)}


def build_v1_saver(out: str) -> dict[str, Any]:
    """A graph-mode tf.compat.v1.train.Saver checkpoint with a partitioned variable."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with v1.variable_scope("dense"):
            v1.get_variable("kernel", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
            v1.get_variable("bias", initializer=np.array([0.5, -0.5, 1.0], np.float32))
        v1.train.get_or_create_global_step()
        v1.get_variable("embedding", shape=(10, 2), dtype=tf.float32,
                        initializer=v1.random_normal_initializer(seed=1),
                        partitioner=v1.fixed_size_partitioner(3))
        saver = v1.train.Saver()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            session.run(v1.assign(v1.train.get_global_step(), 5))
            prefix = saver.save(session, f"{out}/v1/model.ckpt", global_step=5)
    return {"prefix": prefix}


def build_sharded(out: str) -> dict[str, Any]:
    """A TF2 checkpoint split into several data files by a maximum shard size; one
    variable is larger than the limit, so TensorFlow writes it in slices."""
    import tensorflow as tf

    root = tf.Module()
    root.small = [tf.Variable(np.full((40,), i, np.float32)) for i in range(5)]
    root.large = tf.Variable(np.arange(400, dtype=np.float32).reshape(20, 20))
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=SHARD_LIMIT)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    prefix = tf.train.Checkpoint(root=root).write(f"{out}/sharded/ckpt", options=options)
    return {"prefix": prefix}


def big_index_key(i: int) -> str:
    return f"k{i:04d}" + "y" * 150


def build_big_index(out: str) -> dict[str, Any]:
    import tensorflow as tf

    root = tf.Module()
    root.d = {big_index_key(i): tf.Variable(np.float32(i)) for i in range(BIG_INDEX_KEYS)}
    return {"prefix": tf.train.Checkpoint(m=root).write(f"{out}/big_index/ckpt")}


BUILDERS = {"keras": build_keras, "module": build_module, "exotic": build_exotic,
            "slots": build_slots,
            "v1_saver": build_v1_saver, "sharded": build_sharded, "big_index": build_big_index}


def build(out: str) -> None:
    scenarios = {}
    for name, builder in BUILDERS.items():
        scenario = builder(out)
        scenario.update(read_all(scenario["prefix"]))
        scenario["graph"] = object_graph(scenario["prefix"])
        scenarios[name] = scenario
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(scenarios, f)


# -- restoring checkpoints OCF wrote ------------------------------------------------


def restore_job(kind: str, prefix: str, rewrite: str) -> dict[str, Any]:
    """Restore ``prefix`` into fresh objects of scenario ``kind``; write them to ``rewrite``."""
    import tensorflow as tf

    result: dict[str, Any] = {}
    if kind == "slots":
        model, optimizer = slot_objects()
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        status = checkpoint.restore(prefix)
        with tf.init_scope():  # slots are created (and restored) as a first step would
            optimizer._create_slots([model.dense.kernel, model.dense.bias])
        status.assert_consumed()
        result["slots"] = slot_values(model, optimizer)
    elif kind == "keras":
        model, optimizer = keras_model(), keras_optimizer()
        optimizer.build(model.trainable_variables)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        checkpoint.restore(prefix).assert_existing_objects_matched()
        result["predictions"] = encode(model(KERAS_INPUT).numpy())
        result["weights"] = [encode(w.numpy()) for w in model.weights]
        result["optimizer_variables"] = [encode(v.numpy()) for v in optimizer.variables]
    elif kind in ("module", "exotic"):
        build = build_module_objects if kind == "module" else build_exotic_objects
        checkpoint = tf.train.Checkpoint(module=build(zero=True))
        checkpoint.read(prefix).assert_consumed()  # written by write(): no save_counter
    else:
        raise ValueError(f"unknown restore kind {kind!r}")
    result["rewritten"] = read_all(checkpoint.write(rewrite))["values"]
    return result


def check(jobs_path: str, out: str) -> None:
    with open(jobs_path) as f:
        jobs = json.load(f)
    results = {}
    for i, job in enumerate(jobs):
        try:
            result = read_all(job["prefix"])
            result["graph"] = object_graph(job["prefix"])
            if job["kind"] != "read":
                result.update(restore_job(job["kind"], job["prefix"],
                                          f"{out}/rewrite-{i}/ckpt"))
        except Exception:  # reported by the job's tests; the other jobs still run
            result = {"error": traceback.format_exc()}
        results[job["name"]] = result
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
