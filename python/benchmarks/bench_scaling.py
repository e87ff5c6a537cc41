"""Throughput of saves by 1, 2 and 4 writer processes, and of resharded loads, against
each engine's own format.

    .venv/bin/python python/benchmarks/bench_scaling.py [--mib 128,1024] [--repeat 3]
        [--rounds 3] [--s3-mib 128] [--quick]

The state is ``--mib`` MiB of float32 in 8 tensors, split by rows over the
writers (each holds its share only); every size in the list is a run of its
own. Every writer is a real process; all start a save together after a
barrier, and the save ends when the slowest returns (every system below
returns only once its checkpoint is complete).

- torch engine (gloo group, DTensors sharded on a 1-D mesh): ``raw`` (each
  rank writes its bytes to a file of its own and fsyncs: the floor),
  ``ocf`` (``ocf.distributed.torch.save``: parts, then rank 0 merges),
  ``dcp`` (``torch.distributed.checkpoint.save`` with its FileSystemWriter),
  ``ocf-dcp`` (``dcp.save`` with ``ocf.distributed.dcp.StorageWriter``), and
  ``ocf-s3`` (``ocf.distributed.torch.save`` to a moto S3 server on loopback)
  against ``raw-s3`` (each rank puts its bytes as one object, a multipart
  upload of 16 MiB parts, 4 in flight: the floor of that server), at
  ``--s3-mib`` MiB (moto keeps every object in its own memory).
- resharded load (torch engine): the checkpoints OCF and DCP saved on 4
  writers, loaded by 2 and by 3 processes into DTensors sharded by rows
  (``Shard(0)``) and by columns (``Shard(1)``): ``ocf-load``
  (``ocf.distributed.torch.load_into``, with the stored bytes it read over
  the bytes the rank needs) and ``dcp-load`` (``dcp.load`` of DCP's own
  checkpoint), ratios to DCP's.
- jax engine (``jax.distributed`` on loopback, one CPU device a process):
  ``ocf`` (``ocf.distributed.jax.save``) and ``orbax``
  (``orbax.checkpoint.StandardCheckpointer``, waited for).

Every system of a writer count (every loader of a split) runs ``--rounds``
times, each time a new group of processes making one untimed save and
``--repeat`` timed ones, the order of the systems rotated by one each round:
on the machine these figures come from, whichever job runs first after a quiet
spell pays seconds of system time to fault in memory the host took back, and
a fixed order made the raw floor pay it every time (``--profile`` makes it one
round, a profile file per job and rank).

Reported per system and writer count: the median over every round's saves of
the whole save's MB/s (state bytes / slowest writer's time), the slowest
and the fastest writer's stall (time inside the save call), and the ratio of
the time to the raw floor's with the same writers (to ``raw-s3`` on S3); then
the CPU seconds of all writers together (every thread, user and system time)
and their ratio to the floor's, which a machine busy with other work distorts
less than the times. ``--systems`` and ``--no-loads`` run a subset.
``--profile DIR`` samples every rank with py-spy over its timed saves or loads
(after the warm-up; ``--native`` adds C frames) into
``DIR/<system>-<MiB>-x<ranks>[-rows|-columns]-rank<r>.txt`` (py-spy's raw
format, one stack a line with its sample count);
``python/benchmarks/pyspy_top.py DIR/*.txt`` prints each file's top frames.
``--best`` reports the smallest of the repeats instead of their median (each
column on its own), the figure other jobs on a shared machine disturb least.
Progress on stderr, the Markdown tables on stdout. One machine: the writers
share its cores and disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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


class _Profile:
    """py-spy sampling this process from the first timed repeat to the last, when the
    job asks for it (``--profile``): the warm-up and the process's start stay out."""

    def __init__(self, job: dict[str, Any], rank: int, world: int) -> None:
        self.job, self.process = job, None
        axis = {0: "-rows", 1: "-columns"}.get(job.get("axis", -1), "")
        self.output = (f"{job['profile']}/{job['engine']}-{job['system']}-{job['mib']}"
                       f"-x{world}{axis}-rank{rank}.txt" if job.get("profile") else None)

    def start(self) -> None:
        if self.output is None or self.process is not None:
            return
        command = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid",
                   str(os.getpid()), "--format", "raw", "--output", self.output,
                   "--rate", "200", *(["--native"] if self.job.get("native") else [])]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # py-spy attaches before the timed work begins

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            self.process.wait(timeout=120)


