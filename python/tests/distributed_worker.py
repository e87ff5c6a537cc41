"""One rank of the multi-process tests of ocf.distributed.torch (test_distributed_torch.py).

Run as ``python distributed_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT (a tcp:// URL) in the environment; joins a gloo process group
on loopback and does the job:

- ``save``: write the ranks' parts of checkpoint 1 (:func:`full_arrays`, rows
  split with np.array_split), to ``directory`` and, with ``url``, to S3 too
  (both through save_numbered);
- ``load``: read this rank's rows, then its columns, of every tensor (from
  ``path``, and from ``url`` on S3 when given) and store them as .npy files
  with the bytes read, for the test to compare;
- ``subgroup``: ranks 1 and 2 save in a group of their own, where global
  rank 2 (rank 1 of that group) fails with an error outside OCF's;
- ``die``: save checkpoint 1, then start checkpoint 2, in which rank
  ``victim`` stops half way (after writing data) and waits to be killed.

Results go to ``out``: ``<rank>.json`` and ``<rank>-<source>-<axis>-<key>.npy``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import torch
import torch.distributed as dist

from ocf.distributed import torch as distributed
from ocf.distributed.parts import Slice

SLICED = ("model/w", "model/emb", "opt/m")  # partitioned by rows across the savers
OWNED = {"step": 0, "rank1/bias": 1, "rank3/counts": 3}  # whole, written by one rank


def full_arrays(version: int = 1) -> dict[str, np.ndarray]:
    """The checkpoint's tensors, from NumPy alone."""
    rng = np.random.default_rng(2024 + version)
    return {
        "model/w": rng.standard_normal((37, 12)).astype(np.float32),
        "model/emb": rng.integers(-1000, 1000, (20, 9), dtype=np.int64),
        "opt/m": rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16),
        "step": np.array(1000 * version, dtype=np.int64),
        "rank1/bias": rng.standard_normal(12).astype(np.float64),
        "rank3/counts": rng.integers(0, 255, (5, 5), dtype=np.uint8),
    }


def bounds(size: int, parts: int) -> list[tuple[int, int]]:
    """np.array_split's runs of ``size`` into ``parts``."""
    pieces = np.array_split(np.arange(size), parts)
    return [(int(p[0]), int(p[-1]) + 1) if len(p) else (0, 0) for p in pieces]


def to_torch(array: np.ndarray) -> torch.Tensor:
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def owned(rank: int, world: int, version: int = 1) -> dict[str, object]:
    """What ``rank`` holds: its rows of the sliced tensors, and the tensors it owns."""
    full = full_arrays(version)
    tensors: dict[str, object] = {}
    for key in SLICED:
        start, stop = bounds(full[key].shape[0], world)[rank]
        tensors[key] = Slice(to_torch(full[key][start:stop]), (start, 0), full[key].shape)
    tensors.update({key: to_torch(full[key]) for key, r in OWNED.items() if r == rank})
    return tensors


class StallsUntilKilled:
    """A value whose conversion to an array (inside the save) signals and never returns,
    like a device copy that hangs: the rank is then killed half way through its part."""

    def __init__(self, ready: Path) -> None:
        self.ready = ready

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        self.ready.write_text("writing")
        time.sleep(600)
        raise AssertionError("not killed")


def save(job: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    distributed.save_numbered(owned(rank, world), job["directory"], 1,
                              metadata={"step": 1, "world": world})
    if job.get("url"):
        distributed.save_numbered(owned(rank, world), job["url"].rsplit("/", 1)[0], 1,
                                  metadata={"step": 1}, storage_options=job["storage_options"])
    return {"saved": True}


class FailsToConvert:
    """A value whose conversion to an array fails outside OCF (a broken device copy)."""

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        raise RuntimeError("device copy failed")


def subgroup(job: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """Ranks 1 and 2 save in their own group; global rank 2 is rank 1 there, and fails."""
    group = dist.new_group([1, 2])  # collective over every rank, members or not
    result: dict[str, Any] = {"error": None}
    if rank != 0:
        tensors: dict[str, object] = {"x": np.ones(3)} if rank == 1 else {"y": FailsToConvert()}
        try:
            distributed.save(tensors, job["directory"], group=group)
        except Exception as exc:
            result = {"error": type(exc).__name__, "message": str(exc)}
    dist.barrier()  # rank 0 hosts the rendezvous store: it stays until the save is done
    return result


def load(job: dict[str, Any], rank: int, world: int, out: Path) -> dict[str, Any]:
    """Load this rank's rows (axis 0), then its columns (axis 1), of every sliced tensor."""
    full = full_arrays()
    result: dict[str, Any] = {}
    sources = {"local": (job["path"], None)}
    if job.get("url"):
        sources["s3"] = (job["url"], job["storage_options"])
    for (source, (path, storage)), axis in ((s, a) for s in sources.items() for a in (0, 1)):
        wanted: dict[str, object] = {}
        for key in SLICED:
            start, stop = bounds(full[key].shape[axis], world)[rank]
            wanted[key] = (slice(None),) * axis + (slice(start, stop),)
        wanted.update({key: None for key, r in OWNED.items() if r % world == rank})
        loaded = distributed.load(path, wanted, storage_options=storage)
        for key, tensor in loaded.tensors.items():
            array = tensor.view(torch.int16).numpy() if tensor.dtype == torch.bfloat16 else \
                tensor.numpy()
            np.save(out / f"{rank}-{source}-{axis}-{key.replace('/', '_')}.npy", array)
        result[f"{source}-{axis}"] = {"bytes_read": loaded.bytes_read,
                                      "bytes_needed": loaded.bytes_needed}
    return result


def die(job: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    distributed.save_numbered(owned(rank, world), job["directory"], 1)
    tensors = owned(rank, world, version=2)
    if rank == job["victim"]:
        # 4 MiB go to the shard file first (above the writer's 1 MiB gathering), then
        # the save stalls inside this rank's part. The stalling value is a Slice's: the
        # save converts plain values before its part is opened, a Slice's value only
        # when the part writes it (a plain one stalled before any byte was written, and
        # the test then found a shard with data only when another rank had written one).
        tensors = {"victim/big": np.ones(1 << 20, np.float32),
                   "victim/stall": Slice(StallsUntilKilled(Path(job["ready"])), (0,), (1,)),
                   **tensors}
    try:
        distributed.save_numbered(tensors, job["directory"], 2)
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"error": None}


def main() -> None:
    job = json.loads(sys.argv[1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out = Path(job["out"])
    dist.init_process_group("gloo", init_method=os.environ["OCF_TEST_INIT"], rank=rank,
                            world_size=world, timeout=timedelta(seconds=30))
    modes = {"save": save, "die": die, "subgroup": subgroup}
    result = modes[job["mode"]](job, rank, world) if job["mode"] != "load" \
        else load(job, rank, world, out)
    (out / f"{rank}.json").write_text(json.dumps(result))
    sys.stdout.flush()
    # A group that lost a rank cannot be torn down cleanly; the results are written.
    os._exit(0)


if __name__ == "__main__":
    main()
