"""What a child does with one input of each format, and the memory the input justifies."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

import ocf
from fuzzing.seeds import Files
from ocf.format.container import FOOTER_SIZE
from ocf.format.limits import MAX_ZSTD_RATIO
from ocf.interop.npz import convert as npz
from ocf.interop.registry import format_of, open_checkpoint
from ocf.interop.safetensors import convert as safetensors
from ocf.interop.tensorflow.source import TFSource
from ocf.v1 import index_pb2
from ocf.v1.tensor_pb2 import CODEC_NONE

# A read holds a few copies of what it returns (raw buffer, array, slice copy, the
# strings' Python objects, a conversion's output file buffers).
COPIES = 16

def _read_ocf(path: Path, verify: bool) -> None:
    with ocf.Reader(path, verify=verify) as reader:
        dict(reader.metadata)
        for key in list(reader):
            info = reader[key]
            reader.get_tensor(key)
            reader.read_tensor(key)
            reader.get_slice(key, tuple(slice(0, max(1, d // 2)) for d in info.shape))
            if info.dtype.numpy is not None:
                reader.read_into(key, np.empty(info.shape, info.dtype.numpy))
        reader.read_tensors(list(reader))
        reader.verify_all()
        graph = reader.object_graph
        if graph is not None:
            for node in range(len(graph.nodes)):
                graph.path_end(node, 200)


def _read_tensorflow(path: Path, verify: bool) -> None:
    with TFSource(path, verify=verify) as source:
        for key in source:
            source.summary(key)
            source.read_tensor(key)
            entry = source.bundle.entry(key)
            for i in range(len(entry.slices or ())):
                source.bundle.read_slice(key, i)
        graph = source.object_graph
        if graph is not None:
            for node in range(len(graph.nodes)):
                graph.path_end(node, 200)


def _read_source(path: Path, verify: bool) -> None:
    """Every read of ocf.open's Source: metadata, each tensor whole and a slice of it."""
    with ocf.open(path, verify=verify) as source:
        dict(source.metadata)
        for key in list(source):
            view = source[key]
            source.read_tensor(key)
            source.get_slice(key, tuple(slice(0, max(1, d // 2)) for d in view.shape))


def _convert(module: Any) -> Callable[[Path, bool], None]:
    def read(path: Path, verify: bool) -> None:
        out = path.parent / "converted.ocf"
        module.to_ocf(path, out)
        _read_ocf(out, verify)
    return read


def _read_source(path: Path, verify: bool) -> None:
    """Every value a Source of the format can read, whole and in pieces; then the
    conversion to OCF (refused for a file with quantized GGUF tensors)."""
    with open_checkpoint(path, verify=verify) as source:
        dict(source.metadata)
        for key in source:
            view = source[key]
            if view.dtype.numpy is None:  # a quantized GGUF tensor: listed, not read
                continue
            source.read_tensor(key)
            source.get_slice(key, tuple(slice(0, max(1, d // 2)) for d in view.shape))
    _convert(format_of(path))(path, verify)


READERS: dict[str, Callable[[Path, bool], None]] = {
    "ocf-file": _read_ocf,
    "ocf-dir": _read_ocf,
    "tensorflow": _read_tensorflow,
    "safetensors": _convert(safetensors),
    "npz": _convert(npz),
    "gguf": _read_source,
    "sharded-safetensors": _read_source,
    "pytorch": _read_source,
    "dcp": _read_source,
}


def justified_bytes(seed_kind: str, files: Files) -> int:
    """The memory a read of ``files`` may take: the copies a read holds of their bytes,
    and of what their compressed data may expand to."""
    total = sum(len(v) for v in files.values())
    if seed_kind.startswith("ocf"):
        total += _zstd_expansion(files)
    elif seed_kind == "npz":  # a member's declared size is at most 1032 times its bytes
        total *= max(npz.MAX_RATIO.values())
    return COPIES * total


def _zstd_expansion(files: Files) -> int:
    """What the compressed blocks of the OCF index files among ``files`` may decode to:
    each block's raw length, up to 32768 times its stored length [R-CHUNK-004]."""
    expansion = 0
    for name, data in files.items():
        if not name.endswith(".ocf") or len(data) < 96:
            continue
        offset, length = struct.unpack_from("<QQ", data, len(data) - FOOTER_SIZE)
        if offset + length != len(data) - FOOTER_SIZE:
            continue  # the reader stops at the footer
        index = index_pb2.Index()
        try:
            index.ParseFromString(data[offset:offset + length])
        except DecodeError:
            continue  # the reader stops at the parse
        blocks = index.blocks
        for codec, stored, raw in zip(blocks.codecs, blocks.stored_lengths, blocks.raw_lengths):
            if codec != CODEC_NONE:
                expansion += min(raw, MAX_ZSTD_RATIO * stored)
    return expansion
