"""ocf.distributed.torch with real processes: a gloo process group on loopback.

4 ranks save one checkpoint (row slices of some tensors, whole tensors owned
by single ranks), 2 and 3 ranks load it back by rows and by columns, and a
rank killed with SIGKILL half way through its part leaves no checkpoint and
the previous one the latest. Expected values come from NumPy
(distributed_worker.full_arrays and np.array_split), never from OCF.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import numpy as np
from repo_paths import TESTS_DIR

import ocf

HERE = TESTS_DIR
sys.path.insert(0, str(HERE))
import distributed_worker as worker  # noqa: E402
import ranks  # noqa: E402
from s3server import S3Server  # noqa: E402

WORKER = HERE / "distributed_worker.py"


def _start(job: dict[str, Any], world: int) -> list[subprocess.Popen[bytes]]:
    return ranks.start(WORKER, job, world)


def _run(job: dict[str, Any], world: int) -> list[dict[str, Any]]:
    return ranks.run(WORKER, job, world)


def _check_loaded(out: Path, world: int, source: str, axis: int,
                  results: list[dict[str, Any]]) -> None:
    """Every rank got exactly its rows or columns, bit for bit; whole tensors likewise."""
    full = worker.full_arrays()
    for rank in range(world):
        for key in worker.SLICED:
            pieces = np.array_split(full[key], world, axis=axis)
            expected = np.ascontiguousarray(pieces[rank])
            got = np.load(out / f"{rank}-{source}-{axis}-{key.replace('/', '_')}.npy")
            assert got.shape == expected.shape, (rank, key)
            assert got.tobytes() == expected.tobytes(), (rank, key)
        for key, owner in worker.OWNED.items():
            if owner % world == rank:
                got = np.load(out / f"{rank}-{source}-{axis}-{key.replace('/', '_')}.npy")
                assert got.tobytes() == full[key].tobytes(), (rank, key)
                assert got.shape == full[key].shape
        counts = results[rank][f"{source}-{axis}"]
        assert counts["bytes_read"] >= counts["bytes_needed"] > 0


@dataclass(frozen=True)
class Saved:
    directory: Path  # holds ckpt-1 and checkpoint.json
    url: str  # the same checkpoint on the S3 server
    storage_options: dict[str, Any]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Saved:
    """Checkpoint 1 written by 4 ranks, through save_numbered and to S3."""
    root = tmp_path_factory.mktemp("distributed")
    url = f"s3://{s3_server.new_bucket()}/run/ckpt-1"
    results = _run({"mode": "save", "directory": str(root / "ckpts"), "url": url,
                    "storage_options": s3_server.storage_options,
                    "out": str(root / "save-out")}, 4)
    assert all(r == {"saved": True} for r in results)
    return Saved(root / "ckpts", url, s3_server.storage_options)


def test_four_ranks_save_one_committed_checkpoint(saved: Saved, s3_server: S3Server) -> None:
    directory = saved.directory
    assert ocf.latest_checkpoint(directory) == str(directory / "ckpt-1")
    names = sorted(os.listdir(directory / "ckpt-1"))
    assert names[-1] == "index.ocf"
    assert not [n for n in names if n.startswith(("part-", "."))]
    # One write id per rank: the ranks' shard files are referenced where they were written.
    assert len({n.split("-")[1] for n in names if n.startswith("data-")}) == 4
    full = worker.full_arrays()
    with ocf.open(directory / "ckpt-1") as reader:
        assert reader.metadata == {"step": 1, "world": 4}
        for key, array in full.items():
            got = reader.read_tensor(key)
            assert got.dtype == array.dtype, key
            assert got.tobytes() == array.tobytes(), key
    # On S3: the merged index object and the four writers' shard objects, no part left.
    objects = sorted(name.rsplit("/", 1)[-1] for name in s3_server.fs.ls(
        saved.url.removeprefix("s3://"), refresh=True))
    assert objects[-1] == "index.ocf"
    assert not [n for n in objects if n.startswith("part-")]
    assert len({n.split("-")[1] for n in objects if n.startswith("data-")}) == 4
    with ocf.Reader(saved.url, storage_options=saved.storage_options) as reader:
        assert reader.metadata == {"step": 1}
        for key, array in full.items():
            assert reader.read_tensor(key).tobytes() == array.tobytes(), key
    # save_numbered recorded it on S3, and made no local "s3:" directory in the ranks' cwd.
    run = saved.url.rsplit("/", 1)[0]
    assert ocf.latest_checkpoint(run, storage_options=saved.storage_options) == saved.url
    assert sorted(os.listdir(saved.directory.parent / "save-out")) == \
        [f"{r}.json" for r in range(4)]


def test_a_failure_names_the_rank_in_the_group_that_saved(tmp_path: Path) -> None:
    results = _run({"mode": "subgroup", "directory": str(tmp_path / "ckpt"),
                    "out": str(tmp_path / "out")}, 3)
    assert results[0] == {"error": None}
    for result in results[1:]:
        assert result["error"] == "SaveError", result
        assert result["message"] == "RuntimeError: rank 1: device copy failed"
    assert not (tmp_path / "ckpt" / "index.ocf").exists()


@pytest.mark.parametrize("world", [2, 3])
def test_fewer_ranks_load_their_rows_and_their_columns_bit_exactly(saved: Saved, tmp_path: Path,
                                                                  world: int) -> None:
    out = tmp_path / "out"
    results = _run({"mode": "load", "path": str(saved.directory / "ckpt-1"), "url": saved.url,
                    "storage_options": saved.storage_options, "out": str(out)}, world)
    for source in ("local", "s3"):
        for axis in (0, 1):
            _check_loaded(out, world, source, axis, results)


def test_rank_killed_mid_save_commits_nothing_and_the_previous_checkpoint_stays_latest(
        tmp_path: Path) -> None:
    directory, ready = tmp_path / "ckpts", tmp_path / "victim-ready"
    victim = 2
    job = {"mode": "die", "directory": str(directory), "victim": victim, "ready": str(ready),
           "out": str(tmp_path / "out")}
    processes = _start(job, 4)
    try:
        deadline = time.monotonic() + ranks.TIMEOUT
        while not ready.exists():
            assert time.monotonic() < deadline, "the victim never reached its stall"
            assert processes[victim].poll() is None, processes[victim].stderr.read().decode()
            time.sleep(0.05)
        # Half way: the victim's part has written data to a shard, its part index is not
        # published, and the checkpoint is not committed.
        shards = [p for p in (directory / "ckpt-2").glob("data-*.ocfd") if p.stat().st_size > 64]
        assert shards
        os.kill(processes[victim].pid, signal.SIGKILL)
    finally:
        codes = ranks.finish(processes)
        ranks.close_pipes(processes)
    assert codes[victim] == -signal.SIGKILL
    survivors = [r for r in range(4) if r != victim]
    assert [codes[r] for r in survivors] == [0, 0, 0]
    for rank in survivors:
        result = json.loads((tmp_path / "out" / f"{rank}.json").read_text())
        assert result["error"] == "SaveError", f"rank {rank}: {result}"

    assert not (directory / "ckpt-2" / "index.ocf").exists()
    with pytest.raises(ocf.NotFoundError):
        ocf.open(directory / "ckpt-2")
    assert ocf.latest_checkpoint(directory) == str(directory / "ckpt-1")
    state = json.loads((directory / "checkpoint.json").read_text())
    assert state["latest"] == "ckpt-1"
    assert state["all"] == ["ckpt-1"]
    restored = ocf.load_file(ocf.latest_checkpoint(directory) or "")
    for key, array in worker.full_arrays(1).items():
        assert restored[key].tobytes() == array.tobytes(), key

    # The part indexes travel in-band to rank 0 [R-PART-009]: none was published as a file,
    # so nothing a later merge could mistake for this save's parts is left.
    assert not list((directory / "ckpt-2").glob("part-*.ocfpart"))
    assert not (directory / "ckpt-2" / "index.ocf").exists()


def test_region_of_matches_numpy_array_split() -> None:
    from ocf.distributed.torch import region_of

    for size in (0, 1, 5, 37):
        for parts in (1, 2, 3, 4, 7):
            expected = np.array_split(np.arange(size), parts)
            for part in range(parts):
                (rows, cols) = region_of((size, 3), part, parts)
                assert np.arange(size)[rows].tolist() == expected[part].tolist()
                assert cols == slice(None)
