"""Lightning checkpoints through ocf.lightning: a run killed with SIGKILL in the
middle of an epoch resumes from its last OCF checkpoint and ends bit for bit
where an uninterrupted run ends (weights, AdamW state, scheduler, loops,
random generators); the killed run saves through Lightning's
AsyncCheckpointIO, the resumed one synchronously. The training runs in real child processes
(lightning_worker.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")

from repo_paths import TESTS_DIR  # noqa: E402
from trainer_support import assert_same  # noqa: E402
from trainer_support import train as run_worker  # noqa: E402

import ocf  # noqa: E402
from ocf.lightning import OCFCheckpointIO  # noqa: E402

WORKER = TESTS_DIR / "lightning_worker.py"
EPOCHS, KILL_EPOCH = 4, 2


def train(workdir: Path, kill_epoch: int = -1, resume: str = "-", use_async: bool = False
          ) -> None:
    """Run the worker to the end, or (kill_epoch >= 0) SIGKILL it when it says ready."""
    run_worker(WORKER, [workdir, EPOCHS, kill_epoch, resume, "1" if use_async else "0"],
               kill=kill_epoch >= 0)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    train(workdir)
    return OCFCheckpointIO().load_checkpoint(workdir / "final.ckpt")


def test_a_lightning_run_killed_mid_epoch_resumes_bit_for_bit(
        tmp_path: Path, uninterrupted: dict[str, Any]) -> None:
    # The killed run saves through AsyncCheckpointIO, the resumed one synchronously:
    # one kill covers both modes (each Lightning process costs seconds of imports).
    train(tmp_path, kill_epoch=KILL_EPOCH, use_async=True)
    assert not (tmp_path / "final.ckpt").exists()
    (last,) = (tmp_path / "checkpoints").glob(f"epoch={KILL_EPOCH - 1}-*.ckpt")
    with ocf.open(last) as reader:  # a plain OCF file, CRC-checked, epoch in its metadata
        assert reader.metadata["epoch"] == KILL_EPOCH - 1
        assert "state_dict/net.0.weight" in reader
    train(tmp_path, resume=str(last))
    resumed = OCFCheckpointIO().load_checkpoint(tmp_path / "final.ckpt")
    assert resumed["global_step"] == uninterrupted["global_step"] == EPOCHS * 6
    for entry in ("state_dict", "optimizer_states", "lr_schedulers", "loops", "epoch",
                  "hyper_parameters"):
        assert_same(uninterrupted[entry], resumed[entry], entry)
    assert_same(uninterrupted["callbacks"]["RandomStates"], resumed["callbacks"]["RandomStates"],
                "RandomStates")


def test_a_lightning_checkpoint_round_trips_every_entry_with_its_python_types(
        tmp_path: Path) -> None:
    checkpoint = {"epoch": 3, "global_step": 12, "state_dict": {"w": torch.arange(6.0)},
                  "optimizer_states": [{"state": {0: {"step": torch.tensor(3.0)}},
                                        "param_groups": [{"lr": 0.1, "betas": (0.9, 0.99),
                                                          "params": [0]}]}],
                  "hyper_parameters": {"hidden": 8, "dtype": torch.bfloat16, "name": "x",
                                       "ratio": 0.5, "flags": [True, None]},
                  "precision": {"scale": torch.tensor(2.0**16, dtype=torch.float64)}}
    io = OCFCheckpointIO(compression="zstd")
    io.save_checkpoint(checkpoint, tmp_path / "sub" / "c.ckpt")
    assert_same(checkpoint, io.load_checkpoint(tmp_path / "sub" / "c.ckpt"))
    io.remove_checkpoint(tmp_path / "sub" / "c.ckpt")
    assert not (tmp_path / "sub" / "c.ckpt").exists()


def test_a_checkpoint_holding_an_object_is_refused_by_path_and_not_written(
        tmp_path: Path) -> None:
    class Config:
        pass
    checkpoint = {"epoch": 1, "hyper_parameters": {"config": Config()}}
    with pytest.raises(ocf.InvalidError, match=r"Config.*nothing is pickled") as error:
        OCFCheckpointIO().save_checkpoint(checkpoint, tmp_path / "c.ckpt")
    assert error.value.key == "hyper_parameters/config"
    assert not (tmp_path / "c.ckpt").exists()


def test_loading_a_file_that_is_not_an_ocf_checkpoint_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "torch.ckpt"
    torch.save({"epoch": 1}, bad)
    with pytest.raises(ocf.OCFError) as error:
        OCFCheckpointIO().load_checkpoint(bad)
    assert str(bad) in str(error.value)
    plain = tmp_path / "plain.ocf"
    ocf.save_file({"w": np.ones(2)}, plain)
    with pytest.raises(ocf.InvalidError, match="state_tree"):
        OCFCheckpointIO().load_checkpoint(plain)
