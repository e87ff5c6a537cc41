"""python/benchmarks/bench_index_scale.py stays honest and runs (issue 27, item 3).

The benchmark sizes the indexes of saves it cannot write (405B parameters on
8,192 ranks) by simulating each part: these tests check that what it
simulates is what a real save writes, byte for byte, that the merged
checkpoint it builds opens with slices that tile every tensor, that the
resharded load it plans covers the rank's boxes and is what the reader then
reads, and that its smallest config runs end to end.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from repo_paths import PYTHON_DIR

import ocf
from ocf.distributed.parts import PartWriter, Slice, merge_parts, new_save_id, part_file_name
from ocf.format.slicing import boxes_tile

BENCH = PYTHON_DIR / "benchmarks" / "bench_index_scale.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_index_scale", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _write_real_part(bench: ModuleType, directory: Path, layout: str, ranks: int, rank: int,
                     save_id: str, options: Any) -> None:
    """Rank ``rank``'s part of the tiny model, written by PartWriter from zero arrays."""
    tensors: dict[str, object] = {}
    for tensor in bench.state(bench.MODELS["tiny"]):
        box = bench.box_of(tensor, layout, ranks, rank)
        if box is None:
            continue
        dtype = ml_dtypes.bfloat16 if tensor.dtype.name == "bfloat16" else np.float32
        tensors[tensor.key] = np.zeros((), dtype) if tensor.tp_dim == "whole" else \
            Slice(np.zeros(box[1], dtype), box[0], tensor.shape)
    with PartWriter(directory, part=rank, parts=ranks, save_id=save_id,
                    chunk_size=options.chunk_size, tile_bytes=options.tile_bytes,
                    max_shard_size=options.max_shard_size,
                    write_id=f"{rank:016x}") as writer:
        writer.write_tensors(tensors)


@pytest.mark.parametrize("layout", ["fsdp", "tp-fsdp"])
@pytest.mark.parametrize("options", [
    (65536, "strips", 4 << 30),  # ocf.distributed.torch.save's defaults
    (8192, "strips", 64 << 10),  # strips, chunk sizes capped lower, shards that fill up
    (65536, 16384, 4 << 30),  # the grid of OCF 0.3.0
    (4096, 16384, 64 << 10),  # tiles of several chunks, shards that fill up
    (4096, None, 20000),  # one slice per box, blocks larger than a shard
])
def test_simulated_parts_are_the_bytes_partwriter_writes(
        bench: ModuleType, tmp_path: Path, layout: str,
        options: tuple[int, int | str | None, int]) -> None:
    save = bench.SaveOptions(*options)
    save_id = new_save_id()
    for rank in range(8):
        _write_real_part(bench, tmp_path, layout, 8, rank, save_id, save)
        part = bench.simulate_part(bench.MODELS["tiny"], layout, 8, rank, save_id, save,
                                   f"{rank:016x}")
        real = (tmp_path / part_file_name(save_id, rank)).read_bytes()
        assert bench.index_file(part.index_bytes()) == real
        assert [(tmp_path / name).stat().st_size for name in part.shard_names()] == part.ends


