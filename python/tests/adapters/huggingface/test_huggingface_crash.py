"""ocf.huggingface's checkpoint folders survive a SIGKILL at any moment of a save.

Real child processes (huggingface_crash_worker.py) save in a loop and are
killed at random moments; after every kill the folder a resume would read is
complete and from one save:

- ``save_state`` into one folder, replaced by every save: the folder holds
  the state of one save (weights, registered counter, torch generator all
  say the same number), never a mix of two or half of one, and at least the
  last save reported done;
- ``OCFTrainer`` with a checkpoint every step: the ``checkpoint-N`` that
  ``get_last_checkpoint`` picks holds every file, for step N, and the run
  resumes from it.

The seed of the kill moments is printed; OCF_MANAGER_SEED replays it.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import torch
from manager_support import SEED, TESTS_DIR, run_saving_child

import ocf
from ocf.format.commit import TEMP_MARKER
from ocf.torch.state_trees import load_tree

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[1:]; "
         "import huggingface_crash_worker; huggingface_crash_worker.main()")
TRAINER_FILES = {"model.ocf", "optimizer.ocf", "rng_state.ocf", "trainer_state.json",
                 "training_args.json", "config.json"}


def _run(arguments: list[str], kill_after: float | None) -> tuple[int, list[int]]:
    started, saved, code, err = run_saving_child([CHILD, str(TESTS_DIR), *arguments],
                                                 kill_after, timeout=300)
    assert code == (0 if kill_after is None else -signal.SIGKILL), err
    return started, saved


def _accelerate_number(folder: Path) -> int:
    """The save that wrote ``folder``; fails unless every file in it says the same."""
    assert sorted(p.name for p in folder.iterdir()) == ["random_states_0.ocf", "state.ocf"]
    state = load_tree(folder / "state.ocf")
    number = state["custom_objects"][0]["number"]
    weights = state["models"][0]["weight"]
    assert torch.equal(weights, torch.full_like(weights, float(number))), number
    generator = load_tree(folder / "random_states_0.ocf")["torch"]
    assert torch.equal(generator, torch.manual_seed(number).get_state()), number
    return int(number)


def test_save_state_killed_at_random_moments_leaves_one_whole_save(tmp_path: Path) -> None:
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}-accelerate")
    folder = tmp_path / "latest"
    latest = 0
    for kill in range(8):
        context = f"seed {SEED}, kill {kill}"
        started, saved = _run(["accelerate", str(folder)], rng.uniform(0.0, 0.6))
        assert started == latest, context
        if not folder.exists():
            assert not saved, f"{context}: saves {saved} returned and no folder"
            continue
        latest = _accelerate_number(folder)
        assert latest >= max(saved, default=started), context
        leftovers = [p.name for p in tmp_path.iterdir() if p.name != "latest"]
        assert all(TEMP_MARKER in name for name in leftovers), leftovers
        assert len(leftovers) <= 1, f"{context}: {leftovers}"
    assert latest > 0, f"seed {SEED}: no save finished"
    # The next save deletes what the killed ones left.
    _run(["accelerate", str(folder)], 0.3)
    assert len(list(tmp_path.iterdir())) <= 2


def _last_checkpoint(run_dir: Path) -> tuple[int, Path] | None:
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(run_dir)) if run_dir.exists() else None
    if last is None:
        return None
    path = Path(last)
    assert {p.name for p in path.iterdir()} >= TRAINER_FILES, sorted(path.iterdir())
    step = json.loads((path / "trainer_state.json").read_text())["global_step"]
    assert path.name == f"checkpoint-{step}"
    load_tree(path / "optimizer.ocf")
    ocf.load_file(path / "model.ocf")
    return step, path


def test_an_ocf_trainer_killed_at_random_moments_resumes_from_a_whole_checkpoint(
        tmp_path: Path) -> None:
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}-trainer")
    run_dir = tmp_path / "run"
    latest = 0
    for kill in range(5):
        context = f"seed {SEED}, kill {kill}"
        started, saved = _run(["trainer", str(run_dir), "1000"], rng.uniform(0.5, 2.0))
        assert started == latest, context
        found = _last_checkpoint(run_dir)
        if found is None:
            assert not saved, context
            continue
        latest = found[0]
        assert latest >= max(saved, default=started), context
        checkpoints = [p for p in run_dir.iterdir() if p.name.startswith("checkpoint-")]
        assert len(checkpoints) <= 3, f"{context}: {sorted(checkpoints)}"  # 2 kept + 1 new
    assert latest > 0, f"seed {SEED}: no checkpoint saved"
    started, saved = _run(["trainer", str(run_dir), str(latest + 2)], None)
    assert (started, saved) == (latest, [latest + 1, latest + 2])
    assert sorted(p.name for p in run_dir.iterdir()) == [
        f"checkpoint-{latest + 1}", f"checkpoint-{latest + 2}"]


def test_the_best_checkpoint_is_named_by_its_final_place_and_kept_by_rotation(
        tmp_path: Path) -> None:
    """Transformers records the best checkpoint while it writes into the staging
    directory; the trainer state (in memory and in every saved trainer_state.json)
    names the folder's final place, and rotation keeps it."""
    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

    from ocf.huggingface import OCFTrainer

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    tokens = torch.randint(0, 64, (16, 12), generator=torch.Generator().manual_seed(1))
    rows = [{"input_ids": row, "labels": row} for row in tokens]
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=8, save_steps=2,
                             eval_strategy="steps", eval_steps=2, save_total_limit=1,
                             load_best_model_at_end=True, metric_for_best_model="loss",
                             greater_is_better=False, per_device_train_batch_size=4,
                             learning_rate=5e-3, report_to="none", use_cpu=True,
                             disable_tqdm=True, logging_steps=1000)
    trainer = OCFTrainer(model=GPT2LMHeadModel(config), args=args, train_dataset=rows,
                         eval_dataset=rows[:4])
    trainer.train()
    best = trainer.state.best_model_checkpoint
    assert best is not None
    assert Path(best).parent == tmp_path, best
    assert Path(best).is_dir()
    assert TEMP_MARKER not in best
    for saved in tmp_path.glob("checkpoint-*/trainer_state.json"):
        recorded = json.loads(saved.read_text())["best_model_checkpoint"]
        assert recorded is not None, saved
        assert TEMP_MARKER not in recorded, (saved, recorded)
    assert all(TEMP_MARKER not in p.name for p in tmp_path.iterdir())
