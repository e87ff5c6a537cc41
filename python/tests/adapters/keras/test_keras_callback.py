"""ocf.keras.callbacks: a Keras run saving through ModelCheckpoint, killed with
SIGKILL in the middle of an epoch, resumes with restore_latest and ends bit
for bit where an uninterrupted run ends (weights, Adam's slots and
iteration count, the Dropout layer's seed generator), in real child
processes (keras_callback_worker.py, torch backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("keras")

from repo_paths import TESTS_DIR
from trainer_support import train

import ocf

WORKER = TESTS_DIR / "keras_callback_worker.py"


def final_weights(workdir: Path) -> dict[str, np.ndarray]:
    with np.load(workdir / "final.npz") as archive:
        return {key: archive[key] for key in archive.files}


def test_a_keras_run_killed_mid_epoch_resumes_bit_for_bit_from_its_ocf_checkpoints(
        tmp_path: Path) -> None:
    uninterrupted, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    train(WORKER, [uninterrupted, -1], kill=False)
    train(WORKER, [killed, 2], kill=True)
    assert not (killed / "final.npz").exists()
    latest = ocf.latest_checkpoint(killed / "run")
    assert latest is not None
    assert latest.endswith("ckpt-2")  # epochs 1 and 2 done, max_to_keep=2
    assert sorted(p.name for p in (killed / "run").glob("ckpt-*")) == ["ckpt-1", "ckpt-2"]
    train(WORKER, [killed, -1], kill=False)
    expected, resumed = final_weights(uninterrupted), final_weights(killed)
    assert sorted(expected) == sorted(resumed)
    assert any("seed_generator" in key for key in expected)
    for key, array in expected.items():
        assert array.dtype == resumed[key].dtype, key
        assert array.tobytes() == resumed[key].tobytes(), key
