"""Small Hugging Face training runs whose checkpoints go through ocf.huggingface.

``python huggingface_worker.py trainer WORKDIR KILL_STEP RESUME``: a tiny
GPT-2 (built from a config, dropout on) trained by ``OCFTrainer`` for 12
steps on the CPU, a checkpoint every 4 steps, losses logged every step.
``python huggingface_worker.py accelerate WORKDIR KILL_STEP RESUME``: a small
network trained by a plain loop under an ``Accelerator`` for 3 epochs,
``ocf.huggingface.save_state`` after each epoch into WORKDIR/epoch-N, and the
final state into WORKDIR/final. With KILL_STEP >= 0 either prints "ready" at
that step and waits to be killed; RESUME is a checkpoint folder, or "-".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from ocf.huggingface import OCFTrainer, load_state, save_state


def wait_to_be_killed() -> None:
    print("ready", flush=True)
    time.sleep(600)


def run_trainer(workdir: Path, kill_step: int, resume: str | None) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments

    class KillPoint(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: object, state: object, control: object,
                          **kwargs: object) -> None:
            if getattr(state, "global_step", None) == kill_step:
                wait_to_be_killed()

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    data = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 64, (24, 12), generator=data)
    dataset = [{"input_ids": row, "labels": row} for row in tokens]
    args = TrainingArguments(output_dir=str(workdir), max_steps=12, save_steps=4,
                             per_device_train_batch_size=4, learning_rate=5e-3,
                             lr_scheduler_type="linear", warmup_steps=2, logging_steps=1,
                             report_to="none", use_cpu=True, seed=0, disable_tqdm=True,
                             dataloader_num_workers=0)
    trainer = OCFTrainer(model=model, args=args, train_dataset=dataset,
                         callbacks=[KillPoint()] if kill_step >= 0 else [])
    trainer.train(resume_from_checkpoint=resume)


def run_accelerate(workdir: Path, kill_step: int, resume: str | None) -> None:
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    set_seed(0)
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.7)
    data = torch.Generator().manual_seed(1)
    dataset = torch.utils.data.TensorDataset(torch.randn(40, 4, generator=data),
                                             torch.randn(40, 1, generator=data))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)
    model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)
    first_epoch = 0
    if resume is not None:
        load_state(accelerator, resume)
        first_epoch = int(Path(resume).name.split("-")[1]) + 1
    step = first_epoch * len(loader)
    for epoch in range(first_epoch, 3):
        for x, y in loader:
            if step == kill_step:
                wait_to_be_killed()
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            step += 1
        save_state(accelerator, workdir / f"epoch-{epoch}")
    save_state(accelerator, workdir / "final")


def main() -> None:
    mode, workdir, kill_step = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    resume = None if sys.argv[4] == "-" else sys.argv[4]
    torch.set_num_threads(1)
    (run_trainer if mode == "trainer" else run_accelerate)(workdir, kill_step, resume)


if __name__ == "__main__":
    main()
