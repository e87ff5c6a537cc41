"""Hugging Face Transformers' Trainer and Accelerate saving their training state as OCF.

- :class:`OCFTrainer` (or :class:`OCFCheckpointing` mixed into any Trainer
  subclass) writes every checkpoint folder's model weights, optimizer,
  scheduler, gradient scaler and random generators as OCF files instead of
  safetensors and pickles, and resumes from them with
  ``trainer.train(resume_from_checkpoint=...)``: nothing is unpickled. The
  trainer state stays Transformers' own ``trainer_state.json``; the
  training arguments go to ``training_args.json`` instead of a pickle.
- :func:`save_state` / :func:`load_state` are ``Accelerator.save_state`` /
  ``load_state`` through OCF: models, optimizers, schedulers, the scaler,
  the step, registered objects and every process's random generators.

Both cover training in one process or data parallel (DDP); FSDP, DeepSpeed
and Megatron-LM keep their own checkpoint code and are refused by name. Both
write a folder whole or not at all (:mod:`ocf.format.folder_commit`). They
take no ``incremental=True``: an incremental save shares blocks through the
pool of its file's own directory, and each of these folders is a directory
of its own, so nothing would be shared.

Examples:
    >>> from ocf.huggingface import OCFTrainer
    >>> trainer = OCFTrainer(model=model, args=args, train_dataset=data)
    >>> trainer.train(resume_from_checkpoint=True)

Needs the ``huggingface`` extra: ``pip install 'ocf[huggingface]'``.
"""

from __future__ import annotations

from ocf.huggingface import _framework
from ocf.huggingface.accelerator_state import load_state, save_state
from ocf.huggingface.trainer import OCFCheckpointing, OCFTrainer

del _framework

__all__ = ["OCFCheckpointing", "OCFTrainer", "load_state", "save_state"]