def _torch_worker(job: dict[str, Any], rank: int, world: int) -> list[float]:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=job["init"], rank=rank, world_size=world)
    run = _torch_load if job["system"].endswith("-load") else _torch_save
    times = run(job, rank, world)
    dist.barrier()  # every rank done before any tears the group down (gloo aborts otherwise)
    dist.destroy_process_group()
    return times


def _torch_save(job: dict[str, Any], rank: int, world: int) -> list[float]:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    from ocf.distributed import torch as ocf_torch
    from ocf.distributed.dcp import StorageWriter

    mesh = init_device_mesh("cpu", (world,))
    local = _shares(job["mib"], rank, world)
    state = {k: DTensor.from_local(torch.from_numpy(v), mesh, [Shard(0)]) for k, v in
             local.items()}
    times, cpu = [], []
    profile = _Profile(job, rank, world)
    for n in range(job["repeat"] + 1):  # the first is a warm-up
        target = job.get("target") or f"{job['dir']}/{job['system']}-{n}"
        if n == 1:
            profile.start()
        dist.barrier()
        start, start_cpu = time.perf_counter(), time.process_time()
        if job["system"] == "raw":
            os.makedirs(target, exist_ok=True)
            with open(f"{target}/{rank}.bin", "wb") as f:
                for value in local.values():
                    f.write(memoryview(value).cast("B"))
                f.flush()
                os.fsync(f.fileno())
        elif job["system"] == "raw-s3":
            _put_parallel(job, f"{job['url']}/{n}/{rank}.bin", local.values())
        elif job["system"] == "ocf":
            ocf_torch.save(state, target)
        elif job["system"] == "ocf-s3":
            ocf_torch.save(state, f"{job['url']}/{n}", storage_options=job["storage_options"])
        elif job["system"] == "dcp":
            dcp.save(state, checkpoint_id=target)
        elif job["system"] == "ocf-dcp":
            dcp.save(state, storage_writer=StorageWriter(target))
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        dist.barrier()
    profile.stop()
    return times[1:] + cpu[1:]


def _put_parallel(job: dict[str, Any], url: str, values: Any) -> None:
    """The S3 floor: the rank's bytes as one multipart upload, parts of 16 MiB, 4 in
    flight, straight through s3fs's requests (what a tuned uploader does)."""
    import io
    from concurrent.futures import ThreadPoolExecutor

    import fsspec

    fs = fsspec.filesystem("s3", **job["storage_options"])
    bucket, key, _ = fs.split_path(url)
    upload = fs.call_s3("create_multipart_upload", Bucket=bucket, Key=key)["UploadId"]
    part, size = io.BytesIO(), 16 << 20

    def send(number: int, body: io.BytesIO) -> dict[str, Any]:
        body.seek(0)
        out = fs.call_s3("upload_part", Bucket=bucket, Key=key, UploadId=upload,
                         PartNumber=number, Body=body)
        return {"PartNumber": number, "ETag": out["ETag"]}

    with ThreadPoolExecutor(4) as pool:
        sent = []
        for value in values:
            data, at = memoryview(value).cast("B"), 0
            while at < data.nbytes:
                take = min(size - part.tell(), data.nbytes - at)
                part.write(data[at:at + take])
                at += take
                if part.tell() == size:
                    sent.append(pool.submit(send, len(sent) + 1, part))
                    part = io.BytesIO()
        if part.tell():
            sent.append(pool.submit(send, len(sent) + 1, part))
        parts = [s.result() for s in sent]
    fs.call_s3("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload,
               MultipartUpload={"Parts": parts})


