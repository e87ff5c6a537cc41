"""The JAX part of the sharding matrix: NamedShardings saved by two processes, restored by
three and by one.

Real ``jax.distributed`` processes on loopback (sharding_jax_worker.py), two
CPU devices each, on a ("data", "model") mesh: leaves sharded on both axes, on
one axis with the other replicated, on the two axes fused, fully replicated,
and one without elements. JAX does not make uneven shardings (a NamedSharding
must divide every dimension it splits: jax.make_array_from_callback and
jax.device_put raise IndivisibleError), so the uneven splits of the matrix are
the torch side's (test_sharding_matrix.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")

import ml_dtypes
import numpy as np
from repo_paths import TESTS_DIR
from samples import assert_all_bit_exact

import ocf

HERE = TESTS_DIR
sys.path.insert(0, str(HERE))
import ranks  # noqa: E402

WORKER = HERE / "sharding_jax_worker.py"
TIMEOUT = 900  # several processes importing jax on a loaded 2-core machine
LEAVES = ["b", "emb", "empty", "fused", "step", "table", "w"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("jax-sharding")
    results = ranks.run(WORKER, {"mode": "save", "out": str(out), "path": str(out / "ckpt")},
                        2, TIMEOUT)
    return out, results


def saved_full_tree(out: Path) -> dict[str, np.ndarray]:
    with np.load(out / "saved.npz") as data:  # bfloat16 comes back as raw 2-byte items
        return {key: data[key].view(ml_dtypes.bfloat16) if data[key].dtype.kind == "V"
                else data[key] for key in data.files}


def test_a_plain_process_reads_the_full_tree_once_stored(
        saved: tuple[Path, list[dict[str, Any]]]) -> None:
    out, _ = saved
    full = saved_full_tree(out)
    assert sorted(full) == LEAVES
    assert full["empty"].shape == (0, 4)
    assert_all_bit_exact(ocf.load_file(out / "ckpt"), full)
    with ocf.open(out / "ckpt") as checkpoint:  # replicas stored once: the merge checks it
        checkpoint.verify_all()
        assert checkpoint["empty"].slices == ()  # stored whole by one process


def test_the_leaves_are_saved_with_the_shardings_they_say(
        saved: tuple[Path, list[dict[str, Any]]]) -> None:
    _, results = saved
    for result in results:
        assert result["specs"] == {
            "w": "P('data', 'model')", "b": "P('model',)", "emb": "P(None, 'model')",
            "fused": "P(('data', 'model'), None)", "table": "P()", "empty": "P('data',)",
            "step": "P()"}


def test_on_the_saving_process_count_the_next_losses_equal_the_uninterrupted_run(
        saved: tuple[Path, list[dict[str, Any]]]) -> None:
    _, results = saved
    for process, result in enumerate(results):
        assert len(result["uninterrupted"]) == 2
        assert result["resumed"] == result["uninterrupted"], process


@pytest.mark.parametrize("processes", [3, 1])
def test_other_process_counts_restore_other_shardings_bit_exactly(
        saved: tuple[Path, list[dict[str, Any]]], tmp_path: Path, processes: int) -> None:
    out, _ = saved
    results = ranks.run(WORKER, {"mode": "restore", "out": str(tmp_path),
                                 "path": str(out / "ckpt"), "saved": str(out / "saved.npz")},
                        processes, TIMEOUT)
    for process, result in enumerate(results):
        assert result["equal"] == dict.fromkeys(LEAVES, True), process
