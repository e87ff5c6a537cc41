"""Real Keras on one backend, in a process of its own, for test_keras_adapter.py.

Keras fixes its backend at import (``KERAS_BACKEND``), so each backend runs
here as ``python keras_worker.py BACKEND COMMAND DIR``; each command writes
what it saw to ``DIR/<backend>-<command>.json`` (and arrays to ``.npz``
files), and the tests judge it. Every expected value comes from Keras
itself: an uninterrupted training run, or the model as it was saved.

Commands:

``train``
    Trains the test model (an Embedding, a Conv1D, a nested functional model
    with Dense and BatchNormalization, Dropout with a seed, a Dense head) with
    Adam and with AdamW for 3 steps, saves with ``ocf.Checkpoint``, trains 3
    more steps (the uninterrupted run), and tries the restores that must fail
    or succeed in this program: an extra or a missing layer (strict, then
    partial), a layer of another shape (nothing may change), layers with other
    names (by structure), ``ocf.keras.save`` / ``restore``.
``resume``
    A fresh program: new models with other initial values restore the
    checkpoints (Adam: into a built model, strictly; AdamW: into a model and
    optimizer not built yet, which receive their values when Keras builds
    them), then train the same 3 steps.
``tf-write`` (TensorFlow backend)
    ``tf.train.Checkpoint(model=..., optimizer=...).write`` of a trained model;
    ``ocf.Checkpoint(...).restore`` of that prefix into a fresh model; an OCF
    checkpoint of the trained model converted by ``python -m ocf convert
    --to tensorflow`` and restored by ``tf.train.Checkpoint(...).restore``.
``tf-read``
    The prefix ``tf-write`` wrote, restored through ocf.Checkpoint on this
    backend (TensorFlow's files read without TensorFlow), and the OCF
    checkpoint the TensorFlow backend wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

BACKEND, COMMAND, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
os.environ["KERAS_BACKEND"] = BACKEND

import keras  # noqa: E402  (after the backend is chosen)

import ocf  # noqa: E402
import ocf.keras  # noqa: E402

STEPS = 3
OPTIMIZERS = ("adam", "adamw")


class Net(keras.Model):
    """A subclassed model holding layers and a nested functional model."""

    def __init__(self, prefix: str = "", extra: bool = False, head_units: int = 2,
                 dropout: bool = True) -> None:
        super().__init__(name=f"{prefix}net")
        self.embed = keras.layers.Embedding(10, 3, name=f"{prefix}embed")
        self.conv = keras.layers.Conv1D(2, 2, name=f"{prefix}conv")
        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(5, name=f"{prefix}inner_dense")(inputs)
        hidden = keras.layers.BatchNormalization(name=f"{prefix}norm")(hidden)
        outputs = keras.layers.Dense(4, activation="relu", name=f"{prefix}inner_out")(hidden)
        self.inner = keras.Model(inputs, outputs, name=f"{prefix}inner")
        self.use_dropout = dropout
        if dropout:
            self.drop = keras.layers.Dropout(0.25, seed=7, name=f"{prefix}drop")
        self.head = keras.layers.Dense(head_units, name=f"{prefix}head")
        if extra:
            self.extra = keras.layers.Dense(2, name=f"{prefix}extra")

    def call(self, ids: Any, training: bool = False) -> Any:
        x = keras.ops.reshape(self.conv(self.embed(ids)), (-1, 8))
        x = self.inner(x, training=training)
        if self.use_dropout:
            x = self.drop(x, training=training)
        x = self.head(x)
        return self.extra(x) if hasattr(self, "extra") else x


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(step)
    return rng.integers(0, 10, size=(16, 5)), rng.normal(size=(16, 2)).astype(np.float32)


def optimizer(name: str) -> keras.optimizers.Optimizer:
    if name == "adam":
        return keras.optimizers.Adam(0.01)
    return keras.optimizers.AdamW(0.01, weight_decay=0.05)


def compiled(name: str, seed: int | None, built: bool = True, **options: Any
             ) -> tuple[Net, keras.optimizers.Optimizer]:
    """A compiled model (built unless told not to), its initial values drawn from
    ``seed``; unseeded when None, since Keras' set_random_seed imports TensorFlow
    whenever it is installed."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    model, opt = Net(**options), optimizer(name)
    model.compile(opt, "mse", jit_compile=False)  # XLA compiles cost seconds; same path otherwise
    if built:
        model(batch(0)[0])
    return model, opt


def train(model: Net, steps: range) -> None:
    for step in steps:
        model.train_on_batch(*batch(step))


