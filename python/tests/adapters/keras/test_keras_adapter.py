"""ocf.keras with real Keras 3 on each backend (TensorFlow, JAX, torch).

Keras fixes its backend at import, so each backend runs in processes of its
own (keras_worker.py); these tests judge what they saw. A resumed run is
compared bit for bit with the uninterrupted run of the same program, and
restored values with the model as it was saved: every expected value comes
from Keras, not from ocf.keras.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from frameworks import skip_unless_installed
from repo_paths import TESTS_DIR
from samples import assert_all_bit_exact

import ocf.numpy

WORKER = TESTS_DIR / "keras_worker.py"
BACKENDS = ["tensorflow", "jax", "torch"]
OPTIMIZERS = ["adam", "adamw"]


def run_worker(backend: str, command: str, out: Path) -> dict[str, Any]:
    """Run one worker command; its facts, or the failure with the worker's output (a
    skip when Keras or the backend is not installed)."""
    skip_unless_installed("keras", backend)
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([str(Path(ocf.numpy.__file__).parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(WORKER), backend, command, str(out)], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{backend} {command} failed:\n{done.stderr[-4000:]}"
    facts: dict[str, Any] = json.loads((out / f"{backend}-{command}.json").read_text())
    return facts


@dataclass
class Run:
    """What one backend's train and resume processes saw."""

    backend: str
    out: Path
    trained: dict[str, Any]
    resumed: dict[str, Any]

    def arrays(self, optimizer: str, which: str) -> dict[str, np.ndarray]:
        with np.load(self.out / optimizer / f"{self.backend}-{which}.npz") as stored:
            return {key: stored[key] for key in stored.files}


@pytest.fixture(scope="module", params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    backend: str = request.param
    out = tmp_path_factory.mktemp(f"keras-{backend}")
    trained = run_worker(backend, "train", out)
    return Run(backend, out, trained, run_worker(backend, "resume", out))


# -- resuming ---------------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_resumed_training_matches_the_uninterrupted_run_bit_for_bit(run: Run,
                                                                   optimizer: str) -> None:
    assert_all_bit_exact(run.arrays(optimizer, "resumed"),
                         run.arrays(optimizer, "uninterrupted"))


def test_training_moved_the_values_between_save_and_end(run: Run) -> None:
    """Guards the test above: a resumed run equal to the saved state would prove nothing."""
    at_save, end = run.arrays("adam", "at-save"), run.arrays("adam", "uninterrupted")
    changed = [key for key in at_save if at_save[key].tobytes() != end[key].tobytes()]
    assert len(changed) > len(at_save) // 2


def test_unbuilt_model_and_optimizer_receive_their_values_when_keras_builds_them(
        run: Run) -> None:
    assert run.resumed["adamw_unbuilt_before"]
    assert run.resumed["adamw_consumed"] is None  # assert_consumed() passed after building


def test_optimizer_moments_are_slot_variables_of_the_model_variables(run: Run) -> None:
    facts = run.trained["adam"]
    slots = facts["slots"]
    assert {name for _, name, _ in slots} == {"momentum", "velocity"}
    assert len(slots) == 2 * len(facts["trainable"])
    variables = {variable for variable, _, _ in slots}
    assert len(variables) == len(facts["trainable"])
    assert all(variable.startswith("model/") for variable in variables)
    assert ["model/head/_kernel", "momentum", "optimizer/_momentums/9"] in slots


def test_iteration_counter_is_a_value_of_the_optimizer(run: Run) -> None:
    assert run.trained["adam"]["iterations"] == 3


# -- strictness ---------------------------------------------------------------------------


def assert_mismatch(failure: dict[str, Any] | None, *named: str) -> None:
    assert failure is not None
    assert "RestoreMismatchError" in failure["classes"]
    assert "OCFError" in failure["classes"]
    for text in named:
        assert text in failure["message"], (text, failure["message"])


def test_a_layer_the_checkpoint_lacks_fails_the_restore_naming_it_and_the_file(
        run: Run) -> None:
    assert_mismatch(run.trained["extra_strict"], "adam/ckpt-1",
                    "have no value in the checkpoint", "'model/extra/_kernel'",
                    "'optimizer/_momentums/11'")
    assert run.trained["extra_partial"] is None


def test_a_checkpoint_layer_the_model_lacks_fails_the_restore_naming_it_and_the_file(
        run: Run) -> None:
    assert_mismatch(run.trained["missing_strict"], "bigger.ocf",
                    "checkpoint objects holding tensors matched no object",
                    "'model/extra/_kernel'")
    assert run.trained["missing_partial"] is None


def test_a_failed_restore_leaves_the_model_byte_for_byte_unchanged(run: Run) -> None:
    failure = run.trained["wider"]
    assert failure is not None
    assert "InvalidError" in failure["classes"]
    assert "model/head/_kernel/.value" in failure["message"]
    assert "[4, 2]" in failure["message"]
    assert "[4, 3]" in failure["message"]
    assert run.trained["wider_unchanged"]


def test_layers_with_other_names_restore_by_structure(run: Run) -> None:
    assert all(path.startswith("renamed_") for path in run.trained["renamed_paths"])
    assert run.trained["renamed_error"] is None
    assert run.trained["renamed_restored"]


def test_ocf_keras_save_and_restore_take_a_dict_of_model_and_optimizer(run: Run) -> None:
    assert run.trained["keras_restore_error"] is None
    assert run.trained["keras_restore_same"]


# -- TensorFlow interop ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf_interop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("keras-tf")
    return {"tensorflow": run_worker("tensorflow", "tf-write", out),
            "jax": run_worker("jax", "tf-read", out)}


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_tf_train_checkpoint_of_keras_model_restores_through_ocf_checkpoint(
        tf_interop: dict[str, dict[str, Any]], backend: str) -> None:
    facts = tf_interop[backend]
    assert facts["ocf_restored_same"]
    assert facts["ocf_unmatched_checkpoint"] == []
    # tf.train.Checkpoint.write numbers nothing: it has no save_counter for ocf.Checkpoint's.
    assert facts["ocf_unmatched_objects"] == ["save_counter"]


def test_tf_checkpoint_restores_on_the_jax_backend_without_tensorflow(
        tf_interop: dict[str, dict[str, Any]]) -> None:
    assert not tf_interop["jax"]["tensorflow_imported"]


def test_ocf_checkpoint_written_on_one_backend_restores_on_another(
        tf_interop: dict[str, dict[str, Any]]) -> None:
    assert tf_interop["jax"]["ocf_other_backend_error"] is None  # strict, with cast=True
    assert tf_interop["jax"]["ocf_other_backend_same"]


def test_iteration_counter_of_another_width_needs_cast_and_the_error_says_so(
        tf_interop: dict[str, dict[str, Any]]) -> None:
    """Keras keeps it in int64 on TensorFlow, in int32 on JAX."""
    failure = tf_interop["jax"]["ocf_other_backend_uncast"]
    assert failure is not None
    assert "optimizer/_iterations/.value" in failure["message"]
    assert "int64" in failure["message"]
    assert "cast=True" in failure["message"]


def test_converted_ocf_checkpoint_of_keras_model_restores_in_tensorflow(
        tf_interop: dict[str, dict[str, Any]]) -> None:
    facts = tf_interop["tensorflow"]
    assert facts["convert"]["returncode"] == 0, facts["convert"]["stderr"]
    assert facts["tf_assert_consumed"] is None
    assert facts["tf_restored_same"]
