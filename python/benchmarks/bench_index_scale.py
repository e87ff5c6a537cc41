"""Part indexes and merged index of 7B, 70B and 405B models on 8 to 8,192 ranks, simulated.

    PYTHONPATH=python/src .venv/bin/python python/benchmarks/bench_index_scale.py \
        [--models 7b,70b,405b] [--ranks 8,64,512,1024,8192] [--layouts fsdp,tp-fsdp] \
        [--max-slices N] [--dir DIR] [--json PATH] [--markdown PATH]

Issue 27, item 3: does the merge of a multi-writer save (ocf.distributed.parts)
and the open of the merged checkpoint grow linearly with the number of slices,
and which limit of spec/format.md does a real model hit first?

Every part of a save is built as ``ocf.distributed.torch.save`` writes it with
its defaults (PartWriter, uncompressed, strips with a chunk size per tensor
of 4 to 64 KiB, 4 GiB shards; ``--tile-bytes 16384`` gives the 16 KiB grid in
64 KiB chunks of OCF 0.3.0), but without tensor data: :class:`PartSimulator`
does the writer's layout arithmetic (the strips of
:func:`ocf.distributed.parts.strips.box_strip` or the tiles of
:func:`ocf.distributed.parts.tiling.tiles_of`,
64-byte alignment, shard roll-over, the chunking of each block) and encodes
the part index with the project's own encoder (TableBuilder), so that the
index bytes are those of a real save of all-zero tensors: same columns, same
chunk CRC lists (the CRC-32C of zero bytes), same shard lengths.
tests/tools/test_bench_index_scale.py checks that byte for byte against a real
PartWriter. Shard files are sparse files of their recorded length that start
with the preamble, which is all the merge and the reader check of them before
reading tensor bytes; no tensor byte is read here.

Measured per config, the merge and the open each in a fresh subprocess:
the size of each part index and of the merged index, the merge's time and
peak RSS above the interpreter's, the time to open the merged checkpoint
(ocf.Reader: decode and check the index, open every shard), and the time to
plan one rank's resharded load: the checkpoint saved in one layout is loaded
by a rank of the other layout (FSDP <-> TP x FSDP, same world size), and the
plan is what ocf.Reader.get_slice does before it reads: find the slices that
meet the rank's box of every tensor, and the chunks of each that hold it.

Configs with more slices in all than ``--max-slices`` are not built (their
counts are still computed exactly): their times are extrapolated from the fit
and marked so. The growth exponent is the slope of log(time) against
log(slices) over the measured configs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ocf._version import __version__
from ocf.distributed.parts.naming import new_save_id, part_file_name
from ocf.distributed.parts.strips import box_strip, strip_chunk_size
from ocf.distributed.parts.tiling import tiles_of
from ocf.distributed.parts.writing import TileBytes
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILES
from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.codecs.none import NONE
from ocf.format.commit import new_write_id, shard_file_name
from ocf.format.container import PREAMBLE, PREAMBLE_SIZE, Footer, padding
from ocf.format.index.decoding import PART_FEATURE
from ocf.format.index.encoding import TableBuilder
from ocf.format.index.model import Block
from ocf.format.limits import MAX_INDEX_BYTES, MAX_SHARDS, max_slices
from ocf.format.reader import Reader
from ocf.format.slicing import Box, chunks_touching, intersect
from ocf.format.writing.tiles import grid_cells
from ocf.v1 import index_pb2

MiB = 1 << 20
# The writer's default shard size (ocf.format.writer.DEFAULT_MAX_SHARD_SIZE).
MAX_SHARD_SIZE = 4 << 30
TP = 8
BF16 = dtypes.BY_NAME["bfloat16"]
FP32 = dtypes.BY_NAME["float32"]
LAYOUTS = ("fsdp", "tp-fsdp")
# Configs the log-log growth is fitted on have at least this many slices.
FIT_MIN_SLICES = 100_000


# -- the models --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """A Llama-style decoder: its sizes (Llama 2 7B and 70B, Llama 3.1 405B)."""

    name: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)


MODELS = {
    # A toy of the same structure, for the test: seconds, not minutes.
    "tiny": Model("tiny", 384, 64, 2, 4, 2, 176),
    # Llama 3.2 1B: to widen the range of slice counts the growth is fitted on.
    "1b": Model("1b", 128256, 2048, 16, 32, 8, 8192),
    "7b": Model("7b", 32000, 4096, 32, 32, 32, 11008),
    "70b": Model("70b", 32000, 8192, 80, 64, 8, 28672),
    "405b": Model("405b", 128256, 16384, 126, 128, 8, 53248),
}


@dataclass(frozen=True)
class Tensor:
    """One tensor of the training state, and how tensor parallelism splits it:
    ``tp_dim`` 0 (column-parallel, and the vocabulary of the embedding and the
    head), 1 (row-parallel), None (replicated: norms), or "whole" (stored
    whole by rank 0: Adam's step)."""

    key: str
    shape: tuple[int, ...]
    dtype: dtypes.Dtype
    tp_dim: int | str | None


def parameters(model: Model) -> list[tuple[str, tuple[int, ...], int | None]]:
    """Key, shape ([out, in], as torch.nn.Linear) and TP dimension of every weight."""
    h, kv, inner = model.hidden, model.kv_dim, model.intermediate
    params: list[tuple[str, tuple[int, ...], int | None]] = [
        ("model.embed_tokens.weight", (model.vocab, h), 0)]
    for i in range(model.layers):
        layer = f"model.layers.{i}"
        params += [
            (f"{layer}.input_layernorm.weight", (h,), None),
            (f"{layer}.self_attn.q_proj.weight", (h, h), 0),
            (f"{layer}.self_attn.k_proj.weight", (kv, h), 0),
            (f"{layer}.self_attn.v_proj.weight", (kv, h), 0),
            (f"{layer}.self_attn.o_proj.weight", (h, h), 1),
            (f"{layer}.post_attention_layernorm.weight", (h,), None),
            (f"{layer}.mlp.gate_proj.weight", (inner, h), 0),
            (f"{layer}.mlp.up_proj.weight", (inner, h), 0),
            (f"{layer}.mlp.down_proj.weight", (h, inner), 1),
        ]
    return [*params, ("model.norm.weight", (h,), None), ("lm_head.weight", (model.vocab, h), 0)]


def state(model: Model) -> list[Tensor]:
    """The training state in the order a rank writes it: bf16 weights, then per
    weight Adam's fp32 exp_avg, exp_avg_sq and scalar step (torch.optim.Adam)."""
    params = parameters(model)
    tensors = [Tensor(key, shape, BF16, tp) for key, shape, tp in params]
    for key, shape, tp in params:
        prefix = f"optim.state.{key}"
        tensors += [Tensor(f"{prefix}.exp_avg", shape, FP32, tp),
                    Tensor(f"{prefix}.exp_avg_sq", shape, FP32, tp),
                    Tensor(f"{prefix}.step", (), FP32, "whole")]
    return tensors


def parameter_count(model: Model) -> int:
    return sum(math.prod(shape) for _, shape, _ in parameters(model))


# -- who holds what -----------------------------------------------------------------------------


def _chunk(size: int, parts: int, index: int) -> tuple[int, int] | None:
    """Start and length of chunk ``index`` when ``size`` is split as torch.chunk
    (and DTensor's Shard) splits it: chunks of ceil(size / parts), the last ones
    shorter or empty. None for an empty chunk."""
    step = -(-size // parts)
    start = index * step
    return None if start >= size else (start, min(step, size - start))


def box_of(tensor: Tensor, layout: str, ranks: int, rank: int) -> Box | None:
    """The box of ``tensor`` that ``rank`` stores, None if it stores none.

    FSDP: dim 0 split over all ranks (FSDP2's Shard(0)). TP x FSDP: a mesh of
    ranks // 8 data-parallel by 8 tensor-parallel ranks, rank = dp * 8 + tp;
    a column-parallel weight is split on dim 0 into 8 blocks and each block on
    dim 0 over the data-parallel ranks (FSDP2's strided sharding over TP), a
    row-parallel weight on dim 1 over TP and dim 0 over DP, and a replicated
    one (norms) on dim 0 over DP, stored by the ranks at tp = 0 only.
    """
    shape = tensor.shape
    if tensor.tp_dim == "whole":
        return ((), ()) if rank == 0 else None
    start, extent = [0] * len(shape), list(shape)
    if layout == "fsdp":
        run = _chunk(shape[0], ranks, rank)
        if run is None:
            return None
        start[0], extent[0] = run
        return tuple(start), tuple(extent)
    tp_size = min(TP, ranks)
    dp_size = ranks // tp_size
    dp, tp = divmod(rank, tp_size)
    if tensor.tp_dim is None and tp != 0:
        return None
    if isinstance(tensor.tp_dim, int):
        run = _chunk(shape[tensor.tp_dim], tp_size, tp)
        if run is None:
            return None
        start[tensor.tp_dim], extent[tensor.tp_dim] = run
    run = _chunk(extent[0], dp_size, dp)
    if run is None:
        return None
    start[0], extent[0] = start[0] + run[0], run[1]
    return tuple(start), tuple(extent)


def tiles(tensor: Tensor, box: Box, tile_bytes: TileBytes, chunk_size: int) -> list[Box]:
    """The slices a PartWriter stores ``box`` as: its tiles (or strips) for a tensor of
    rank 2 or more (PartWriter._wants_tiles), else the box itself."""
    if tile_bytes is None or len(tensor.shape) < 2 or math.prod(box[1]) <= 1:
        return [box]
    if tile_bytes == "strips":
        strip = box_strip(box, tensor.shape, tensor.dtype.itemsize,
                          tensor_chunk_size(tensor, tile_bytes, chunk_size))
        return [box] if strip is None else grid_cells(*box, strip)
    return tiles_of(box, tensor.shape, tensor.dtype.itemsize, tile_bytes)


def tensor_chunk_size(tensor: Tensor, tile_bytes: TileBytes, chunk_size: int) -> int:
    """The chunk size of ``tensor``'s blocks: its own with strips, else ``chunk_size``."""
    if tile_bytes != "strips":
        return chunk_size
    return strip_chunk_size(math.prod(tensor.shape) * tensor.dtype.itemsize, chunk_size)


@cache
def _slices_of_kind(shape: tuple[int, ...], dtype_name: str, tp_dim: int | str | None,
                    layout: str, ranks: int, tile_bytes: TileBytes, chunk_size: int) -> int:
    tensor = Tensor("", shape, dtypes.BY_NAME[dtype_name], tp_dim)
    return sum(len(tiles(tensor, box, tile_bytes, chunk_size)) for box in
               (box_of(tensor, layout, ranks, r) for r in range(ranks)) if box is not None)


def slices_in_all(tensor: Tensor, layout: str, ranks: int, tile_bytes: TileBytes,
                  chunk_size: int) -> int:
    """The slices of ``tensor`` in the merged index (0: stored whole). Every layer has
    the same shapes, so each kind of tensor is counted once."""
    if tensor.tp_dim == "whole":
        return 0
    return _slices_of_kind(tensor.shape, tensor.dtype.name, tensor.tp_dim, layout, ranks,
                           tile_bytes, chunk_size)


# -- one part, as PartWriter writes it, without the bytes ----------------------------------------


@cache
def zeros_crc(size: int) -> int:
    """CRC-32C of ``size`` zero bytes: the checksum of a chunk of an all-zero tensor."""
    return crc32c(bytes(size))


@dataclass
class SaveOptions:
    """The writer options that shape the index (those of ocf.distributed.torch.save)."""

    chunk_size: int = RESHARD_CHUNK_SIZE
    tile_bytes: TileBytes = RESHARD_TILES
    max_shard_size: int = MAX_SHARD_SIZE


class PartSimulator:
    """The index a PartWriter (directory layout, no compression) builds for the same
    calls, and the lengths of its shard files, with no bytes written.

    The layout arithmetic is the writer's (ocf.format.writer): each block starts at
    the next 64-byte boundary of the current shard, a block that would end past
    ``max_shard_size`` opens a new shard unless the current one is empty, a block
    of at most one chunk is one chunk (``chunk_size`` 0) and a larger one is cut
    into ``chunk_size`` chunks. Whether a box's tiles are gathered (write_slices)
    or stored one by one (write_slice) changes nothing in the index.
    """

    def __init__(self, part: int, parts: int, save_id: str, options: SaveOptions,
                 write_id: str | None = None) -> None:
        self.part, self.parts, self.save_id = part, parts, save_id
        self.options = options
        self.write_id = write_id or new_write_id()
        self.table = TableBuilder()
        self.rows: dict[str, int] = {}
        self.ends: list[int] = []  # per shard, where its bytes end so far
        self.slices = 0

    def write(self, tensor: Tensor, box: Box) -> None:
        """What ``PartWriter.write`` (``box`` of rank 0, a scalar) or ``write_slice``
        stores for ``tensor``."""
        whole = tensor.tp_dim == "whole"
        row = self.rows.get(tensor.key)
        if row is None:
            row = self.rows[tensor.key] = self.table.add_tensor(
                tensor.key, tensor.dtype.code, tensor.shape, sliced=not whole)
        chunk = tensor_chunk_size(tensor, self.options.tile_bytes, self.options.chunk_size)
        if whole:
            self.table.add_block(row, self._store(
                math.prod(tensor.shape) * tensor.dtype.itemsize, chunk))
            return
        for tile in tiles(tensor, box, self.options.tile_bytes, self.options.chunk_size):
            self.table.add_block(row, self._store(math.prod(tile[1]) * tensor.dtype.itemsize,
                                                  chunk), tile)
            self.slices += 1

    def _store(self, size: int, chunk: int) -> Block:
        shard, offset = self._place(size)
        if size <= chunk:
            return Block(shard, offset, size, size, NONE, False, 0, [zeros_crc(size)], [])
        full, rest = divmod(size, chunk)
        crcs = [zeros_crc(chunk)] * full + ([zeros_crc(rest)] if rest else [])
        return Block(shard, offset, size, size, NONE, False, chunk, crcs, [])

    def _place(self, size: int) -> tuple[int, int]:
        """The shard and offset of the next block of ``size`` bytes."""
        ends = self.ends
        if not ends or (ends[-1] > PREAMBLE_SIZE
                        and ends[-1] + padding(ends[-1]) + size > self.options.max_shard_size):
            ends.append(PREAMBLE_SIZE)
        offset = ends[-1] + padding(ends[-1])
        ends[-1] = offset + size
        return len(ends) - 1, offset

    def shard_names(self) -> list[str]:
        return [shard_file_name(self.write_id, n) for n in range(len(self.ends))]

    def index_bytes(self) -> bytes:
        """The part index, as PartWriter.commit serializes it."""
        return self.index().SerializeToString(deterministic=True)

    def index(self) -> index_pb2.Index:
        """The part index message."""
        index = index_pb2.Index()
        index.header.writer = f"ocf-python {__version__}"
        self.table.fill(index)
        index.header.required_features.append(PART_FEATURE)
        index.part.save_id, index.part.number, index.part.count = (
            self.save_id, self.part, self.parts)
        for name, end in zip(self.shard_names(), self.ends):
            index.shards.add(path=name, length=end)
        return index


def simulate_part(model: Model, layout: str, ranks: int, rank: int, save_id: str,
                  options: SaveOptions, write_id: str | None = None) -> PartSimulator:
    """Rank ``rank``'s part of the save of ``model``'s state."""
    part = PartSimulator(rank, ranks, save_id, options, write_id)
    for tensor in state(model):
        box = box_of(tensor, layout, ranks, rank)
        if box is not None:
            part.write(tensor, box)
    return part


def _varint_bytes(values: np.ndarray) -> int:
    """Bytes of the protobuf varints of ``values`` (uint64), all together."""
    size = values.size
    for k in range(1, 10):
        size += int(np.count_nonzero(values >= np.uint64(1 << (7 * k))))
    return size


def _varint_len(value: int) -> int:
    return _varint_bytes(np.array([value], np.uint64))


# The columns of BlockTable, and how each element is encoded (all packed).
_FIXED32 = ("chunk_crcs",)
_VARINT = ("shards", "offsets", "stored_lengths", "raw_lengths", "codecs", "byte_shuffles",
           "chunk_sizes", "chunk_stored_lengths", "slice_starts", "slice_extents")


class MergedSize:
    """The exact size of the index merge_parts makes of some parts, from the parts'
    indexes, without merging: to size configs too large to merge here.

    The merged block table holds every block of every part ([R-PART-006]), each value
    unchanged but its shard number, rebased; in packed columns the bytes of a column
    do not depend on the order of its values. The rest (header, shards, tensor table)
    is small and built as the merge builds it. Checked against real merges.
    """

    def __init__(self) -> None:
        self.payload = dict.fromkeys(_FIXED32 + _VARINT, 0)
        self.merged = index_pb2.Index()
        self.merged.header.writer = f"ocf-python {__version__}"
        self.rows: dict[str, int] = {}
        self.chunks = 0

    def add(self, part: index_pb2.Index, weight: int = 1) -> None:
        """Add the next part (parts in order); with ``weight`` > 1, as that many parts
        like it (a sample standing for the parts up to the next one sampled: each
        value counted ``weight`` times, the shard numbers rebased as the first's)."""
        base = len(self.merged.shards)
        for _ in range(weight):
            self.merged.shards.extend(part.shards)
        blocks = part.blocks
        self.chunks += weight * len(blocks.chunk_crcs)
        self.payload["chunk_crcs"] += weight * 4 * len(blocks.chunk_crcs)
        for name in _VARINT:
            values = np.array(getattr(blocks, name), np.uint64)
            self.payload[name] += weight * _varint_bytes(
                values + np.uint64(base) if name == "shards" else values)
        self._add_tensors(part.tensors, weight)

    def _add_tensors(self, table: Any, weight: int) -> None:
        """The part's keys in the merged tensor table: new keys at the end, in order;
        the slice counts of a key already there add up."""
        merged = self.merged.tensors
        dims = iter(table.dims)
        for key, dtype, rank, count in zip(table.keys, table.dtypes, table.ranks,
                                           table.slice_counts):
            shape = [next(dims) for _ in range(rank)]
            row = self.rows.get(key)
            if row is not None:
                merged.slice_counts[row] += weight * count
                continue
            self.rows[key] = len(merged.keys)
            merged.keys.append(key)
            merged.dtypes.append(dtype)
            merged.ranks.append(rank)
            merged.dims.extend(shape)
            merged.slice_counts.append(weight * count)

    def size(self) -> int:
        """Bytes of the merged index."""
        head = len(self.merged.SerializeToString(deterministic=True))
        columns = sum(1 + _varint_len(p) + p for p in self.payload.values() if p)
        return head + (1 + _varint_len(columns) + columns if columns else 0)


def index_file(data: bytes) -> bytes:
    """An index file holding the index ``data``: preamble, index, footer."""
    return PREAMBLE + data + Footer(PREAMBLE_SIZE, len(data), crc32c(data)).pack()


def write_part_files(directory: Path, part: PartSimulator) -> int:
    """Publish the part in ``directory``: its index file, and its shard files as sparse
    files of their recorded length that start with the preamble. The index size."""
    data = part.index_bytes()
    (directory / part_file_name(part.save_id, part.part)).write_bytes(index_file(data))
    for name, end in zip(part.shard_names(), part.ends):
        with open(directory / name, "wb") as shard:
            shard.write(PREAMBLE)
            shard.truncate(end)
    return len(data)


# -- one rank's resharded load, planned ---------------------------------------------------------


@dataclass
class Plan:
    """What a rank reads to load its boxes: found, not read."""

    tensors: int = 0
    slices_met: int = 0
    chunks: int = 0
    bytes_read: int = 0  # whole chunks: every chunk read is checksummed
    bytes_needed: int = 0
    # With ``detail``: per key, the part of its box each slice met gives (global boxes).
    pieces: dict[str, list[Box]] = field(default_factory=dict)


def plan_load(reader: Reader, wanted: Mapping[str, Box], detail: bool = False) -> Plan:
    """Plan the read of ``wanted`` (key: global box) from an open ocf.Reader as its
    get_slice plans it: the slices that meet the box, by one vectorized test over the
    tensor's slice table (no object per slice), then the chunks of each slice met that
    hold its part of the box."""
    plan = Plan()
    for key, box in wanted.items():
        info = reader[key]
        plan.tensors += 1
        plan.bytes_needed += math.prod(box[1]) * info.dtype.itemsize
        if info.block is not None:
            _plan_block(plan, info.block, info.shape, info.dtype.itemsize, box)
            if detail:
                plan.pieces[key] = [box]
            continue
        boxes = reader.index.tensors.slice_boxes(key)
        assert boxes is not None
        start = np.array(box[0], np.int64)
        meets = ((boxes.lo < start + np.array(box[1], np.int64)) & (start < boxes.hi)).all(axis=1)
        for i in np.flatnonzero(meets).tolist():
            piece = (tuple(boxes.lo[i].tolist()), tuple((boxes.hi[i] - boxes.lo[i]).tolist()))
            common = intersect(box, piece)
            assert common is not None
            local = (tuple(c - s for c, s in zip(common[0], piece[0])), common[1])
            _plan_block(plan, reader.index.tensors.block(int(boxes.blocks[i])), piece[1],
                        info.dtype.itemsize, local)
            plan.slices_met += 1
            if detail:
                plan.pieces.setdefault(key, []).append(common)
    return plan


def _plan_block(plan: Plan, block: Block, shape: tuple[int, ...], itemsize: int,
                box: Box) -> None:
    chunks = chunks_touching(shape, itemsize, block.raw_chunk_size, block.chunk_count, box)
    plan.chunks += len(chunks)
    size = block.raw_chunk_size
    plan.bytes_read += len(chunks) * size
    if len(chunks) and int(chunks[-1]) == block.chunk_count - 1:  # the last chunk is short
        plan.bytes_read -= block.chunk_count * size - block.raw_length


def loading_rank(ranks: int) -> int:
    """The rank whose load is planned: inside, not at an edge of the mesh."""
    return (ranks // 2 + 1) % ranks


def wanted_by(model: Model, layout: str, ranks: int, rank: int) -> dict[str, Box]:
    """The boxes ``rank`` of ``layout`` loads: every tensor's box (steps: rank 0 holds
    them, and every rank loads them whole)."""
    wanted: dict[str, Box] = {}
    for tensor in state(model):
        box = ((), ()) if tensor.tp_dim == "whole" else box_of(tensor, layout, ranks, rank)
        if box is not None:
            wanted[tensor.key] = box
    return wanted


def other_layout(layout: str) -> str:
    return LAYOUTS[1 - LAYOUTS.index(layout)]


# -- the measured steps, each in a subprocess of its own ----------------------------------------


def peak_rss() -> int:
    """This process's peak resident set, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_merge(directory: Path, save_id: str, parts: int) -> dict[str, Any]:
    """Merge the parts; its time, peak RSS, the merged index size or the error."""
    from ocf.distributed.parts import merge_parts
    from ocf.format.errors import OCFError

    base = peak_rss()
    error = None
    began, cpu = time.perf_counter(), time.process_time()
    try:
        merge_parts(directory, save_id=save_id, parts=parts, cleanup=False)
    except OCFError as exc:
        error = f"{exc.category.value if exc.category else type(exc).__name__} " \
                f"[{exc.requirement}]: {exc.detail}"
    except MemoryError:
        error = "MemoryError (over --memory-limit)"
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    index = directory / "index.ocf"
    size = index.stat().st_size - PREAMBLE_SIZE - 32 if index.exists() else None
    return {"merge_s": seconds, "merge_cpu": cpu, "merge_rss": peak_rss() - base,
            "merged_bytes": size, "error": error}


def child_open(directory: Path, model: Model, layout: str, ranks: int) -> dict[str, Any]:
    """Open the merged checkpoint and plan the load of one rank of ``layout``."""
    base = peak_rss()
    began, cpu = time.perf_counter(), time.process_time()
    reader = Reader(directory)
    opened, opened_cpu = time.perf_counter(), time.process_time()
    wanted = wanted_by(model, layout, ranks, loading_rank(ranks))
    planning, planning_cpu = time.perf_counter(), time.process_time()
    plan = plan_load(reader, wanted)
    done, done_cpu = time.perf_counter(), time.process_time()
    reader.close()
    return {"open_s": opened - began, "open_cpu": opened_cpu - cpu,
            "plan_s": done - planning, "plan_cpu": done_cpu - planning_cpu,
            "open_rss": peak_rss() - base, "plan": asdict(plan)}


def run_child(args: list[str], memory_limit: int) -> dict[str, Any]:
    """Run one step in a fresh interpreter (its own imports, allocator and peak RSS)."""
    done = subprocess.run([sys.executable, __file__, "--memory-limit", str(memory_limit),
                           "--child", *args], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if done.returncode:
        return {"error": f"child failed ({done.returncode}): {done.stderr[-2000:]}"}
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


# -- configs ------------------------------------------------------------------------------------


@dataclass
class Result:
    """One config: model x layout x ranks."""

    model: str
    layout: str
    ranks: int
    parameters: int
    tensors: int
    slices: int  # in the merged index
    max_slices_per_tensor: int
    # Tensor rows summed over the part indexes: what the merge reads and checks per part
    # and tensor, whatever the slices (None in results saved before it was counted).
    part_tensors: int | None = None
    merged: bool = False  # merged, opened and planned here (else sized only)
    shards: int | None = None
    chunks: int | None = None
    part_bytes_min: int | None = None
    part_bytes_max: int | None = None
    part_bytes_sum: int | None = None
    build_s: float | None = None
    merged_bytes_exact: int | None = None  # MergedSize: what the merge makes, or would
    sampled_parts: int | None = None  # sized from this many parts (else from all of them)
    merged_bytes: int | None = None  # what the merge wrote
    merge_s: float | None = None  # wall
    merge_cpu: float | None = None  # CPU seconds of the merging process
    merge_rss: int | None = None
    open_s: float | None = None
    open_cpu: float | None = None
    plan_s: float | None = None
    plan_cpu: float | None = None
    open_rss: int | None = None
    plan: dict[str, int] | None = None
    error: str | None = None


def count(model: Model, layout: str, ranks: int, options: SaveOptions) -> Result:
    """A config's exact tensor and slice counts, without building it."""
    tensors = state(model)
    slices = [slices_in_all(t, layout, ranks, options.tile_bytes, options.chunk_size)
              for t in tensors]
    return Result(model.name, layout, ranks, parameter_count(model), len(tensors), sum(slices),
                  max(slices), part_tensors(model, layout, ranks))


def part_tensors(model: Model, layout: str, ranks: int) -> int:
    """How many (part, tensor) pairs the parts hold: the rows of all part tables."""
    return sum(_holders_of_kind(t.shape, t.tp_dim, layout, ranks) for t in state(model))


@cache
def _holders_of_kind(shape: tuple[int, ...], tp_dim: int | str | None, layout: str,
                     ranks: int) -> int:
    tensor = Tensor("", shape, FP32, tp_dim)
    return sum(box_of(tensor, layout, ranks, r) is not None for r in range(ranks))


def sampled_ranks(signatures: Sequence[Hashable], sample: int | None
                  ) -> list[tuple[int, int]]:
    """The ranks whose parts are simulated, each with the number of ranks it stands for.

    ``signatures`` says, for each rank, what its part holds (see :func:`part_signature`);
    parts of equal signatures differ only in their offsets and shard numbers. Without
    ``sample``, or when it is not below the ranks, every rank, weight 1. Else about
    ``sample`` ranks: each group of equal signatures gets a share in proportion to its
    size, at least one, evenly spread over its ranks, each standing for itself and the
    group's ranks up to the next one sampled.
    """
    ranks = len(signatures)
    if sample is None or sample >= ranks:
        return [(rank, 1) for rank in range(ranks)]
    groups: dict[Hashable, list[int]] = {}
    for rank, signature in enumerate(signatures):
        groups.setdefault(signature, []).append(rank)
    picks = []
    for members in groups.values():
        share = max(1, round(sample * len(members) / ranks))
        at = sorted({round(k * len(members) / share) for k in range(share)})
        picks += [(members[i], after - i) for i, after in zip(at, [*at[1:], len(members)])]
    return sorted(picks)


def part_signature(model: Model, layout: str, ranks: int, rank: int) -> tuple[Any, ...]:
    """What ``rank``'s part holds, up to where: the extent of its box of each kind of
    tensor (None for none)."""
    return tuple(None if box is None else box[1] for box in
                 (box_of(Tensor("", shape, FP32, tp), layout, ranks, rank)
                  for shape, tp in _kinds(model)))


@cache
def _kinds(model: Model) -> tuple[tuple[tuple[int, ...], int | str | None], ...]:
    return tuple(sorted({(t.shape, t.tp_dim) for t in state(model)}, key=repr))


def build(model: Model, layout: str, ranks: int, options: SaveOptions,
          directory: Path | None, result: Result, sample: int | None = None) -> str:
    """Simulate every part (or a sample of ``sample`` parts, sizing only), size them
    and the merged index; with ``directory``, also write them there. The save id."""
    save_id = new_save_id()
    began = time.perf_counter()
    sizes, shards, merged = [], 0, MergedSize()
    signatures = [part_signature(model, layout, ranks, rank) for rank in range(ranks)]
    picks = sampled_ranks(signatures, None if directory is not None else sample)
    for rank, weight in picks:
        part = simulate_part(model, layout, ranks, rank, save_id, options)
        index = part.index()
        merged.add(index, weight)
        size = (write_part_files(directory, part) if directory is not None
                else len(index.SerializeToString(deterministic=True)))
        sizes += [size] * weight
        shards += weight * len(part.ends)
    result.build_s = time.perf_counter() - began
    result.shards, result.chunks = shards, merged.chunks
    result.part_bytes_min, result.part_bytes_max = min(sizes), max(sizes)
    result.part_bytes_sum = sum(sizes)
    result.merged_bytes_exact = merged.size()
    result.sampled_parts = len(picks) if len(picks) < ranks else None
    return save_id


def measure(model: Model, layout: str, ranks: int, options: SaveOptions, base: Path,
            memory_limit: int, merge: bool, sample: int | None = None) -> Result:
    """Build a config's parts; with ``merge``, in a directory under ``base``, then
    merge them, open and plan, and delete them; else size them (from ``sample`` parts
    when given)."""
    result = count(model, layout, ranks, options)
    if not merge:
        build(model, layout, ranks, options, None, result, sample)
        return result
    directory = Path(tempfile.mkdtemp(prefix=f"{model.name}-{layout}-{ranks}-", dir=base))
    try:
        save_id = build(model, layout, ranks, options, directory, result)
        merged = run_child(["merge", str(directory), save_id, str(ranks)], memory_limit)
        result.merge_s, result.merge_rss = merged.get("merge_s"), merged.get("merge_rss")
        result.merge_cpu = merged.get("merge_cpu")
        result.merged_bytes, result.error = merged.get("merged_bytes"), merged.get("error")
        if result.merged_bytes is not None:
            opened = run_child(["open", str(directory), model.name, other_layout(layout),
                                str(ranks)], memory_limit)
            result.open_s, result.plan_s = opened.get("open_s"), opened.get("plan_s")
            result.open_cpu, result.plan_cpu = opened.get("open_cpu"), opened.get("plan_cpu")
            result.open_rss, result.plan = opened.get("open_rss"), opened.get("plan")
            result.error = result.error or opened.get("error")
        result.merged = True
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return result


# -- report -------------------------------------------------------------------------------------


# The limits of format 1.1, which format 1.2 raised (spec/format.md, Limits).
LIMITS_1_1 = {"index_bytes": 256 * MiB, "slices": 4096}
# Those of this version: every tensor of these models has rank 2 or less.
LIMITS = {"index_bytes": MAX_INDEX_BYTES, "slices": max_slices(2)}


def limits_hit(result: Result, limits: Mapping[str, int] = LIMITS) -> list[str]:
    """The limits of spec/format.md this config breaks (by default those of this
    version; LIMITS_1_1 for format 1.1)."""
    hit = []
    if result.max_slices_per_tensor > limits["slices"]:
        hit.append(f"R-SLICE-004 ({result.max_slices_per_tensor:,} slices > "
                   f"{limits['slices']})")
    size = result.merged_bytes_exact
    if size is not None and size > limits["index_bytes"]:
        hit.append(f"R-LIMIT-001 (index {size / MiB:.0f} MiB > {limits['index_bytes'] // MiB})")
    if result.shards is not None and result.shards > MAX_SHARDS:
        hit.append(f"R-LIMIT-002 ({result.shards:,} shards > {MAX_SHARDS})")
    return hit


def growth(results: Sequence[Result], metric: str, against: str = "slices"
           ) -> tuple[float, int] | None:
    """Slope of log(metric) on log(against) over the configs that have it, and their
    number."""
    points = [(getattr(r, against), getattr(r, metric)) for r in results
              if getattr(r, metric) is not None and getattr(r, metric) > 0]
    xs = [x for x, _ in points]
    if len(points) < 2 or max(xs) < 2 * min(xs):  # too narrow a range to fit a slope on
        return None
    x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0]), len(points)


def _mib(size: int | None) -> str:
    return "-" if size is None else f"{size / MiB:.2f}"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def _cpu(cpu: float | None, wall: float | None) -> str:
    return "-" if cpu is None else f"{cpu:.2f} ({_s(wall)})"


def table(results: Sequence[Result]) -> str:
    """The results as a Markdown table."""
    lines = ["| model | layout | ranks | slices | max slices/tensor | shards | chunks | "
             "part index MiB (min-max) | merged index MiB | merge CPU s (wall) | "
             "merge peak RSS MiB | open CPU s (wall) | plan CPU s (wall) | plan read/needed | "
             "limit hit (1.2) | format 1.1 limit hit |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        parts = "-" if r.part_bytes_min is None else \
            f"{_mib(r.part_bytes_min)}-{_mib(r.part_bytes_max)}"
        merged = _mib(r.merged_bytes_exact) + (
            "" if r.merged_bytes is not None else
            f" (sampled, {r.sampled_parts:,} parts)" if r.sampled_parts else " (sized)")
        ratio = "-" if not r.plan or not r.plan["bytes_needed"] else \
            f"{r.plan['bytes_read'] / r.plan['bytes_needed']:.3f}"
        hit = "; ".join(limits_hit(r)) or "none"
        hit_1_1 = "; ".join(limits_hit(r, LIMITS_1_1)) or "none"
        if r.error:
            hit += f"; merge: {r.error.split(':')[0]}"
        shards = "-" if r.shards is None else f"{r.shards:,}"
        chunks = "-" if r.chunks is None else f"{r.chunks:,}"
        lines.append(f"| {r.model} | {r.layout} | {r.ranks:,} | {r.slices:,} | "
                     f"{r.max_slices_per_tensor:,} | {shards} | {chunks} | {parts} | {merged} | "
                     f"{_cpu(r.merge_cpu, r.merge_s)} | {_mib(r.merge_rss)} | "
                     f"{_cpu(r.open_cpu, r.open_s)} | {_cpu(r.plan_cpu, r.plan_s)} | {ratio} | "
                     f"{hit} | {hit_1_1} |")
    return "\n".join(lines)


def fits(results: Sequence[Result]) -> str:
    """The growth of each cost, as Markdown lines: log-log slopes on the number of
    slices (at 8 ranks, across models: the parts fixed; and over every config), and
    a least-squares split into a cost per slice and per (part, tensor) pair."""
    lines = []
    for metric in ("merge_cpu", "merge_rss", "open_cpu", "plan_cpu"):
        # Below 100,000 slices fixed costs (imports, opening files) flatten the slope.
        large = [r for r in _complete(results) if r.slices >= FIT_MIN_SLICES]
        at_8 = growth([r for r in large if r.ranks == 8], metric)
        every = growth(large, metric)
        if every is None:
            continue
        line = f"- {metric}: ~ slices^{every[0]:.2f} over all ({every[1]} configs)"
        if at_8 is not None:
            line += f", ~ slices^{at_8[0]:.2f} at 8 ranks ({at_8[1]} configs)"
        split = _per_slice_and_pair(results, metric)
        if split is not None:
            line += (f"; ~ {split[0]:.3g} per slice + {split[1]:.3g} per (part, tensor) "
                     f"(R^2 {split[2]:.3f})")
        lines.append(line)
    return "\n".join(lines)


def _complete(results: Sequence[Result]) -> list[Result]:
    return [r for r in results if r.merged and r.error is None]


def extrapolated(results: Sequence[Result]) -> str:
    """What the configs not merged here would cost, by the per-slice and per-pair fits
    of the merged ones: a Markdown table (empty when every config was merged)."""
    rest = [r for r in results if not r.merged and r.part_tensors is not None]
    merge, memory = _per_slice_and_pair(results, "merge_cpu"), \
        _per_slice_and_pair(results, "merge_rss")
    # One rank's plan builds the views of the slices of every tensor it loads: all of
    # them, whatever the parts (the per-pair term fits to noise).
    planned = [(r.slices, r.plan_cpu) for r in _complete(results) if r.plan_cpu is not None]
    if not rest or merge is None or memory is None or not planned:
        return ""
    plan = sum(x * y for x, y in planned) / sum(x * x for x, _ in planned)
    lines = ["| model | layout | ranks | slices | (part, tensor) pairs | merge CPU s | "
             "merge RSS GiB | plan CPU s (one rank) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rest:
        pairs = r.part_tensors or 0
        lines.append(f"| {r.model} | {r.layout} | {r.ranks:,} | {r.slices:,} | {pairs:,} | "
                     f"{merge[0] * r.slices + merge[1] * pairs:.0f} | "
                     f"{(memory[0] * r.slices + memory[1] * pairs) / (1 << 30):.1f} | "
                     f"{plan * r.slices:.0f} |")
    return "\n".join(lines)


def _per_slice_and_pair(results: Sequence[Result], metric: str
                        ) -> tuple[float, float, float] | None:
    """Least squares of ``metric`` = a * slices + b * part_tensors: (a, b, R^2), over
    the configs whose merge succeeded (a refused one stops part way)."""
    rows = [(r.slices, r.part_tensors, getattr(r, metric)) for r in _complete(results)
            if getattr(r, metric) is not None and r.part_tensors is not None]
    if len(rows) < 3:
        return None
    x = np.array([[a, b] for a, b, _ in rows], dtype=np.float64)
    y = np.array([c for _, _, c in rows], dtype=np.float64)
    (a, b), *_ = np.linalg.lstsq(x, y, rcond=None)
    total = float(((y - y.mean()) ** 2).sum())
    fitted = 1 - float(((y - x @ np.array([a, b])) ** 2).sum()) / total if total else 1.0
    return float(a), float(b), fitted


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="7b,70b,405b")
    parser.add_argument("--ranks", default="8,64,512,1024,8192")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--max-slices", type=int, default=4_000_000,
                        help="configs with more slices in all are counted, not built")
    parser.add_argument("--memory-limit", type=int, default=9 << 30,
                        help="address space of each merge and open subprocess, bytes")
    parser.add_argument("--chunk-size", type=int, default=RESHARD_CHUNK_SIZE)
    parser.add_argument("--tile-bytes", default=RESHARD_TILES,
                        help="'strips' (the default: strips and a chunk size per tensor, up "
                        "to --chunk-size), a grid of tiles of this many bytes, or 0: no "
                        "tiles (one slice per box)")
    parser.add_argument("--sample-parts", type=int, default=None,
                        help="size configs that are not merged from this many parts evenly "
                        "spread over the ranks, each standing for the ranks up to the next "
                        "(an estimate; default: every part, exact)")
    parser.add_argument("--dir", type=Path, default=None, help="where parts are built")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--report", type=Path, nargs="+", default=None,
                        help="print the report of earlier --json results, run nothing")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _child(args: argparse.Namespace) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (args.memory_limit, args.memory_limit))
    step, directory, *rest = args.child
    if step == "merge":
        out = child_merge(Path(directory), rest[0], int(rest[1]))
    else:
        out = child_open(Path(directory), MODELS[rest[0]], rest[1], int(rest[2]))
    print(json.dumps(out))


