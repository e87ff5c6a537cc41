"""What the processes of one save share: its write id, and whether every step succeeded."""

from __future__ import annotations

from collections.abc import Callable

from ocf.format.commit import new_write_id
from ocf.huggingface._framework import accelerate


def shared_write_id(accelerator: accelerate.Accelerator) -> str:
    """A new write id drawn by the main process and given to every other one."""
    ids = [new_write_id()]
    if accelerator.num_processes > 1:
        accelerate.utils.broadcast_object_list(ids, from_process=0)
    return ids[0]


def on_every_process(accelerator: accelerate.Accelerator, step: Callable[[], object]) -> None:
    """Run ``step`` on every process (what it does may depend on the process), then
    raise on every process if it raised on any: a process that went on to the next
    barrier would wait there forever for one that failed. The process that failed
    raises its own error; the others a RuntimeError naming it."""
    error: Exception | None = None
    try:
        step()
    except Exception as exc:  # not BaseException: an interrupt ends the run anyway
        error = exc
    failures = [None if error is None else
                f"process {accelerator.process_index}: {type(error).__name__}: {error}"]
    if accelerator.num_processes > 1:
        failures = accelerate.utils.gather_object(failures)
    if error is not None:
        raise error
    failed = [failure for failure in failures if failure is not None]
    if failed:
        raise RuntimeError(f"the save failed on another process ({failed[0]}); nothing "
                           "was published")
