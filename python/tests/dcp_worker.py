"""One rank of the FSDP2 + DCP tests (test_dcp_backend.py).

Run as ``python dcp_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT in the environment (tests/ranks.py). The model is a small MLP
sharded with FSDP2's ``fully_shard`` on a 1-D CPU mesh of every rank, trained
with AdamW; step ``s`` trains on a batch drawn from seed ``s`` alone, each rank
taking its equal share of rows, so any world size sees the same data order.

- ``train``: steps 1..``save_at``, then saves through ``dcp.save`` twice,
  with OCF's StorageWriter (``ocf/ckpt-<n>``) and DCP's own FileSystemWriter
  (``dcp/ckpt-<n>``); rank 0 keeps the full state as ``saved.npz``. Then one
  more step and an OCF save of ``ocf/ckpt-<n+1>`` in which rank ``victim``
  writes its part, touches ``ready`` and waits to be killed.
- ``values``: two saves of a tensor per rank and non-tensor values, held by
  rank 0 alone (``values-on-0``: part 0 is published with the other parts) and
  by both ranks (``values-on-both``: part 0 waits for rank 1's values); then
  a save in which rank 1 has nothing to write (``nothing-on-1``).
- ``resume``: loads ``<source>/ckpt-<n>`` (``source`` is ``ocf`` or ``dcp``),
  keeps the full state it loaded (``loaded-<source>.npz``), trains to step
  ``until`` and keeps the final full state (``final-<source>.npz``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import gloo_rank  # tests/, the script's own folder
import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.futures import Future

from ocf.distributed.dcp import StorageReader, StorageWriter

BATCH = 8  # rows of a step's batch, split evenly over 1, 2 or 4 ranks


def build(world: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int,
               rank: int, world: int) -> None:
    data = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(BATCH, 8, generator=data), torch.randn(BATCH, 4, generator=data)
    rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    loss = torch.nn.functional.mse_loss(model(x[rows]), y[rows])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optimizer_state}


def keep_full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int,
                    name: str) -> None:
    """Rank 0 writes every tensor of the unsharded state, flattened, to ``name``."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optimizer_state = get_state_dict(model, optimizer, options=options)
    if rank != 0:
        return
    flat = {f"model/{k}": v for k, v in model_state.items()}
    for param, values in optimizer_state["state"].items():
        flat.update({f"optim/{param}/{k}": v for k, v in values.items()})
    np.savez(name, **{k: v.numpy() for k, v in flat.items()})


class StallingWriter(StorageWriter):
    """OCF's writer, except that one rank stops after writing its part."""

    def __init__(self, path: str, stall: bool, ready: str) -> None:
        super().__init__(path)
        self.stall, self.ready = stall, ready

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        done = super().write_data(plan, planner)
        if self.stall:
            Path(self.ready).touch()
            time.sleep(600)
        return done


def train(job: dict[str, Any], rank: int, world: int) -> None:
    model, optimizer = build(world)
    last = job["save_at"]
    for step in range(1, last + 1):
        train_step(model, optimizer, step, rank, world)
    dcp.save(state(model, optimizer), storage_writer=StorageWriter(f"ocf/ckpt-{last}"))
    dcp.save(state(model, optimizer), checkpoint_id=f"dcp/ckpt-{last}")
    keep_full_state(model, optimizer, rank, "saved.npz")
    train_step(model, optimizer, last + 1, rank, world)
    writer = StallingWriter(f"ocf/ckpt-{last + 1}", rank == job["victim"], job["ready"])
    dcp.save(state(model, optimizer), storage_writer=writer)


def values(job: dict[str, Any], rank: int, world: int) -> None:
    tensor = {f"w{rank}": torch.full((3,), float(rank))}
    on_0 = {"note0": "from rank 0", "step": 7} if rank == 0 else {}
    dcp.save({**tensor, **on_0}, storage_writer=StorageWriter("values-on-0"))
    on_both = {"note0": "from rank 0"} if rank == 0 else {"note1": [1, 2]}
    dcp.save({**tensor, **on_both}, storage_writer=StorageWriter("values-on-both"))
    # Rank 1 has nothing to save: its part index still reaches the coordinator in-band.
    nothing_on_1 = {**tensor, "note0": "from rank 0"} if rank == 0 else {}
    dcp.save(nothing_on_1, storage_writer=StorageWriter("nothing-on-1"))


def resume(job: dict[str, Any], rank: int, world: int) -> None:
    model, optimizer = build(world)
    source, start = job["source"], job["save_at"]
    target = state(model, optimizer)
    path = f"{source}/ckpt-{start}"
    reader = StorageReader(path) if source == "ocf" else None
    dcp.load(target, checkpoint_id=path, storage_reader=reader)
    set_state_dict(model, optimizer, model_state_dict=target["model"],
                   optim_state_dict=target["optim"])
    keep_full_state(model, optimizer, rank, f"loaded-{source}.npz")
    for step in range(start + 1, job["until"] + 1):
        train_step(model, optimizer, step, rank, world)
    keep_full_state(model, optimizer, rank, f"final-{source}.npz")
    Path(f"{rank}.json").write_text(json.dumps(
        {"bytes_read": reader.bytes_read if reader else None}))


def main() -> None:
    job = json.loads(sys.argv[1])
    torch.use_deterministic_algorithms(True)
    rank, world = gloo_rank.join()
    {"train": train, "resume": resume, "values": values}[job["mode"]](job, rank, world)
    Path(f"{rank}.json").exists() or Path(f"{rank}.json").write_text("{}")
    gloo_rank.leave()


if __name__ == "__main__":
    main()