def main(argv: Sequence[str] | None = None) -> list[Result]:
    args = parse(argv)
    if args.child:
        _child(args)
        return []
    tile_bytes: TileBytes = "strips" if args.tile_bytes == "strips" else \
        int(args.tile_bytes) or None
    options = SaveOptions(args.chunk_size, tile_bytes)
    if args.report:
        results = [Result(**r) for path in args.report for r in json.loads(path.read_text())]
        for r in results:  # saved before it was counted
            if r.part_tensors is None:
                r.part_tensors = part_tensors(MODELS[r.model], r.layout, r.ranks)
        _report(results, options, args)
        return results
    base = Path(tempfile.mkdtemp(prefix="ocf-index-scale-", dir=args.dir))
    results = []
    try:
        for name in args.models.split(","):
            for layout in args.layouts.split(","):
                for ranks in (int(r) for r in args.ranks.split(",")):
                    slices = count(MODELS[name], layout, ranks, options).slices
                    result = measure(MODELS[name], layout, ranks, options, base,
                                     args.memory_limit, slices <= args.max_slices,
                                     args.sample_parts)
                    results.append(result)
                    print(f"{name} {layout} {ranks}: {json.dumps(asdict(result))}",
                          file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _report(results, options, args)
    return results


def _report(results: list[Result], options: SaveOptions, args: argparse.Namespace) -> None:
    report = (f"OCF {__version__}, chunk_size {options.chunk_size}, tile_bytes "
              f"{options.tile_bytes}, max_shard_size {options.max_shard_size}\n\n"
              f"{table(results)}\n\nGrowth (log-log slopes over configs of at least "
              f"{FIT_MIN_SLICES:,} slices; the split is fitted on every merge that succeeded):\n\n"
              f"{fits(results)}\n")
    guess = extrapolated(results)
    if guess:
        report += ("\nExtrapolated, not measured: the configs not merged here, by the fits "
                   f"above:\n\n{guess}\n")
    print(report)
    if args.markdown:
        args.markdown.write_text(report)
    if args.json and not args.report:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
