"""One rank of the sharding matrix (test_sharding_matrix.py).

Run as ``python sharding_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT in the environment (tests/ranks.py). One process group runs
several cases, each a model sharded as training engines shard it (see
:data:`LAYOUTS`), trained with AdamW on gloo:

- ``save`` (a list of layouts): for each, train :data:`SAVE_AT` steps, save
  through ``dcp.save`` with OCF's StorageWriter (``<layout>-w<world>``) and
  through ``ocf.distributed.torch.save`` (``<layout>-w<world>-torch``),
  and, for the cases listed in ``async``, through ``dcp.async_save`` in a thread
  (``<layout>-w<world>-async``) and, with ``async_process``, in DCP's
  background process too (``-async-process``), a training step running
  before the saves are waited for; rank 0 keeps the
  full state at the save as ``saved-<checkpoint>.npz``. Then :data:`AFTER`
  more steps (the losses of the uninterrupted run), and for each checkpoint a
  fresh model loads it and trains the same steps (the losses of the resumed run).
- ``load`` (a list of [checkpoint, layout]): a fresh model in ``layout`` on
  this world size loads the checkpoint (a ``-torch`` one with ``load_into``,
  any other with ``dcp.load``), and rank 0 keeps the full state it then holds
  as ``loaded-<checkpoint>-w<world>.npz``; ``load_after`` the same once the
  saves of the job are done.

Step ``s`` trains on a batch drawn from seed ``s`` alone, each data-parallel
rank taking its equal share of the rows, so every world size sees the same data.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future
from itertools import pairwise
from pathlib import Path
from typing import Any

import gloo_rank  # tests/, the script's own folder
import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Placement, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

from ocf.distributed import torch as distributed
from ocf.distributed.dcp import StorageReader, StorageWriter

SAVE_AT, AFTER = 2, 2
BATCH = 12  # rows of a step's batch: an equal share for 1, 2, 3 or 4 data-parallel ranks

# The model of issue 27: on 2 or more ranks the last layer's weight [1, 33] leaves
# ranks an empty shard, and 33 rows split unevenly.
MLP = (8, 96, 33, 1)
# Column- then row-parallel, its hidden size split evenly over 2, 3 and 4 ranks (DTensor's
# tensor parallel needs that), 5 rows unevenly.
TP = (8, 12, 5)
# The same for tensor parallel over 2 ranks and FSDP2 over 2: a column-parallel weight's
# 5 local rows (of 10) split 3 and 2 by FSDP2, in a strided sharding.
TP_FSDP = (8, 10, 5)
# FSDP2 sharding weights on their columns: it refuses uneven splits on dim 1, so every
# input size divides by 2, 3 and 4 (the biases, on dim 0, still split unevenly).
COLUMNS = (12, 24, 12, 1)


class Parallel:
    """A model, its optimizer and which slice of a batch this rank trains on."""

    def __init__(self, model: torch.nn.Module, sizes: tuple[int, ...], data_rank: int,
                 data_ranks: int) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        self.data_rank, self.data_ranks = data_rank, data_ranks
        self.inputs, self.outputs = sizes[0], sizes[-1]

    def step(self, step: int) -> float:
        data = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(BATCH, self.inputs, generator=data)
        y = torch.randn(BATCH, self.outputs, generator=data)
        share = BATCH // self.data_ranks
        rows = slice(self.data_rank * share, (self.data_rank + 1) * share)
        loss = torch.nn.functional.mse_loss(self.model(x[rows]), y[rows])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return float(loss.item())

    def state(self) -> dict[str, Any]:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optim": optimizer_state}

    def set_state(self, state: dict[str, Any]) -> None:
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])


def sequential(sizes: tuple[int, ...]) -> torch.nn.Sequential:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for n, (a, b) in enumerate(pairwise(sizes)):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if n < len(sizes) - 2 else [])
    return torch.nn.Sequential(*layers)


def shard_layers(model: torch.nn.Module, mesh: DeviceMesh, reshard: bool,
                 columns: bool = False) -> None:
    """FSDP2 as its documentation applies it: each Linear, then the root; with
    ``columns``, weights sharded on their columns (``shard_placement_fn``)."""
    def placement(parameter: torch.nn.Parameter) -> Shard | None:
        return Shard(1) if columns and parameter.ndim == 2 else None

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard,
                        shard_placement_fn=placement)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)


def fsdp(world: int, sizes: tuple[int, ...], reshard: bool = True,
         columns: bool = False) -> Parallel:
    model = sequential(sizes)
    shard_layers(model, init_device_mesh("cpu", (world,)), reshard, columns)
    return Parallel(model, sizes, dist.get_rank(), world)


def hsdp(world: int, sizes: tuple[int, ...]) -> Parallel:
    """Replicated across the first mesh dimension, sharded across the second."""
    model = sequential(sizes)
    replicas = 2 if world % 2 == 0 else 1
    mesh = init_device_mesh("cpu", (replicas, world // replicas),
                            mesh_dim_names=("replicate", "shard"))
    shard_layers(model, mesh, True)
    return Parallel(model, sizes, dist.get_rank(), world)


def tensor_parallel(model: torch.nn.Module, mesh: DeviceMesh) -> None:
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


def tp(world: int, sizes: tuple[int, ...]) -> Parallel:
    """Tensor parallel over every rank: DTensors Shard(0), Shard(1) and Replicate."""
    model = sequential(sizes)
    tensor_parallel(model, init_device_mesh("cpu", (world,)))
    return Parallel(model, sizes, 0, 1)


def tp_fsdp(world: int, sizes: tuple[int, ...]) -> Parallel:
    """Tensor parallel within rows of the mesh, FSDP2 across them (the strided sharding
    of a column-parallel weight sharded again on its rows)."""
    model = sequential(sizes)
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    tensor_parallel(model, mesh["tp"])
    shard_layers(model, mesh["dp"], True)
    return Parallel(model, sizes, mesh["dp"].get_local_rank(), mesh["dp"].size())


LAYOUTS: dict[str, Callable[[int, tuple[int, ...]], Parallel]] = {
    "fsdp": fsdp,
    "fsdp-keep": lambda world, sizes: fsdp(world, sizes, reshard=False),
    "fsdp-columns": lambda world, sizes: fsdp(world, sizes, columns=True),
    "hsdp": hsdp,
    "tp": tp,
    "tp-fsdp": tp_fsdp,
}
# What each case saves: a layout and the model it shards.
CASES = {"fsdp": ("fsdp", MLP), "fsdp-keep": ("fsdp-keep", MLP), "hsdp": ("hsdp", MLP),
         "fsdp-columns": ("fsdp-columns", COLUMNS),
         "tp": ("tp", TP), "tp-fsdp": ("tp-fsdp", TP_FSDP)}


def keep_full_state(parallel: Parallel, name: str) -> None:
    """Rank 0 writes every tensor of the unsharded state, flattened, to ``name``."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optimizer_state = get_state_dict(parallel.model, parallel.optimizer,
                                                  options=options)
    if dist.get_rank() != 0:
        return
    flat = {f"model.{k}": v for k, v in model_state.items()}
    for param, values in optimizer_state["state"].items():
        flat.update({f"optim.state.{param}.{k}": v for k, v in values.items()})
    np.savez(name, **{k: v.numpy() for k, v in flat.items()})


