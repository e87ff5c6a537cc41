"""One rank of the DTensor tests of ocf.distributed.torch (test_distributed_dtensor.py).

Run as ``python dtensor_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT in the environment (tests/ranks.py).

- ``save``: on a 2 x 2 CPU mesh of four ranks, distribute the tensors of
  :func:`global_tensors` with the placements of :data:`SAVED` and save them.
- ``load``: on a 1-D mesh of every rank, make empty DTensors with the
  placements of :data:`LOADED`, fill them with ``load_into``, gather each with
  ``full_tensor()`` (torch's own collective) and report whether it equals the
  global tensor, with the bytes this rank read and the bytes its shards hold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gloo_rank  # tests/, the script's own folder
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Placement, Replicate, Shard, distribute_tensor

from ocf.distributed import torch as distributed

# Placements on the 2 x 2 mesh that saves, and on the 1-D mesh that loads.
SAVED: dict[str, list[Placement]] = {
    "grid": [Shard(0), Shard(1)],            # each rank a quarter
    "rows": [Shard(0), Replicate()],         # two replicas of each half
    "everywhere": [Replicate(), Replicate()],
    "uneven": [Shard(0), Shard(0)],          # 7 rows over 4 ranks, nested
}
LOADED: dict[str, list[Placement]] = {
    "grid": [Shard(1)], "rows": [Shard(1)], "everywhere": [Shard(0)], "uneven": [Replicate()],
}


def global_tensors() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return {
        "grid": torch.randn(512, 384, generator=generator),  # 768 KiB: reads by tile
        "rows": torch.randn(32, 128, generator=generator).to(torch.bfloat16),
        "everywhere": torch.arange(40, dtype=torch.int64).reshape(8, 5),
        "uneven": torch.randn(7, 3, generator=generator, dtype=torch.float64),
    }


def save(job: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    mesh = init_device_mesh("cpu", (2, world // 2))
    state = {key: distribute_tensor(value, mesh, SAVED[key])
             for key, value in global_tensors().items()}
    distributed.save(state, job["path"])
    return {}


def load(job: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    mesh = init_device_mesh("cpu", (world,))
    expected = global_tensors()
    state = {key: distribute_tensor(torch.zeros_like(value), mesh, LOADED[key])
             for key, value in expected.items()}
    read = distributed.load_into(state, job["path"])
    equal = {key: bool(torch.equal(state[key].full_tensor(), expected[key])) for key in state}
    held = sum(t.to_local().numel() * t.to_local().element_size() for t in state.values())
    return {"equal": equal, "bytes_read": read, "bytes_held": held}


def main() -> None:
    job = json.loads(sys.argv[1])
    rank, world = gloo_rank.join()
    result = {"save": save, "load": load}[job["mode"]](job, rank, world)
    (Path(job["out"]) / f"{rank}.json").write_text(json.dumps(result))
    gloo_rank.leave()


if __name__ == "__main__":
    main()
