"""Hugging Face training through ocf.huggingface, killed with SIGKILL and resumed
bit for bit, in real child processes (huggingface_worker.py):

- ``OCFTrainer`` (a tiny GPT-2 with dropout): killed two steps after its
  step-8 checkpoint, in the middle of an epoch, resumed from that
  checkpoint; its step-12 checkpoint (weights, AdamW and scheduler state,
  random generators) and its per-step losses, gradient norms and learning
  rates equal an uninterrupted run's;
- ``ocf.huggingface.save_state`` / ``load_state`` with an ``Accelerator``:
  killed in the second epoch, resumed from the first epoch's state, its
  final state (model, optimizer, scheduler, step, generators) equals an
  uninterrupted run's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from repo_paths import TESTS_DIR
from trainer_support import assert_same, train

import ocf
from ocf.torch.state_trees import load_tree

WORKER = TESTS_DIR / "huggingface_worker.py"


def trainer_outcome(workdir: Path) -> dict[str, Any]:
    """What a run's step-12 checkpoint holds, and its logged steps."""
    final = workdir / "checkpoint-12"
    log = json.loads((final / "trainer_state.json").read_text())["log_history"]
    return {"model": ocf.load_file(final / "model.ocf"),
            "optimizer": load_tree(final / "optimizer.ocf"),
            "random": load_tree(final / "rng_state.ocf"),
            "steps": [entry for entry in log if "loss" in entry]}


def test_an_ocf_trainer_killed_mid_epoch_resumes_bit_for_bit(tmp_path: Path) -> None:
    uninterrupted, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    train(WORKER, ["trainer", uninterrupted, -1, "-"], kill=False)
    train(WORKER, ["trainer", killed, 10, "-"], kill=True)
    assert sorted(p.name for p in killed.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]
    assert {p.name for p in (killed / "checkpoint-8").iterdir()} >= {
        "model.ocf", "optimizer.ocf", "rng_state.ocf", "trainer_state.json", "training_args.json"}
    assert not list(killed.glob("checkpoint-*/*.pt*")), "a pickle was written"
    train(WORKER, ["trainer", killed, -1, killed / "checkpoint-8"], kill=False)
    expected, resumed = trainer_outcome(uninterrupted), trainer_outcome(killed)
    assert len(expected["steps"]) == 12
    # Steps 1 to 8 come back with the trainer state; 9 to 12 are the resumed run's own.
    assert [entry["step"] for entry in resumed["steps"]] == list(range(1, 13))
    assert resumed["steps"] == expected["steps"]  # losses, grad norms, learning rates
    for part in ("model", "optimizer", "random"):
        assert_same(expected[part], resumed[part], part)


def test_accelerate_state_saved_through_ocf_resumes_bit_for_bit_after_a_kill(
        tmp_path: Path) -> None:
    uninterrupted, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    train(WORKER, ["accelerate", uninterrupted, -1, "-"], kill=False)
    train(WORKER, ["accelerate", killed, 7, "-"], kill=True)  # 5 steps an epoch
    assert sorted(p.name for p in killed.iterdir()) == ["epoch-0"]
    train(WORKER, ["accelerate", killed, -1, killed / "epoch-0"], kill=False)
    expected = load_tree(uninterrupted / "final" / "state.ocf")
    resumed = load_tree(killed / "final" / "state.ocf")
    # 15 scheduler steps in both: the resumed run went on from step 5, not from 0.
    assert resumed["schedulers"][0]["last_epoch"] == expected["schedulers"][0]["last_epoch"] == 15
    assert_same(expected, resumed)
    assert_same(load_tree(uninterrupted / "final" / "random_states_0.ocf"),
                load_tree(killed / "final" / "random_states_0.ocf"))
