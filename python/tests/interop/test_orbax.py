"""Orbax checkpoints in ocf.open and every ocf command, read through orbax-checkpoint.

Checkpoints are saved by orbax-checkpoint itself (StandardCheckpointer,
PyTreeCheckpointer, CheckpointManager: foreign_files.write_orbax) from trees of
JAX and NumPy arrays; the expected values are the arrays saved. Without
orbax-checkpoint (its import blocked in a child process) opening one is a clear
refusal naming what to install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("orbax.checkpoint")

import jax.numpy as jnp
import numpy as np
from cli_support import run, run_json
from foreign_files import assert_reads_back, write_orbax

import ocf

BIAS = jnp.linspace(-1, 1, 4, dtype=jnp.bfloat16)  # a JAX array, saved as one
TREE = {"params": {"dense": {"kernel": np.arange(12, dtype=np.float32).reshape(3, 4),
                             "bias": BIAS}},
        "layers": [{"w": np.ones((2, 2), np.float16)}, {"w": np.arange(3, dtype=np.int32)}],
        "step": np.array(7, np.int64)}
EXPECTED = {"params/dense/kernel": np.arange(12, dtype=np.float32).reshape(3, 4),
            "params/dense/bias": np.asarray(BIAS),
            "layers/0/w": np.ones((2, 2), np.float16),
            "layers/1/w": np.arange(3, dtype=np.int32),
            "step": np.array(7, np.int64)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_orbax(tmp_path_factory.mktemp("orbax") / "ckpt", TREE)


@pytest.mark.parametrize("how", ["standard", "pytree", "manager"])
def test_each_orbax_saver_reads_back_keyed_by_tree_path(tmp_path: Path, how: str) -> None:
    path = write_orbax(tmp_path / "ckpt", TREE, how)
    assert_reads_back(path, "Orbax", EXPECTED)
    if how == "manager":  # the manager's directory opens as its latest step
        later = {**TREE, "step": np.array(8, np.int64)}
        import orbax.checkpoint as ocp

        with ocp.CheckpointManager(tmp_path / "ckpt") as manager:
            manager.save(9, args=ocp.args.StandardSave(later))
            manager.wait_until_finished()
        assert int(ocf.load_file(tmp_path / "ckpt")["step"]) == 8


def test_the_command_line_inspects_verifies_diffs_and_converts(saved: Path,
                                                               tmp_path: Path) -> None:
    document = run_json("inspect", "--all", str(saved))
    assert document["format"] == "Orbax"
    values = {t["key"]: t["value"] for t in document["tensors"]}
    assert values["layers/1/w"] == [0, 1, 2]
    verified = run_json("verify", str(saved))
    assert (verified["ok"], verified["tensors"]) == (True, len(EXPECTED))
    assert run("tree", str(saved)).returncode == 0
    for target in ("one.ocf", "one.safetensors"):
        done = run("convert", str(saved), str(tmp_path / target))
        assert done.returncode == 0, done.stderr
        loaded = ocf.load_file(tmp_path / target)
        assert loaded.keys() == EXPECTED.keys()
        for key, value in EXPECTED.items():
            np.testing.assert_array_equal(loaded[key], value, err_msg=key)
            assert loaded[key].dtype == value.dtype
    assert run("diff", str(saved), str(tmp_path / "one.ocf")).returncode == 0
    changed = write_orbax(tmp_path / "changed", {**TREE, "step": np.array(8, np.int64)})
    report = run_json("diff", str(saved), str(changed), status=1)
    assert [t["key"] for t in report["tensors"]] == ["step"]


_WITHOUT_ORBAX = """
import sys
sys.modules["orbax"] = None  # as if orbax-checkpoint were not installed
sys.modules["orbax.checkpoint"] = None
import ocf
from ocf.cli.main import main
try:
    ocf.open(sys.argv[1])
except ocf.InvalidError as exc:
    print("InvalidError:", exc)
sys.exit(main(["inspect", sys.argv[1]]))
"""


def test_without_orbax_checkpoint_opening_is_refused_naming_what_to_install(saved: Path
                                                                           ) -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_ORBAX, str(saved)],
                          capture_output=True, text=True, check=False, timeout=600)
    message = (f"INVALID: {saved}: reading an Orbax checkpoint needs orbax-checkpoint, "
               "which is not installed (pip install 'ocf[orbax]')")
    assert done.stdout == f"InvalidError: {message}\n"  # the API's error names the path
    assert done.returncode == 1
    assert done.stderr.splitlines() == [message]  # the CLI prints it as any OCF error


def _damaged(saved: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(saved, copy)
    return copy


def test_unreadable_metadata_is_malformed_naming_the_directory(saved: Path,
                                                               tmp_path: Path) -> None:
    copy = _damaged(saved, tmp_path)
    (copy / "_METADATA").write_text("{not json")
    with pytest.raises(ocf.MalformedError) as info:
        ocf.open(copy)
    assert str(copy) in str(info.value)
    done = run("inspect", str(copy))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("MALFORMED: ")


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_damaged_array_store_is_malformed_naming_the_directory(saved: Path, tmp_path: Path,
                                                                 damage: str) -> None:
    copy = _damaged(saved, tmp_path)
    stored = [p for p in (copy / "d").iterdir() if p.is_file()]
    assert stored
    for path in stored:
        if damage == "deleted":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[:-50])
    # In a child: after a truncated store, orbax leaves a coroutine whose event loop
    # it closed, which Python reports ("Event loop is closed") as the process exits.
    done = run("verify", str(copy))
    assert done.returncode == 1
    assert f"MALFORMED: {copy}: orbax-checkpoint cannot read" in done.stderr


def test_a_directory_of_no_orbax_tree_is_not_detected(tmp_path: Path) -> None:
    (tmp_path / "_CHECKPOINT_METADATA").write_text("{}")
    with pytest.raises(ocf.OCFError):
        ocf.open(tmp_path)
