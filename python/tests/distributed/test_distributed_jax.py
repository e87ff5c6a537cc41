"""Sharded jax.Array trees saved by four JAX processes, restored by two and by one.

Real ``jax.distributed`` processes on loopback, two CPU devices each; the
restore uses other partition specs on a smaller mesh and must give every
shard bit-exactly, reading at most 10% more than the shards hold.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

import numpy as np
from repo_paths import TESTS_DIR
from samples import assert_all_bit_exact

import ocf

HERE = TESTS_DIR
sys.path.insert(0, str(HERE))
import ranks  # noqa: E402

WORKER = HERE / "jax_worker.py"
TIMEOUT = 600  # several processes importing jax on a loaded 2-core machine


def global_tree() -> dict[str, np.ndarray]:
    """The worker's global values, flattened by key (imported here without jax's set-up)."""
    import jax_worker

    flat: dict[str, np.ndarray] = {}
    for name, value in jax_worker.global_tree().items():
        if isinstance(value, dict):
            flat.update({f"{name}/{k}": v for k, v in value.items()})
        else:
            flat[name] = value
    return flat


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jax")
    ranks.run(WORKER, {"mode": "save", "out": str(out), "path": str(out / "ckpt")}, 4, TIMEOUT)
    return out / "ckpt"


def test_a_plain_process_reads_every_leaf_by_its_tree_path(saved: Path) -> None:
    loaded = ocf.load_file(saved)
    expected = global_tree()
    assert_all_bit_exact(loaded, expected)


@pytest.mark.parametrize("processes", [2, 1])
def test_fewer_processes_on_another_mesh_restore_bit_exactly_reading_what_they_need(
        saved: Path, tmp_path: Path, processes: int) -> None:
    results = ranks.run(WORKER, {"mode": "restore", "out": str(tmp_path), "path": str(saved)},
                        processes, TIMEOUT)
    for result in results:
        assert result["equal"], result
        assert result["bytes_read"] <= 1.1 * result["bytes_needed"], result