def flat_tensors(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of a DCP state dict under the keys DCP gives them."""
    flat = {f"model.{k}": v for k, v in state["model"].items()}
    for param, values in state["optim"]["state"].items():
        flat.update({f"optim.state.{param}.{k}": v for k, v in values.items()})
    return flat


def save_torch(path: str, parallel: Parallel) -> None:
    """``ocf.distributed.torch.save`` of the state's tensors: DTensors on every rank, a
    plain tensor (AdamW's step, the same on every rank) by rank 0 alone."""
    tensors = {key: value for key, value in flat_tensors(parallel.state()).items()
               if isinstance(value, DTensor) or dist.get_rank() == 0}
    distributed.save(tensors, path)


def load(path: str, parallel: Parallel) -> None:
    target = parallel.state()
    if path.endswith("-torch"):
        distributed.load_into(flat_tensors(target), path)
    else:
        dcp.load(target, storage_reader=StorageReader(path))
    parallel.set_state(target)


def save_case(case: str, world: int, with_async: bool, in_process: bool) -> dict[str, Any]:
    name = f"{case}-w{world}"
    layout, sizes = CASES[case]
    parallel = LAYOUTS[layout](world, sizes)
    for step in range(1, SAVE_AT + 1):
        parallel.step(step)
    state = parallel.state()
    kinds = sorted({f"{type(p).__name__}({p.dim})" if isinstance(p, Shard) else
                    type(p).__name__ for value in flat_tensors(state).values()
                    if isinstance(value, DTensor) for p in value.placements})
    empty = sorted(key for key, value in flat_tensors(state).items()
                   if isinstance(value, DTensor) and value.to_local().numel() == 0)
    dcp.save(state, storage_writer=StorageWriter(name))
    save_torch(f"{name}-torch", parallel)
    keep_full_state(parallel, f"saved-{name}.npz")
    checkpoints = [name, f"{name}-torch"]
    losses = []
    if with_async:
        group = dist.new_group(backend="gloo")  # DCP's collectives off the training group
        pending = [dcp.async_save(parallel.state(),
                                  storage_writer=StorageWriter(f"{name}-async"),
                                  process_group=group)]
        checkpoints.append(f"{name}-async")
        if in_process:  # its daemon process joins a group of its own, at MASTER_ADDR
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            pending.append(dcp.async_save(
                parallel.state(), storage_writer=StorageWriter(f"{name}-async-process"),
                async_checkpointer_type=AsyncCheckpointerType.PROCESS))
            checkpoints.append(f"{name}-async-process")
        losses.append(parallel.step(SAVE_AT + 1))  # trains on while the saves run
        for future in pending:
            assert isinstance(future, Future)
            future.result()
    losses += [parallel.step(step) for step in range(SAVE_AT + 1 + len(losses),
                                                      SAVE_AT + AFTER + 1)]
    resumed = {}
    for checkpoint in checkpoints:
        fresh = LAYOUTS[layout](world, sizes)
        load(checkpoint, fresh)
        resumed[checkpoint] = [fresh.step(step) for step in range(SAVE_AT + 1,
                                                                  SAVE_AT + AFTER + 1)]
    return {"uninterrupted": losses, "resumed": resumed, "placements": kinds, "empty": empty}


EDGE_SAVERS = 4  # the world size that saves the edge tensors


def edge_tensors() -> dict[str, torch.Tensor]:
    """Tensors that leave ranks without elements (fewer rows than ranks, none at all),
    and one tensor per saving rank that only it holds, as pipeline stages hold theirs."""
    return {"short": torch.arange(6, dtype=torch.float64).reshape(2, 3),
            "no-rows": torch.zeros(0, 6, dtype=torch.bfloat16),
            "no-columns": torch.zeros(4, 0, dtype=torch.int32),
            "plain-empty": torch.zeros(0, 3),
            **{f"stage{r}.weight": torch.full((2, 3), r + 0.5) for r in range(EDGE_SAVERS)}}


# Placements of the edge tensors on a 1-D mesh: as saved, and as loaded.
EDGE_SAVED: dict[str, list[Placement]] = {
    "short": [Shard(0)], "no-rows": [Shard(0)], "no-columns": [Shard(1)]}
EDGE_LOADED: dict[str, list[Placement]] = {
    "short": [Shard(1)], "no-rows": [Shard(1)], "no-columns": [Shard(0)]}


def edge_state(placements: dict[str, list[Placement]], empty: bool) -> dict[str, torch.Tensor]:
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    values = {key: torch.zeros_like(value) if empty else value
              for key, value in edge_tensors().items()}
    return {key: distribute_tensor(value, mesh, placements[key]) if key in placements
            else value for key, value in values.items()}


def save_edges(world: int) -> dict[str, Any]:
    """Save the edge tensors both ways, each rank its own stage only; which of them this
    rank holds no element of."""
    assert world == EDGE_SAVERS
    rank = dist.get_rank()
    state = {key: value for key, value in edge_state(EDGE_SAVED, empty=False).items()
             if not key.startswith("stage") or key == f"stage{rank}.weight"}
    dcp.save(state, storage_writer=StorageWriter(f"edges-w{world}"))
    distributed.save({  # a plain tensor by the one rank it is of
        key: value for key, value in state.items()
        if isinstance(value, DTensor) or key.startswith("stage") or rank == 0},
        f"edges-w{world}-torch")
    return {"empty": sorted(key for key, value in state.items()
                            if isinstance(value, DTensor) and value.to_local().numel() == 0)}


def load_edges(checkpoint: str) -> dict[str, bool]:
    """Load saved edge tensors, every stage on every rank, into other placements; whether
    each equals its value."""
    state = edge_state(EDGE_LOADED, empty=True)
    if checkpoint.endswith("-torch"):
        distributed.load_into(state, checkpoint)
    else:
        dcp.load(state, storage_reader=StorageReader(checkpoint))
    expected = edge_tensors()
    return {key: bool(torch.equal(value.full_tensor() if isinstance(value, DTensor) else value,
                                  expected[key]) and value.dtype == expected[key].dtype)
            for key, value in state.items()}


def load_checkpoint(checkpoint: str, case: str, layout: str, world: int) -> None:
    parallel = LAYOUTS[layout](world, CASES[case][1])
    load(checkpoint, parallel)
    keep_full_state(parallel, f"loaded-{checkpoint}-w{world}.npz")


def stop_background_saver() -> None:
    """End DCP's background save process, if async_save started one, as its own
    finalizer does (a process ended by os._exit runs no finalizer)."""
    from torch.distributed.checkpoint import _async_process_executor as executor

    daemon = executor._CHECKPOINT_PROCESS
    if daemon is not None:
        executor._CHECKPOINT_PROCESS = None
        daemon.__del__()


def main() -> None:
    job = json.loads(sys.argv[1])
    torch.use_deterministic_algorithms(True)
    rank, world = gloo_rank.join(timeout=120)
    for checkpoint, case, layout in job.get("load", []):
        load_checkpoint(checkpoint, case, layout, world)
    edges = {checkpoint: load_edges(checkpoint) for checkpoint in job.get("load_edges", [])}
    saved = {case: save_case(case, world, case in job.get("async", []),
                             case in job.get("async_process", []))
             for case in job.get("save", [])}
    saved_edges = save_edges(world) if job.get("save_edges") else None
    for checkpoint, case, layout in job.get("load_after", []):  # what this job saved
        load_checkpoint(checkpoint, case, layout, world)
    Path(f"{rank}.json").write_text(json.dumps({"saved": saved, "edges": edges,
                                                "saved_edges": saved_edges}))
    stop_background_saver()
    gloo_rank.leave()


if __name__ == "__main__":
    main()