def values(model: Net, opt: keras.optimizers.Optimizer) -> dict[str, np.ndarray]:
    """Every variable of the model and the optimizer, by its place in Keras' lists."""
    found = {f"model/{i}": np.asarray(v.numpy()) for i, v in enumerate(model.variables)}
    found.update({f"optimizer/{i}": np.asarray(v.numpy()) for i, v in enumerate(opt.variables)})
    return found


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit for bit: the same keys, dtypes, shapes and bytes."""
    return sorted(a) == sorted(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
        for k in a)


def failure(call: Any) -> dict[str, Any] | None:
    """The error ``call()`` raised (its class names and message), or None."""
    try:
        call()
    except Exception as exc:
        return {"classes": [c.__name__ for c in type(exc).__mro__], "message": str(exc)}
    return None


def slots_of(path: str) -> dict[str, Any]:
    """The optimizer node's slot variables and iteration counter as the file holds them."""
    with ocf.open(path) as reader:
        graph = reader.object_graph
        assert graph is not None
        node = graph.node_at(["optimizer"])
        assert node is not None
        slots = sorted([graph.path(s.variable), s.name, graph.path(s.slot_node)]
                       for s in graph.nodes[node].slots)
        iterations = graph.node_at(["optimizer", "_iterations"])
        assert iterations is not None
        counter = reader.read_tensor(graph.nodes[iterations].attributes["value"])
        return {"slots": slots, "iterations": counter.tolist(),
                "iterations_dtype": counter.dtype.name}


def command_train() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name in OPTIMIZERS:
        model, opt = compiled(name, seed=1)
        train(model, range(STEPS))
        path = ocf.Checkpoint(model=model, optimizer=opt).save(OUT / name / "ckpt")
        at_save = values(model, opt)
        np.savez(OUT / name / f"{BACKEND}-at-save.npz", **at_save)
        train(model, range(STEPS, 2 * STEPS))
        np.savez(OUT / name / f"{BACKEND}-uninterrupted.npz", **values(model, opt))
        facts[name] = {"checkpoint": path, "trainable": [v.path for v in
                                                         model.trainable_variables],
                       **slots_of(path)}
    adam = facts["adam"]["checkpoint"]
    at_save = dict(np.load(OUT / "adam" / f"{BACKEND}-at-save.npz"))

    def restore_into(**options: Any) -> Any:
        model, opt = compiled("adam", seed=5, **options)
        return lambda **kw: ocf.Checkpoint(model=model, optimizer=opt).restore(adam, **kw)

    facts["extra_strict"] = failure(restore_into(extra=True))
    facts["extra_partial"] = failure(lambda: restore_into(extra=True)(partial=True))
    bigger, bigger_opt = compiled("adam", seed=6, extra=True)
    bigger_path = ocf.Checkpoint(model=bigger, optimizer=bigger_opt).write(OUT / "bigger.ocf")
    smaller, smaller_opt = compiled("adam", seed=6)
    facts["missing_strict"] = failure(
        lambda: ocf.Checkpoint(model=smaller, optimizer=smaller_opt).restore(bigger_path))
    facts["missing_partial"] = failure(
        lambda: ocf.Checkpoint(model=smaller, optimizer=smaller_opt).restore(bigger_path,
                                                                             partial=True))
    wider, wider_opt = compiled("adam", seed=7, head_units=3)
    before = values(wider, wider_opt)
    facts["wider"] = failure(lambda: ocf.Checkpoint(model=wider, optimizer=wider_opt)
                             .restore(adam))
    after = values(wider, wider_opt)
    # The restore may build the optimizer (zero state, as fit would): compare what existed.
    facts["wider_unchanged"] = same(before, {key: after[key] for key in before if key in after})
    renamed, renamed_opt = compiled("adam", seed=8, prefix="renamed_")
    facts["renamed_paths"] = [v.path for v in renamed.trainable_variables]
    facts["renamed_error"] = failure(lambda: ocf.Checkpoint(model=renamed,
                                                            optimizer=renamed_opt).restore(adam))
    facts["renamed_restored"] = same(values(renamed, renamed_opt), at_save)
    state_path = ocf.keras.save({"model": renamed, "optimizer": renamed_opt}, OUT / "state.ocf")
    again, again_opt = compiled("adam", seed=9)
    facts["keras_restore_error"] = failure(
        lambda: ocf.keras.restore({"model": again, "optimizer": again_opt}, state_path))
    facts["keras_restore_same"] = same(values(again, again_opt), at_save)
    return facts