def test_merged_size_is_what_the_merge_writes_and_the_checkpoint_opens(
        bench: ModuleType, tmp_path: Path) -> None:
    model, options = bench.MODELS["tiny"], bench.SaveOptions()
    result = bench.count(model, "fsdp", 8, options)
    save_id = bench.build(model, "fsdp", 8, options, tmp_path, result)
    merge_parts(tmp_path, save_id=save_id, parts=8, cleanup=False)
    index_bytes = (tmp_path / "index.ocf").stat().st_size - 64 - 32
    assert result.merged_bytes_exact == index_bytes
    with ocf.Reader(tmp_path) as reader:
        state = bench.state(model)
        assert sorted(reader) == sorted(t.key for t in state)
        sliced = [t for t in state if t.tp_dim != "whole"]
        assert sum(len(reader[t.key].slices) for t in sliced) == result.slices
        for tensor in sliced:  # the parts together tile every tensor
            info = reader[tensor.key]
            assert info.shape == tensor.shape
            assert info.block is None
            assert boxes_tile([(p.start, p.extent) for p in info.slices], tensor.shape)

        # A rank of the other layout: its plan covers each of its boxes exactly, and is
        # what the reader then reads (the sparse shards read as zeros, whose CRCs the
        # simulated index holds).
        rank = bench.loading_rank(8)
        wanted = bench.wanted_by(model, "tp-fsdp", 8, rank)
        plan = bench.plan_load(reader, wanted, detail=True)
        assert plan.tensors == len(wanted)
        assert plan.bytes_read >= plan.bytes_needed > 0
        for key, (start, extent) in wanted.items():
            pieces = [(tuple(s - b for s, b in zip(p[0], start)), p[1])
                      for p in plan.pieces[key]]
            assert boxes_tile(pieces, extent), key
        for key, (start, extent) in wanted.items():
            region = tuple(slice(s, s + e) for s, e in zip(start, extent))
            value = reader.get_slice(key, region)
            assert value.shape == extent
            assert not value.astype(np.float32).any()
        assert reader.bytes_read == plan.bytes_read


def test_smallest_config_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--models", "tiny", "--ranks", "8", "--dir", str(tmp_path),
         "--json", str(out), "--markdown", str(tmp_path / "table.md")],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [(r["layout"], r["ranks"]) for r in results] == [("fsdp", 8), ("tp-fsdp", 8)]
    for r in results:
        assert r["merged"]
        assert r["error"] is None
        assert r["merged_bytes"] == r["merged_bytes_exact"] > 0
        assert r["merge_s"] > 0
        assert r["open_s"] > 0
        assert r["plan_s"] > 0
        assert r["plan"]["bytes_read"] >= r["plan"]["bytes_needed"] > 0
    assert "| tiny | tp-fsdp | 8 |" in done.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ocf-index-scale-")]


def test_sampled_ranks_stand_for_every_rank_once(bench: ModuleType) -> None:
    model = bench.MODELS["405b"]
    signatures = [bench.part_signature(model, "fsdp", 8192, r) for r in range(8192)]
    picks = bench.sampled_ranks(signatures, 256)
    assert 256 <= len(picks) <= 260
    assert sum(weight for _, weight in picks) == 8192
    for signature in set(signatures):  # each group of equal parts is stood for in full
        members = [r for r, s in enumerate(signatures) if s == signature]
        assert sum(w for r, w in picks if signatures[r] == signature) == len(members)
    # The embedding's 128,256 rows in chunks of 16 leave ranks 8,016 and up without a
    # box of it: a group of its own, sampled.
    assert any(start >= 8016 for start, _ in picks)
    assert bench.sampled_ranks(signatures[:8], 64) == [(rank, 1) for rank in range(8)]


@pytest.mark.parametrize("layout", ["fsdp", "tp-fsdp"])
def test_merged_size_from_a_sample_of_parts_is_near_the_exact_size(
        bench: ModuleType, layout: str) -> None:
    # The estimate that sizes 405B on 8,192 ranks, against the exact size from every
    # part, on a config small enough to size both ways (whose torch.chunk tail, ranks
    # without a box of the small tensors, the sample has to catch).
    model, options = bench.MODELS["tiny"], bench.SaveOptions()
    exact, sampled = (bench.count(model, layout, 512, options) for _ in range(2))
    bench.build(model, layout, 512, options, None, exact)
    bench.build(model, layout, 512, options, None, sampled, sample=32)
    assert exact.sampled_parts is None
    assert 32 <= sampled.sampled_parts <= 40  # at least one per group of equal parts
    assert sampled.merged_bytes_exact == pytest.approx(exact.merged_bytes_exact, rel=0.02)
    assert sampled.chunks == pytest.approx(exact.chunks, rel=0.02)
    assert sampled.shards == pytest.approx(exact.shards, rel=0.05)
