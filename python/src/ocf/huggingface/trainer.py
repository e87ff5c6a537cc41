"""Transformers' ``Trainer`` with every checkpoint file written and read as OCF.

The Trainer saves a checkpoint folder through a few methods, one per part
(``_save`` for the model, ``_save_optimizer_and_scheduler``, ``_save_scaler``,
``_save_rng_state``), and resumes through their ``_load_*`` counterparts; it
documents overriding them in subclasses. :class:`OCFCheckpointing`
overrides each pair, so the folder ``checkpoint-N`` holds:

- ``model.ocf``: the model's state dict (plus ``config.json`` and the
  processing class, as Transformers writes them);
- ``optimizer.ocf``: the optimizer's and the scheduler's state dicts;
- ``scaler.ocf``: the gradient scaler's state, when there is one;
- ``rng_state.ocf`` (``rng_state_{rank}.ocf`` per process when
  distributed): Python's, NumPy's, torch's and CUDA's generators;
- ``trainer_state.json``: Transformers' own (JSON: global step, logs,
  callbacks' states), unchanged;
- ``training_args.json``: the training arguments, instead of a pickle.

The folder is written whole or not at all: Transformers' own save writes it
under a hidden temporary name (its run directory is, for the length of the
save, the hidden ``.checkpoint-N.ocf-tmp-<writeid>``), and it is renamed to
``checkpoint-N`` once every file in it is on disk
(:mod:`ocf.format.folder_commit`). A run killed in the middle of a save
leaves its previous checkpoints as they were and no ``checkpoint-N`` that
``resume_from_checkpoint=True`` would pick up half written; the next save
deletes the leftover. Old checkpoints are rotated, and a checkpoint pushed to
the Hub, after the rename.

Resuming reads these files when they are there and falls back to
Transformers' own otherwise, so a run started without OCF resumes with it.
"""

from __future__ import annotations

import os
from typing import Any

from ocf import torch as ocf_torch
from ocf.format.folder_commit import StagedFolder, folder_names, remove_leftovers
from ocf.huggingface._framework import transformers
from ocf.huggingface.shared_write import on_every_process, shared_write_id
from ocf.torch.random_states import global_random_states, set_global_random_states
from ocf.torch.state_trees import load_tree, save_tree

MODEL_FILE = "model.ocf"
OPTIMIZER_FILE = "optimizer.ocf"
SCALER_FILE = "scaler.ocf"
ARGUMENTS_FILE = "training_args.json"
TRAINER_STATE_FILE = "trainer_state.json"  # Transformers' name for its TrainerState


