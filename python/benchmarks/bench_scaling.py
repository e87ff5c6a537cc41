"""Throughput of one save by 1, 2 and 4 writer processes, against each engine's own format.

    .venv/bin/python python/benchmarks/bench_scaling.py [--mib 512] [--repeat 3] [--quick]

The state is ``--mib`` MiB of float32 in 8 tensors, split by rows over the
writers (each holds its share only). Every writer is a real process; all
start a save together after a barrier, and the save ends when the slowest
returns (every system below returns only once its checkpoint is complete).

- torch engine (gloo group, DTensors sharded on a 1-D mesh): ``raw`` (each
  rank writes its bytes to a file of its own and fsyncs: the floor),
  ``ocf`` (``ocf.distributed.torch.save``: parts, then rank 0 merges),
  ``dcp`` (``torch.distributed.checkpoint.save`` with its FileSystemWriter),
  ``ocf-dcp`` (``dcp.save`` with ``ocf.distributed.dcp.StorageWriter``), and
  ``ocf-s3`` (``ocf.distributed.torch.save`` to a moto S3 server on loopback).
- jax engine (``jax.distributed`` on loopback, one CPU device a process):
  ``ocf`` (``ocf.distributed.jax.save``) and ``orbax``
  (``orbax.checkpoint.StandardCheckpointer``, waited for).

Reported per system and writer count: the median over ``--repeat`` saves of
the whole save's MB/s (state bytes / slowest writer's time), the slowest
and the fastest writer's stall (time inside the save call), and the ratio of
the time to the raw floor's with the same writers. Progress on stderr, the
Markdown table on stdout. One machine: the writers share its cores and disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
TENSORS = 8
ROWS = 1024  # of every tensor; columns make up the size


# -- one writer process ----------------------------------------------------------------------


def _shares(mib: int, rank: int, world: int) -> dict[str, np.ndarray]:
    cols = mib * (1 << 20) // (4 * TENSORS * ROWS)
    rows = slice(rank * ROWS // world, (rank + 1) * ROWS // world)
    rng = np.random.default_rng(rank)
    return {f"layer{i}/w": rng.standard_normal((rows.stop - rows.start, cols), np.float32)
            for i in range(TENSORS)}


def _torch_worker(job: dict[str, Any], rank: int, world: int) -> list[float]:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    from ocf.distributed import torch as ocf_torch
    from ocf.distributed.dcp import StorageWriter

    dist.init_process_group("gloo", init_method=job["init"], rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    local = _shares(job["mib"], rank, world)
    state = {k: DTensor.from_local(torch.from_numpy(v), mesh, [Shard(0)]) for k, v in
             local.items()}
    times = []
    for n in range(job["repeat"] + 1):  # the first is a warm-up
        target = f"{job['dir']}/{job['system']}-{n}"
        dist.barrier()
        start = time.perf_counter()
        if job["system"] == "raw":
            os.makedirs(target, exist_ok=True)
            with open(f"{target}/{rank}.bin", "wb") as f:
                for value in local.values():
                    f.write(memoryview(value).cast("B"))
                f.flush()
                os.fsync(f.fileno())
        elif job["system"] == "ocf":
            ocf_torch.save(target, state)
        elif job["system"] == "ocf-s3":
            ocf_torch.save(f"{job['url']}/{n}", state, storage_options=job["storage_options"])
        elif job["system"] == "dcp":
            dcp.save(state, checkpoint_id=target)
        elif job["system"] == "ocf-dcp":
            dcp.save(state, storage_writer=StorageWriter(target))
        times.append(time.perf_counter() - start)
        dist.barrier()
    dist.destroy_process_group()
    return times[1:]


def _jax_worker(job: dict[str, Any], rank: int, world: int) -> list[float]:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from ocf.distributed import jax as ocf_jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    port = job["init"].rsplit(":", 1)[1]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=world,
                               process_id=rank)
    mesh = Mesh(np.array(jax.devices()), ("rows",))
    local = _shares(job["mib"], rank, world)
    sharding = NamedSharding(mesh, P("rows"))
    tree = {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}
    checkpointer = None
    if job["system"] == "orbax":
        import orbax.checkpoint as ocp
        checkpointer = ocp.StandardCheckpointer()
    times = []
    for n in range(job["repeat"] + 1):
        target = f"{job['dir']}/{job['system']}-{n}"
        multihost_utils.sync_global_devices(f"start {n}")
        start = time.perf_counter()
        if checkpointer is not None:
            checkpointer.save(target, tree)
            checkpointer.wait_until_finished()
        else:
            ocf_jax.save(target, tree)
        times.append(time.perf_counter() - start)
        multihost_utils.sync_global_devices(f"end {n}")
    jax.distributed.shutdown()
    return times[1:]


def worker(job: dict[str, Any]) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    run = _torch_worker if job["engine"] == "torch" else _jax_worker
    Path(job["out"], f"{rank}.json").write_text(json.dumps(run(job, rank, world)))


# -- the driver ------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(job: dict[str, Any], world: int, base: Path) -> list[list[float]]:
    """Every writer's save times (a list per rank)."""
    out = Path(tempfile.mkdtemp(dir=base))
    job = {**job, "out": str(out), "dir": str(out / "ckpt"),
           "init": f"tcp://127.0.0.1:{_free_port()}"}
    env = {**os.environ, "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1",
           "GLOO_SOCKET_IFNAME": "lo"}
    processes = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(job)],
                                  env={**env, "RANK": str(r)}) for r in range(world)]
    codes = [p.wait(timeout=1800) for p in processes]
    if codes != [0] * world:
        raise RuntimeError(f"{job['engine']} {job['system']} x{world}: exit codes {codes}")
    times = [json.loads((out / f"{r}.json").read_text()) for r in range(world)]
    shutil.rmtree(out, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--quick", action="store_true", help="64 MiB, 1 repeat, no S3")
    parser.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir)")
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    if args.quick:
        args.mib, args.repeat = 64, 1
    base = Path(tempfile.mkdtemp(prefix="ocf-scaling-", dir=args.dir))
    systems = [("torch", "raw"), ("torch", "ocf"), ("torch", "ocf-dcp"), ("torch", "dcp"),
               ("jax", "ocf"), ("jax", "orbax")]
    server = None
    if not args.quick:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from s3server import start_server

        server = start_server(base / "moto.log")
        systems.append(("torch", "ocf-s3"))
    rows = []
    floor: dict[int, float] = {}
    try:
        for world in (int(w) for w in args.writers.split(",")):
            for engine, system in systems:
                job = {"engine": engine, "system": system, "mib": args.mib,
                       "repeat": args.repeat}
                if server is not None and system == "ocf-s3":
                    job["url"] = f"s3://{server.new_bucket()}/ckpt"
                    job["storage_options"] = server.storage_options
                print(f"{engine} {system} x{world} ...", file=sys.stderr, flush=True)
                times = measure(job, world, base)
                wall = statistics.median(max(t[n] for t in times) for n in range(args.repeat))
                fastest = statistics.median(min(t[n] for t in times) for n in range(args.repeat))
                if system == "raw":
                    floor[world] = wall
                rows.append((engine, system, world, args.mib * 1.048576 / wall, wall, fastest,
                             wall / floor[world]))
    finally:
        if server is not None:
            from s3server import stop_server

            stop_server(server)
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.mib} MiB of float32 in {TENSORS} tensors split by rows; median of "
          f"{args.repeat} saves after a warm-up; {os.cpu_count()} cores.\n")
    print("| engine | system | writers | MB/s | slowest writer (s) | fastest writer (s) "
          "| time / raw floor |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for engine, system, world, rate, wall, fastest, ratio in rows:
        print(f"| {engine} | {system} | {world} | {rate:.0f} | {wall:.3f} | {fastest:.3f} "
              f"| {ratio:.2f}x |")


if __name__ == "__main__":
    main()