def _torch_load(job: dict[str, Any], rank: int, world: int) -> list[float]:
    """Load the checkpoint ``job["source"]`` saved on 4 writers into DTensors split
    along ``job["axis"]``; the times, then the stored bytes read over those needed."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from ocf.distributed import torch as ocf_torch

    mesh = init_device_mesh("cpu", (world,))
    cols = job["mib"] * (1 << 20) // (4 * TENSORS * ROWS)
    state = {f"layer{i}/w": distribute_tensor(torch.empty(ROWS, cols), mesh,
                                              [Shard(job["axis"])]) for i in range(TENSORS)}
    needed = sum(t.to_local().numel() * 4 for t in state.values())
    times, cpu, read = [], [], 0
    profile = _Profile(job, rank, world)
    for n in range(job["repeat"] + 1):
        if n == 1:
            profile.start()
        dist.barrier()
        start, start_cpu = time.perf_counter(), time.process_time()
        if job["system"] == "ocf-load":
            read = ocf_torch.load_into(state, job["source"])
        else:
            dcp.load(state, checkpoint_id=job["source"])
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        dist.barrier()
    profile.stop()
    return [*times[1:], *cpu[1:], read / needed]


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
    times, cpu = [], []
    profile = _Profile(job, rank, world)
    for n in range(job["repeat"] + 1):
        target = f"{job['dir']}/{job['system']}-{n}"
        if n == 1:
            profile.start()
        multihost_utils.sync_global_devices(f"start {n}")
        start, start_cpu = time.perf_counter(), time.process_time()
        if checkpointer is not None:
            checkpointer.save(target, tree)
            checkpointer.wait_until_finished()
        else:
            ocf_jax.save(tree, target)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        multihost_utils.sync_global_devices(f"end {n}")
    profile.stop()
    jax.distributed.shutdown()
    return times[1:] + cpu[1:]


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


def _typical(args: argparse.Namespace, values: list[float]) -> float:
    """The median of ``values`` (one per repeat), or with ``--best`` the smallest: on a
    machine shared with other jobs, the repeat they disturbed least."""
    return min(values) if args.best else statistics.median(values)


def _profiling(args: argparse.Namespace) -> dict[str, Any]:
    """What a job needs to know of ``--profile``."""
    if not args.profile:
        return {}
    os.makedirs(args.profile, exist_ok=True)
    return {"profile": os.path.abspath(args.profile), "native": args.native}


def _save_systems(args: argparse.Namespace, mib: int, server: Any) -> list[tuple[str, str]]:
    """The (engine, system) pairs to save at ``mib`` MiB; the floors always stay."""
    systems = [("torch", "raw"), ("torch", "ocf"), ("torch", "ocf-dcp"), ("torch", "dcp"),
               ("jax", "ocf"), ("jax", "orbax")]
    if server is not None and mib <= args.s3_mib:
        systems += [("torch", "raw-s3"), ("torch", "ocf-s3")]
    if args.systems:  # the floors stay: every ratio needs its own
        wanted = set(args.systems.split(",")) | {"raw", "raw-s3"}
        systems = [(e, s) for e, s in systems
                   if (s if e == "torch" else f"jax-{s}") in wanted]
    return systems


def _in_rounds(args: argparse.Namespace, names: list[str], run: Any, label: str
               ) -> dict[str, list[list[list[float]]]]:
    """``run(name)`` for every name, ``--rounds`` times, the order rotated by one each
    round; every name's results, a list of per-rank lists per round. On this machine the
    first job after a quiet spell pays for memory the host took back (seconds of system
    time to fault in pages), so no system may always come first."""
    results: dict[str, list[list[list[float]]]] = {name: [] for name in names}
    for r in range(args.rounds):
        turn = r % len(names)
        for name in names[turn:] + names[:turn]:
            print(f"{label} {name} (round {r + 1} of {args.rounds}) ...", file=sys.stderr,
                  flush=True)
            results[name].append(run(name))
    return results


def _over_repeats(args: argparse.Namespace, rounds: list[list[list[float]]],
                  combine: Any, offset: int = 0) -> float:
    """The typical value (``_typical``) over every repeat of every round of
    ``combine(every rank's value of that repeat)``; ``offset`` picks the measure (0:
    times, ``--repeat``: CPU seconds)."""
    return _typical(args, [combine(ranks[offset + n] for ranks in per_rank)
                           for per_rank in rounds for n in range(args.repeat)])


def _save_rows(args: argparse.Namespace, mib: int, base: Path, server: Any,
               sources: dict[str, str]) -> list[tuple[Any, ...]]:
    """Every save system at every writer count; the 4-writer OCF and DCP checkpoints
    are kept in ``sources`` for the loads."""
    systems = {f"{engine} {system}": (engine, system)
               for engine, system in _save_systems(args, mib, server)}
    rows = []
    for world in (int(w) for w in args.writers.split(",")):
        def run(name: str, world: int = world) -> list[list[float]]:
            engine, system = systems[name]
            job: dict[str, Any] = {"engine": engine, "system": system, "mib": mib,
                                   "repeat": args.repeat, **_profiling(args)}
            if not system.endswith("-s3"):
                return measure(job, world, base)
            bucket = server.new_bucket()  # emptied after: moto keeps objects in memory
            job["url"] = f"s3://{bucket}/ckpt"
            job["storage_options"] = server.storage_options
            try:
                return measure(job, world, base)
            finally:
                server.fs.rm(bucket, recursive=True)

        results = _in_rounds(args, list(systems), run, f"{mib} MiB: x{world}")
        floor: dict[str, tuple[float, float]] = {}
        for name, (engine, system) in systems.items():
            wall = _over_repeats(args, results[name], max)
            fastest = _over_repeats(args, results[name], min)
            # CPU seconds of all writers together (every thread, user and system): what
            # the save costs the machine, which a busy machine's scheduling hides less.
            cpu = _over_repeats(args, results[name], sum, args.repeat)
            if system.startswith("raw"):
                floor[system] = (wall, cpu)
            floor_wall, floor_cpu = floor["raw-s3" if system.endswith("-s3") else "raw"]
            rows.append((mib, engine, system, world, mib * 1.048576 / wall, wall, fastest,
                         wall / floor_wall, cpu, cpu / floor_cpu))
        if world == 4 and not args.no_loads:
            _save_sources(mib, base, base, sources)
    return rows


def _save_sources(mib: int, where: Path, base: Path, sources: dict[str, str]) -> None:
    """One more 4-writer save by OCF and by DCP, kept in ``where`` for the loads (a
    checkpoint already there is reused)."""
    for system in ("ocf", "dcp"):
        sources[system] = str(where / f"source-{mib}-{system}")
        if not Path(sources[system]).exists():
            print(f"{mib} MiB: {system} x4, the source of the loads ...", file=sys.stderr,
                  flush=True)
            measure({"engine": "torch", "system": system, "mib": mib, "repeat": 0,
                     "target": sources[system]}, 4, base)


def _load_rows(args: argparse.Namespace, mib: int, base: Path,
               sources: dict[str, str]) -> list[tuple[Any, ...]]:
    """Resharded loads of the 4-writer checkpoints by 2 and 3 processes, by rows and by
    columns: OCF's load_into and DCP's load of its own checkpoint."""
    rows = []
    source_of = {"dcp-load": sources["dcp"], "ocf-load": sources["ocf"]}
    for world, axis in ((w, a) for w in (2, 3) for a in (0, 1)):
        def run(system: str, world: int = world, axis: int = axis) -> list[list[float]]:
            job = {"engine": "torch", "system": system, "mib": mib, "repeat": args.repeat,
                   "source": source_of[system], "axis": axis, **_profiling(args)}
            return measure(job, world, base)

        split = "rows" if axis == 0 else "columns"
        results = _in_rounds(args, list(source_of), run, f"{mib} MiB: x{world} {split}")
        dcp_wall = _over_repeats(args, results["dcp-load"], max)
        # CPU seconds of the busiest loader: what a loaded machine distorts least.
        dcp_cpu = _over_repeats(args, results["dcp-load"], max, args.repeat)
        for system in source_of:
            wall = _over_repeats(args, results[system], max)
            cpu = _over_repeats(args, results[system], max, args.repeat)
            amplification = max(ranks[-1] for per_rank in results[system]
                                for ranks in per_rank) if system == "ocf-load" else None
            rows.append((mib, system, world, split, wall, wall / dcp_wall, cpu,
                         cpu / dcp_cpu, amplification))
    return rows


def _print_tables(args: argparse.Namespace, saves: list[tuple[Any, ...]],
                  loads: list[tuple[Any, ...]]) -> None:
    print(f"float32 in {TENSORS} tensors split by rows; {'best' if args.best else 'median'} "
          f"of {args.repeat} after a "
          f"warm-up in each of {args.rounds} rounds (systems in a rotated order); "
          f"{os.cpu_count()} cores.\n")
    print("| MiB | engine | system | writers | MB/s | slowest writer (s) | fastest writer (s) "
          "| time / raw floor | CPU s (all writers) | CPU / raw's |")
    print("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for mib, engine, system, world, rate, wall, fastest, ratio, cpu, cpu_ratio in saves:
        print(f"| {mib} | {engine} | {system} | {world} | {rate:.0f} | {wall:.3f} | "
              f"{fastest:.3f} | {ratio:.2f}x | {cpu:.3f} | {cpu_ratio:.2f}x |")
    if not loads:
        return
    print("\nResharded loads of the checkpoints saved by 4 writers (ocf: "
          "ocf.distributed.torch.save; dcp: its FileSystemWriter).\n")
    print("| MiB | system | loaders | split | slowest loader (s) | time / dcp-load "
          "| busiest loader's CPU (s) | CPU / dcp-load "
          "| stored bytes read / needed (worst rank) |")
    print("|--:|---|--:|---|--:|--:|--:|--:|--:|")
    for mib, system, world, split, wall, ratio, cpu, cpu_ratio, amplification in loads:
        read = "-" if amplification is None else f"{amplification:.3f}"
        print(f"| {mib} | {system} | {world} | {split} | {wall:.3f} | {ratio:.2f}x | "
              f"{cpu:.3f} | {cpu_ratio:.2f}x | {read} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mib", default="128,1024", help="state sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed saves or loads per job, after a warm-up")
    parser.add_argument("--rounds", type=int, default=3,
                        help="every job this many times, the order of the systems rotated")
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--s3-mib", type=int, default=128,
                        help="the largest state size also saved to S3 (moto holds it in memory)")
    parser.add_argument("--systems", default=None,
                        help="only these save systems (and their floors), comma-separated: "
                             "ocf, ocf-dcp, dcp, jax-ocf, jax-orbax, ocf-s3")
    parser.add_argument("--no-loads", action="store_true", help="skip the resharded loads")
    parser.add_argument("--quick", action="store_true", help="64 MiB, 1 repeat, no S3")
    parser.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir)")
    parser.add_argument("--loads-only", action="store_true",
                        help="only the resharded loads (after the two 4-writer saves they read)")
    parser.add_argument("--keep", default=None,
                        help="save the 4-writer checkpoints of the loads under this directory "
                        "and keep them (reused when present)")
    parser.add_argument("--best", action="store_true",
                        help="report the fastest repeat, not the median (a shared machine)")
    parser.add_argument("--profile", default=None,
                        help="sample every rank's timed repeats with py-spy into this directory")
    parser.add_argument("--native", action="store_true",
                        help="with --profile: C frames too (py-spy --native)")
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    if args.quick:
        args.mib, args.repeat, args.rounds, args.s3_mib = "64", 1, 1, 0
    if args.profile:
        args.rounds = 1  # one profile file per job and rank
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="ocf-scaling-", dir=args.dir))
    server = None
    if args.s3_mib > 0 and not args.loads_only:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from s3server import start_server

        server = start_server(base / "moto.log")
    saves: list[tuple[Any, ...]] = []
    loads: list[tuple[Any, ...]] = []
    try:
        for mib in (int(m) for m in args.mib.split(",")):
            sources: dict[str, str] = {}
            if args.loads_only:
                _save_sources(mib, Path(args.keep) if args.keep else base, base, sources)
            else:
                saves += _save_rows(args, mib, base, server, sources)
            if sources:
                loads += _load_rows(args, mib, base, sources)
            for source in sources.values() if not args.keep else ():
                shutil.rmtree(source, ignore_errors=True)
    finally:
        if server is not None:
            from s3server import stop_server

            stop_server(server)
        shutil.rmtree(base, ignore_errors=True)
    _print_tables(args, saves, loads)


if __name__ == "__main__":
    main()