class OCFCheckpointing:
    """A mixin for ``transformers.Trainer`` and its subclasses: list it first.

    Examples:
        >>> class MyTrainer(OCFCheckpointing, transformers.Seq2SeqTrainer): ...
    """

    # The attributes of transformers.Trainer this mixin uses.
    args: Any
    model: Any
    optimizer: Any
    lr_scheduler: Any
    accelerator: Any
    processing_class: Any
    state: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sharded = [name for name, flag in (("DeepSpeed", "is_deepspeed_enabled"),
                                           ("FSDP", "is_fsdp_enabled"))
                   if getattr(self, flag, False)]
        if sharded:
            raise ValueError(f"ocf.huggingface.OCFCheckpointing does not save {sharded[0]} "
                             "training state; use transformers.Trainer's own checkpoints there")

    # -- the folder, whole or not at all -------------------------------------------

    _ocf_staging_run: str | None = None  # the run directory Transformers writes into
    _ocf_push_deferred = False

    def _get_output_dir(self, trial: Any) -> str:
        if self._ocf_staging_run is not None:
            return self._ocf_staging_run
        return super()._get_output_dir(trial)  # type: ignore[misc,no-any-return]

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        if self._ocf_staging_run is not None:
            # The hub upload reads the folder in the background, after the staging name
            # is gone: it is pushed from its own name once it has it.
            self._ocf_push_deferred = True
            return
        super()._push_from_checkpoint(checkpoint_folder)  # type: ignore[misc]

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        run_dir = self._get_output_dir(trial)
        staged = self._staged_checkpoint(run_dir)
        self._ocf_staging_run, self._ocf_push_deferred = str(staged.staging), False
        save = super()._save_checkpoint  # type: ignore[misc]

        def write() -> None:
            save(model, trial)
            self._point_best_at(staged, run_dir)

        try:
            on_every_process(self.accelerator, write)
            on_every_process(self.accelerator,
                             staged.commit if self.args.should_save else lambda: None)
        except BaseException:
            if self.args.should_save:
                staged.discard()
            raise
        finally:
            self._ocf_staging_run = None
        self._publish(staged, run_dir)

    def _staged_checkpoint(self, run_dir: str) -> StagedFolder:
        """The staging folder of ``checkpoint-<step>``, made once a killed save's are gone."""
        prefix = transformers.trainer_utils.PREFIX_CHECKPOINT_DIR
        staged = StagedFolder(os.path.join(run_dir, f"{prefix}-{self.state.global_step}"),
                              shared_write_id(self.accelerator))

        def prepare() -> None:
            if self.args.should_save:
                remove_leftovers(run_dir, folder_names(prefix))
                staged.create()

        try:
            on_every_process(self.accelerator, prepare)
        except BaseException:
            if self.args.should_save:
                staged.discard()
            raise
        return staged

    def _point_best_at(self, staged: StagedFolder, run_dir: str) -> None:
        """Transformers found this checkpoint the best in the run directory it was given,
        the staging one: the trainer state names its final place instead."""
        if self.state.best_model_checkpoint == str(staged.folder):
            self.state.best_model_checkpoint = os.path.join(run_dir, staged.target.name)
            if self.args.should_save:
                self.state.save_to_json(str(staged.folder / TRAINER_STATE_FILE))

    def _publish(self, staged: StagedFolder, run_dir: str) -> None:
        """Push and rotate, with the folder under its name, as Transformers would have."""
        if self._ocf_push_deferred:
            super()._push_from_checkpoint(  # type: ignore[misc]
                os.path.join(run_dir, staged.target.name))
        if self.args.should_save:
            # Transformers rotated inside the staging directory, where nothing was old.
            transformers.trainer_utils.rotate_checkpoints(
                output_dir=run_dir, save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=True)
        self.accelerator.wait_for_everyone()

    # -- the model ------------------------------------------------------------

    def _save(self, output_dir: str | None = None, state_dict: dict[str, Any] | None = None
              ) -> None:
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        model = self.accelerator.unwrap_model(self.model, keep_torch_compile=False)
        if state_dict is None:
            state_dict = model.state_dict()
        ocf_torch.save_file(state_dict, os.path.join(output_dir, MODEL_FILE),
                            {"model_class": f"{type(model).__module__}.{type(model).__qualname__}"})
        config = getattr(model, "config", None)
        if config is not None and hasattr(config, "save_pretrained"):
            config.save_pretrained(output_dir)
        if self.processing_class is not None:
            self.processing_class.save_pretrained(output_dir)
        with open(os.path.join(output_dir, ARGUMENTS_FILE), "w", encoding="utf-8") as file:
            file.write(self.args.to_json_string())

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        path = os.path.join(resume_from_checkpoint, MODEL_FILE)
        if not os.path.isfile(path):
            super()._load_from_checkpoint(resume_from_checkpoint, model)  # type: ignore[misc]
            return
        target = self.accelerator.unwrap_model(model if model is not None else self.model)
        ocf_torch.load_model(target, path)

    def _load_best_model(self) -> None:
        path = os.path.join(self.state.best_model_checkpoint, MODEL_FILE)
        if not os.path.isfile(path):
            super()._load_best_model()  # type: ignore[misc]
            return
        ocf_torch.load_model(self.accelerator.unwrap_model(self.model), path)

    # -- optimizer, scheduler, scaler -------------------------------------------

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if not self.args.should_save:
            return
        scheduler = self.lr_scheduler.state_dict() if self.lr_scheduler is not None else None
        save_tree({"optimizer": self.optimizer.state_dict(), "scheduler": scheduler},
                  os.path.join(output_dir, OPTIMIZER_FILE))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        path = None if checkpoint is None else os.path.join(checkpoint, OPTIMIZER_FILE)
        if path is None or not os.path.isfile(path):
            super()._load_optimizer_and_scheduler(checkpoint)  # type: ignore[misc]
            return
        state = load_tree(path, device=self.args.device)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.lr_scheduler is not None and state["scheduler"] is not None:
            self.lr_scheduler.load_state_dict(state["scheduler"])

    def _save_scaler(self, output_dir: str) -> None:
        scaler = getattr(self.accelerator, "scaler", None)
        if scaler is not None and self.args.should_save:
            save_tree(scaler.state_dict(), os.path.join(output_dir, SCALER_FILE))

    def _load_scaler(self, checkpoint: str | None) -> None:
        path = None if checkpoint is None else os.path.join(checkpoint, SCALER_FILE)
        if path is None or not os.path.isfile(path):
            super()._load_scaler(checkpoint)  # type: ignore[misc]
            return
        self.accelerator.scaler.load_state_dict(load_tree(path))

    # -- random generators ------------------------------------------------------

    def _random_states_file(self, folder: str) -> str:
        name = "rng_state.ocf" if self.args.world_size <= 1 else \
            f"rng_state_{self.args.process_index}.ocf"
        return os.path.join(folder, name)

    def _save_rng_state(self, output_dir: str) -> None:
        os.makedirs(output_dir, exist_ok=True)  # another process may not have made it yet
        save_tree(global_random_states(), self._random_states_file(output_dir))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        path = None if checkpoint is None else self._random_states_file(checkpoint)
        if path is None or not os.path.isfile(path):
            super()._load_rng_state(checkpoint)  # type: ignore[misc]
            return
        set_global_random_states(load_tree(path))


class OCFTrainer(OCFCheckpointing, transformers.Trainer):
    """``transformers.Trainer`` whose checkpoints are OCF files (see :class:`OCFCheckpointing`).

    Examples:
        >>> trainer = OCFTrainer(model=model, args=args, train_dataset=data)
        >>> trainer.train(resume_from_checkpoint="out/checkpoint-20")
    """
