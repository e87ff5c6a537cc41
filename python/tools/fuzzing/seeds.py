"""Valid checkpoints of every format the project reads, written by its own writers."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

import ocf
from ocf.interop.safetensors import convert as safetensors
from ocf.interop.tensorflow import convert as tf_format

Files = dict[str, bytes]


# The tensor of one seed, larger than the memory squeezed reads get, yet a small file.
LARGE_BYTES = 8 << 20


@dataclass(frozen=True)
class Seed:
    """A valid checkpoint: its format, files by relative name, the name to read."""

    kind: str  # a key of fuzzing.readers.READERS (ocf-file, npz, gguf, pytorch, dcp, ...)
    files: Files
    target: str  # what the reader opens, relative to the input's directory


# -- seeds ------------------------------------------------------------------------


def read_tree(root: Path) -> Files:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _seed_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "i64": np.arange(-6, 6, dtype=np.int64),
        "mask": np.array([[True, False], [False, True]]),
        "u8": np.arange(600, dtype=np.uint8).reshape(20, 30) % 7,
        "names": np.array([b"", b"ab", "\u00fcn".encode()], dtype=object),
        "empty": np.zeros((0, 4), np.float16),
    }


def _object_root(arrays: dict[str, np.ndarray]) -> ocf.Module:
    root: Any = ocf.Module()  # attributes are the object graph's edges
    root.model = ocf.Module()
    root.model.dense = ocf.Module()
    root.model.dense.kernel = ocf.Variable(arrays["f32"])
    root.model.dense.bias = ocf.Variable(arrays["i64"][:5].astype(np.float32))
    root.step = ocf.Variable(np.int64(7))
    return cast(ocf.Module, root)


def make_seeds(work: Path, seed: int) -> list[Seed]:
    """Small valid files of every format, written with the project's writers."""
    rng = np.random.default_rng(seed)
    arrays = _seed_arrays(rng)
    seeds: list[Seed] = []
    metadata = {"step": 3, "lr": 0.5, "tags": ["a", "b"], "nested": {"x": None}}
    for name, options in [("plain", {}), ("zstd", {"compression": "zstd",
                                                    "byte_shuffle": True,
                                                    "chunk_size": 4096})]:
        path = work / f"{name}.ocf"
        with ocf.Writer(path, metadata=metadata, **options) as writer:  # type: ignore[arg-type]
            for key, array in arrays.items():
                writer.write(key, array)
            big = np.tile(np.arange(4096, dtype=np.uint16), 3)
            writer.write("chunked", big)  # several chunks of 4096 bytes
            tiled = np.arange(48, dtype=np.float64).reshape(6, 8)
            for start in ((0, 0), (0, 4), (3, 0), (3, 4)):
                box = tiled[start[0]:start[0] + 3, start[1]:start[1] + 4]
                writer.write_slice("tiled", box, start, tiled.shape)
        seeds.append(Seed("ocf-file", {"x.ocf": path.read_bytes()}, "x.ocf"))
    large = work / "large.ocf"  # more than a squeezed read has (fuzzing.campaign.SQUEEZES)
    with ocf.Writer(large, compression="zstd", chunk_size=1 << 20) as writer:
        writer.write("large", np.arange(LARGE_BYTES, dtype=np.uint8) % 251)
    seeds.append(Seed("ocf-file", {"x.ocf": large.read_bytes()}, "x.ocf"))
    graph_file = work / "graph.ocf"
    ocf.write(_object_root(arrays), graph_file, metadata={"epoch": 1})
    seeds.append(Seed("ocf-file", {"x.ocf": graph_file.read_bytes()}, "x.ocf"))
    directory = work / "dir"
    with ocf.Writer(directory, layout="directory", max_shard_size=4096,
                    compression="zstd") as writer:
        for key, array in arrays.items():
            writer.write(key, array)
        writer.write("wide", np.arange(2048, dtype=np.int32))
    seeds.append(Seed("ocf-dir", {f"ckpt/{k}": v for k, v in read_tree(directory).items()},
                      "ckpt"))
    prefix = work / "tf" / "model.ckpt"
    tf_format.from_ocf(graph_file, prefix, max_shard_bytes=64)
    seeds.append(Seed("tensorflow", read_tree(work / "tf"), "model.ckpt"))
    plain_tensors = {k: v for k, v in arrays.items() if v.dtype != object}
    flat = work / "flat.ocf"
    ocf.save_file(plain_tensors, flat)
    safetensors.from_ocf(flat, work / "x.safetensors")
    seeds.append(Seed("safetensors", {"x.safetensors": (work / "x.safetensors").read_bytes()},
                      "x.safetensors"))
    savers: list[tuple[str, Callable[..., None]]] = [("stored", np.savez),
                                                      ("deflated", np.savez_compressed)]
    for name, save in savers:
        save(work / f"{name}.npz", **plain_tensors)
        seeds.append(Seed("npz", {"x.npz": (work / f"{name}.npz").read_bytes()}, "x.npz"))
    from fuzzing.foreign_seeds import foreign_seeds  # it imports this module's Seed

    seeds += foreign_seeds(work / "foreign", arrays)
    return seeds + torch_seeds(work, plain_tensors)


def torch_seeds(work: Path, arrays: dict[str, np.ndarray]) -> list[Seed]:
    """A ``torch.save`` file and a DCP directory, written by torch, each read once here
    so that the forked worker inherits torch's lazy set-up instead of counting it."""
    import torch
    import torch.distributed.checkpoint as dcp

    tensors = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
    state = {"model": tensors, "half": torch.linspace(-2, 2, 9, dtype=torch.bfloat16),
             "optimizer": {"lr": 0.5, "betas": (0.9, 0.99), "step": 4}}
    torch.save(state, work / "x.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP: "assuming ... a single process"
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(work / "dcp")), no_dist=True)
    for path in (work / "x.pt", work / "dcp"):
        with ocf.open(path) as opened:
            dict(opened.metadata)
            for key in opened:
                opened.read_tensor(key)
    return [Seed("pytorch", {"x.pt": (work / "x.pt").read_bytes()}, "x.pt"),
            Seed("dcp", {f"ckpt/{k}": v for k, v in read_tree(work / "dcp").items()}, "ckpt")]
