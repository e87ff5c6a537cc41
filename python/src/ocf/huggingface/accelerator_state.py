"""``Accelerator.save_state`` / ``load_state`` through OCF, without pickle.

:func:`save_state` writes what Accelerate's own ``save_state`` writes, as
OCF files in ``output_dir``: ``state.ocf`` (from the main process: the
models' state dicts, the optimizers', the schedulers', the gradient
scaler's, stateful dataloaders', the objects registered with
``register_for_checkpointing`` and the accelerator's step) and
``random_states_{rank}.ocf`` (every process: its Python, NumPy, torch and
CUDA generators). The folder is written whole or not at all: under a hidden
temporary sibling, renamed to ``output_dir`` once every file in it is on
disk, replacing a previous folder there in one exchange of names
(:mod:`ocf.format.folder_commit`), so a save killed at any moment leaves the
previous state or the new one, never a mix. A folder holding anything but
these files is not replaced: INVALID, naming what else it holds, before
anything is written. A step that fails on one process raises on all of
them. :func:`load_state` puts them back into the objects the accelerator
prepared, in the same order; a different number of models, optimizers,
schedulers or registered objects is INVALID, naming both counts, before
anything changes.

Accelerate keeps the objects ``prepare`` returned in its lists ``_models``,
``_optimizers``, ``_schedulers``, ``_dataloaders`` and ``_custom_objects``
(its own ``save_state`` reads them there too); they are read, never changed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ocf.format.commit import temp_names_of
from ocf.format.errors import InvalidError
from ocf.format.folder_commit import StagedFolder, remove_leftovers
from ocf.huggingface._framework import accelerate
from ocf.huggingface.shared_write import on_every_process, shared_write_id
from ocf.torch.random_states import global_random_states, set_global_random_states
from ocf.torch.state_trees import load_tree, save_tree

STATE_FILE = "state.ocf"
_SHARDED = ("FSDP", "DEEPSPEED", "MEGATRON_LM")
_PARTS = ("models", "optimizers", "schedulers", "dataloaders", "custom_objects")
_SAVED_FILES = rf"{re.escape(STATE_FILE)}|random_states_[0-9]+\.ocf"
# What save_state writes, and what a killed write of them left before the folder was
# written whole: a folder holding anything else is not replaced.
_OWN_ENTRIES = rf"{_SAVED_FILES}|{temp_names_of(_SAVED_FILES).pattern}"


def save_state(accelerator: accelerate.Accelerator, output_dir: str | os.PathLike[str]) -> Path:
    """Save the accelerator's training state in ``output_dir`` as OCF files; return the folder.

    Examples:
        >>> ocf.huggingface.save_state(accelerator, "checkpoints/step-100")
    """
    _refuse_sharded(accelerator)
    folder = Path(output_dir)
    staged = StagedFolder(folder, shared_write_id(accelerator), own_entries=_OWN_ENTRIES)
    main = accelerator.is_main_process

    def prepare() -> None:
        if main:
            remove_leftovers(staged.target.parent, re.escape(staged.target.name))
            staged.create()  # refuses a folder holding what the save does not write

    def write() -> None:
        if main:
            save_tree(_main_state(accelerator), staged.folder / STATE_FILE,
                      {"accelerate_version": accelerate.__version__})
        save_tree(global_random_states(),
                  _random_states_file(staged.folder, accelerator.process_index))

    try:
        on_every_process(accelerator, prepare)
        on_every_process(accelerator, write)
        on_every_process(accelerator, staged.commit if main else lambda: None)
    except BaseException:
        if main:
            staged.discard()
        raise
    return folder


def _main_state(accelerator: accelerate.Accelerator) -> dict[str, Any]:
    """What the main process saves: every prepared object's state and the step."""
    return {
        "models": [accelerator.get_state_dict(model, unwrap=False)
                   for model in accelerator._models],
        "optimizers": [optimizer.state_dict() for optimizer in accelerator._optimizers],
        "schedulers": [scheduler.state_dict() for scheduler in accelerator._schedulers],
        "dataloaders": [loader.state_dict() if _stateful(loader) else None
                        for loader in accelerator._dataloaders],
        "custom_objects": [obj.state_dict() for obj in accelerator._custom_objects],
        "scaler": accelerator.scaler.state_dict() if accelerator.scaler is not None else None,
        "step": accelerator.step,
    }


def load_state(accelerator: accelerate.Accelerator, input_dir: str | os.PathLike[str]) -> None:
    """Restore the state :func:`save_state` wrote in ``input_dir`` into the prepared objects.

    Examples:
        >>> ocf.huggingface.load_state(accelerator, "checkpoints/step-100")
    """
    _refuse_sharded(accelerator)
    folder = Path(input_dir)
    state = load_tree(folder / STATE_FILE, device=accelerator.device)
    live = {"models": accelerator._models, "optimizers": accelerator._optimizers,
            "schedulers": accelerator._schedulers, "dataloaders": accelerator._dataloaders,
            "custom_objects": accelerator._custom_objects}
    for part in _PARTS:
        saved = state.get(part) if isinstance(state, dict) else None
        if not isinstance(saved, list) or len(saved) != len(live[part]):
            count = len(saved) if isinstance(saved, list) else "no"
            raise InvalidError(f"the checkpoint holds {count} {part}, the accelerator "
                               f"{len(live[part])}; they are matched by position",
                               path=folder / STATE_FILE)
    random_states = load_tree(_random_states_file(folder, accelerator.process_index))
    for model, weights in zip(live["models"], state["models"]):
        model.load_state_dict(weights)
    for optimizer, optimizer_state in zip(live["optimizers"], state["optimizers"]):
        optimizer.load_state_dict(optimizer_state)
    for scheduler, scheduler_state in zip(live["schedulers"], state["schedulers"]):
        scheduler.load_state_dict(scheduler_state)
    for loader, loader_state in zip(live["dataloaders"], state["dataloaders"]):
        if loader_state is not None and _stateful(loader):
            loader.load_state_dict(loader_state)
    for obj, obj_state in zip(live["custom_objects"], state["custom_objects"]):
        obj.load_state_dict(obj_state)
    if accelerator.scaler is not None and state.get("scaler") is not None:
        accelerator.scaler.load_state_dict(state["scaler"])
    accelerator.step = state["step"]
    set_global_random_states(random_states)


def _stateful(loader: Any) -> bool:
    return bool(getattr(loader, "use_stateful_dataloader", False))


def _random_states_file(folder: Path, process_index: int) -> Path:
    return folder / f"random_states_{process_index}.ocf"


def _refuse_sharded(accelerator: accelerate.Accelerator) -> None:
    kind = getattr(accelerator.distributed_type, "name", str(accelerator.distributed_type))
    if kind in _SHARDED:
        raise ValueError(f"ocf.huggingface.save_state/load_state do not handle {kind} training "
                         "state; use Accelerator.save_state there")