def command_resume() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    trained = json.loads((OUT / f"{BACKEND}-train.json").read_text())
    # Adam: the model built before the restore, which is strict.
    model, opt = compiled("adam", seed=11)
    status = ocf.Checkpoint(model=model, optimizer=opt).restore(trained["adam"]["checkpoint"])
    facts["adam_status"] = repr(status)
    train(model, range(STEPS, 2 * STEPS))
    np.savez(OUT / "adam" / f"{BACKEND}-resumed.npz", **values(model, opt))
    # AdamW: neither the model nor the optimizer built; both get their values when Keras
    # builds them, during the first training step.
    model, opt = compiled("adamw", seed=12, built=False)
    status = ocf.Checkpoint(model=model, optimizer=opt).restore(trained["adamw"]["checkpoint"],
                                                               partial=True)
    facts["adamw_unbuilt_before"] = not model.built and not opt.built
    train(model, range(STEPS, 2 * STEPS))
    facts["adamw_consumed"] = failure(status.assert_consumed)
    np.savez(OUT / "adamw" / f"{BACKEND}-resumed.npz", **values(model, opt))
    return facts


def plain(seed: int | None) -> tuple[Net, keras.optimizers.Optimizer]:
    """The model without Dropout, whose seed state tf.train.Checkpoint does not save."""
    return compiled("adam", seed=seed, dropout=False)


def command_tf_write() -> dict[str, Any]:
    import tensorflow as tf

    model, opt = plain(21)
    train(model, range(STEPS))
    expected = values(model, opt)
    np.savez(OUT / "tf-values.npz", **expected)
    prefix = tf.train.Checkpoint(model=model, optimizer=opt).write(os.fspath(OUT / "tf" / "ckpt"))
    facts: dict[str, Any] = {"prefix": prefix, **read_tf_prefix(prefix, expected)}
    ocf_path = ocf.Checkpoint(model=model, optimizer=opt).write(OUT / "from-keras.ocf")
    converted = os.fspath(OUT / "converted" / "ckpt")
    done = subprocess.run([sys.executable, "-m", "ocf", "convert", ocf_path, "--to",
                           "tensorflow", converted], capture_output=True, text=True, check=False)
    facts["convert"] = {"returncode": done.returncode, "stderr": done.stderr}
    fresh, fresh_opt = plain(23)
    tf_status = tf.train.Checkpoint(model=fresh, optimizer=fresh_opt).restore(converted)
    # TensorFlow restores the optimizer's state when it is built (restore-on-create), as
    # the first training step would build it; only then is everything consumed.
    fresh_opt.build(fresh.trainable_variables)
    facts["tf_assert_consumed"] = failure(tf_status.assert_consumed)
    facts["tf_restored_same"] = same(values(fresh, fresh_opt), expected)
    return facts


def read_tf_prefix(prefix: str, expected: dict[str, np.ndarray], cast: bool = False
                   ) -> dict[str, Any]:
    fresh, fresh_opt = plain(22 if BACKEND == "tensorflow" else None)
    status = ocf.Checkpoint(model=fresh, optimizer=fresh_opt).restore(prefix, partial=True,
                                                                     cast=cast)
    unmatched = status.unmatched_checkpoint_paths(holding_values=True)
    return {"ocf_unmatched_objects": status.unmatched_object_paths(holding_values=True),
            "ocf_unmatched_checkpoint": list(unmatched),  # a sequence, not JSON's list
            "ocf_restored_same": same(values(fresh, fresh_opt), expected)}


def command_tf_read() -> dict[str, Any]:
    written = json.loads((OUT / "tensorflow-tf-write.json").read_text())
    # Keras counts iterations in int64 on TensorFlow and torch, in int32 on JAX (without
    # x64): a restore across backends casts that one value, and says so when not asked to.
    expected = {key: value.astype(np.int32) if value.dtype == np.int64 else value
                for key, value in np.load(OUT / "tf-values.npz").items()}
    facts = read_tf_prefix(written["prefix"], expected, cast=True)
    model, opt = plain(None)
    facts["ocf_other_backend_uncast"] = failure(
        lambda: ocf.Checkpoint(model=model, optimizer=opt).restore(OUT / "from-keras.ocf"))
    # The OCF checkpoint the TensorFlow backend wrote, strictly, on this backend.
    facts["ocf_other_backend_error"] = failure(
        lambda: ocf.Checkpoint(model=model, optimizer=opt).restore(OUT / "from-keras.ocf",
                                                                    cast=True))
    facts["ocf_other_backend_same"] = same(values(model, opt), expected)
    facts["tensorflow_imported"] = "tensorflow" in sys.modules
    return facts


COMMANDS = {"train": command_train, "resume": command_resume, "tf-write": command_tf_write,
            "tf-read": command_tf_read}

if __name__ == "__main__":
    for name in OPTIMIZERS:
        (OUT / name).mkdir(parents=True, exist_ok=True)
    result = COMMANDS[COMMAND]()
    (OUT / f"{BACKEND}-{COMMAND}.json").write_text(json.dumps(result, indent=1))
