"""Saves through ocf.huggingface in a loop, for the SIGKILL tests of test_huggingface_crash.py.

``python huggingface_crash_worker.py accelerate FOLDER``: an ``Accelerator``
whose model weights, registered counter and torch generator (seeded with
the save's number) say which save wrote them; ``save_state`` into the one
folder FOLDER, over and over, printing ``saved <n>`` after each.
``python huggingface_crash_worker.py trainer RUN_DIR``: ``OCFTrainer``
training a small GPT-2 with a checkpoint every step (``save_total_limit=2``),
resumed from the newest ``checkpoint-N`` in RUN_DIR, printing ``saved <n>``
from ``on_save``. Both print ``ready <n>`` first, ``n`` being where they start.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from ocf.huggingface import OCFTrainer, load_state, save_state

WIDTH = 768  # a 768 x 768 float32 weight: 2.25 MiB a save


class Counter:
    """A registered object whose state is the number of the save that wrote it."""

    def __init__(self) -> None:
        self.number = 0

    def state_dict(self) -> dict[str, int]:
        return {"number": self.number}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.number = state["number"]


def run_accelerate(folder: Path) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Linear(WIDTH, WIDTH, bias=False))
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    if folder.exists():
        load_state(accelerator, folder)
    print("ready", counter.number, flush=True)
    while True:
        counter.number += 1
        with torch.no_grad():
            model.weight.fill_(counter.number)
        torch.manual_seed(counter.number)
        save_state(accelerator, folder)
        print("saved", counter.number, flush=True)


def run_trainer(run_dir: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    class Report(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            print("ready", state.global_step, flush=True)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            print("saved", state.global_step, flush=True)

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=128, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    tokens = torch.randint(0, 64, (64, 12), generator=torch.Generator().manual_seed(1))
    args = TrainingArguments(output_dir=str(run_dir), max_steps=int(sys.argv[3]), save_steps=1,
                             save_total_limit=2, per_device_train_batch_size=4,
                             report_to="none", use_cpu=True, seed=0, disable_tqdm=True,
                             dataloader_num_workers=0, logging_steps=1000)
    trainer = OCFTrainer(model=GPT2LMHeadModel(config), args=args,
                         train_dataset=[{"input_ids": row, "labels": row} for row in tokens],
                         callbacks=[Report()])
    last = get_last_checkpoint(str(run_dir)) if run_dir.exists() else None
    trainer.train(resume_from_checkpoint=last)


def main() -> None:
    torch.set_num_threads(1)
    if sys.argv[1] == "accelerate":
        run_accelerate(Path(sys.argv[2]))
    else:
        run_trainer(Path(sys.argv[2]))


if __name__ == "__main__":
    main()
