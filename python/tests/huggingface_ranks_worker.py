"""One process of a two-process ``ocf.huggingface.save_state`` (gloo on the CPU).

``python huggingface_ranks_worker.py FOLDER``, with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT set: saves a small model's state
into FOLDER once, then again while the main process puts a file of the
user's into FOLDER during the write (from a registered object's
``state_dict``), so that only the main process's commit fails. Prints
"first saved", then "raised <type>: <message>" or "returned".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from ocf.huggingface import save_state


class DropsANote:
    """A registered object whose state_dict, on the main process, writes into the folder."""

    def __init__(self, folder: Path, main: bool) -> None:
        self.folder, self.main, self.armed = folder, main, False

    def state_dict(self) -> dict[str, Any]:
        if self.armed and self.main:
            (self.folder / "notes.txt").write_text("the user's")
        return {"armed": self.armed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.armed = bool(state["armed"])


def main() -> None:
    folder = Path(sys.argv[1])
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.num_processes
    model = accelerator.prepare(torch.nn.Linear(4, 2))
    note = DropsANote(folder, accelerator.is_main_process)
    accelerator.register_for_checkpointing(note)
    save_state(accelerator, folder)
    print("first saved", flush=True)
    note.armed = True
    try:
        save_state(accelerator, folder)
    except Exception as exc:
        print(f"raised {type(exc).__name__}: {exc}", flush=True)
    else:
        print("returned", flush=True)
    del model
    # Wait for the other process, then end without tearing the gloo group down: that
    # teardown now and then aborts a process that did all its work (see gloo_rank.py).
    accelerator.wait_for_everyone()
    os._exit(0)


if __name__ == "__main__":
    main()
