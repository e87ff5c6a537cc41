"""Checkpoints of the foreign formats for the tests, each written by its own library:
GGUF files by the gguf package (llama.cpp's own Python writer; hostile ones assembled
byte by byte from the documented layout), sharded safetensors models by
huggingface_hub, Orbax checkpoints by orbax-checkpoint."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def assert_reads_back(path: Path, format_name: str,
                      expected: Mapping[str, np.ndarray]) -> None:
    """``ocf.open(path)`` is a Source of ``format_name`` holding exactly ``expected``:
    the same keys, dtypes, shapes and values."""
    import ocf

    with ocf.open(path) as source:
        assert source.format_name == format_name
        assert sorted(source) == sorted(expected)
        for key, value in expected.items():
            assert (source[key].dtype.name, source[key].shape) == (value.dtype.name,
                                                                  value.shape), key
            np.testing.assert_array_equal(source.read_tensor(key), value, err_msg=key)


def write_with_gguf(path: Path, tensors: Mapping[str, np.ndarray], *,
                    quantized: Mapping[str, tuple[np.ndarray, str]] | None = None,
                    metadata: bool = True) -> Path:
    """``tensors`` written by gguf.GGUFWriter; ``quantized`` maps a name to float values
    and the ggml type (``"Q8_0"``) gguf.quants packs them in."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    if metadata:
        writer.add_uint32("llama.block_count", 2)
        writer.add_float32("llama.rope.freq_base", 10000.0)
        writer.add_bool("tokenizer.ggml.add_bos_token", True)
        writer.add_string("general.name", "tiny")
        writer.add_array("tokenizer.ggml.tokens", ["<s>", "a", "\u00fc"])
        writer.add_array("tokenizer.ggml.scores", [0.0, -1.5, -2.25])
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    for name, (values, type_name) in (quantized or {}).items():
        qtype = gguf.GGMLQuantizationType[type_name]
        packed = gguf.quants.quantize(values.astype(np.float32), qtype)
        writer.add_tensor(name, packed, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_sharded(directory: Path, tensors: Mapping[str, np.ndarray],
                  max_shard_size: int = 1000) -> Path:
    """``tensors`` saved by huggingface_hub.save_torch_state_dict (what transformers'
    save_pretrained shards with) in shards of at most ``max_shard_size`` bytes."""
    import huggingface_hub
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    huggingface_hub.save_torch_state_dict(
        {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}, directory,
        max_shard_size=max_shard_size)
    return directory


def write_orbax(directory: Path, tree: object, how: str = "standard") -> Path:
    """``tree`` saved by orbax-checkpoint: ``how`` is "standard" (StandardCheckpointer),
    "pytree" (PyTreeCheckpointer) or "manager" (CheckpointManager step 5 of
    ``directory``, whose step directory is returned)."""
    import orbax.checkpoint as ocp

    target = directory.absolute()
    if how == "manager":
        with ocp.CheckpointManager(target) as manager:
            manager.save(5, args=ocp.args.StandardSave(tree))
            manager.wait_until_finished()
        return target / "5"
    checkpointer = ocp.StandardCheckpointer() if how == "standard" else ocp.PyTreeCheckpointer()
    with checkpointer:
        checkpointer.save(target, tree)
    return target


def nested(tensors: Mapping[str, np.ndarray]) -> dict[str, object]:
    """Flat keys ``a/b/c`` as the nested dicts whose tree paths they are."""
    tree: dict[str, object] = {}
    for key, value in tensors.items():
        *parents, leaf = key.split("/")
        node = tree
        for part in parents:
            child = node.setdefault(part, {})
            assert isinstance(child, dict)
            node = child
        node[leaf] = value
    return tree


# -- GGUF files assembled by hand ---------------------------------------------------------


def string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv_u32(key: str, value: int) -> bytes:
    return string(key) + struct.pack("<II", 4, value)


def tensor_info(name: str, dims_innermost_first: Sequence[int], ggml_type: int,
                offset: int) -> bytes:
    return (string(name) + struct.pack("<I", len(dims_innermost_first))
            + b"".join(struct.pack("<Q", d) for d in dims_innermost_first)
            + struct.pack("<IQ", ggml_type, offset))


def assemble(pairs: Sequence[bytes], infos: Sequence[bytes], data: bytes, *,
             version: int = 3, alignment: int = 32, tensor_count: int | None = None,
             pair_count: int | None = None) -> bytes:
    """A GGUF file of raw key-value pairs, tensor infos and data section."""
    head = (b"GGUF" + struct.pack("<IQQ", version,
                                  len(infos) if tensor_count is None else tensor_count,
                                  len(pairs) if pair_count is None else pair_count)
            + b"".join(pairs) + b"".join(infos))
    return head + b"\0" * (-len(head) % alignment) + data


def small_file(version: int = 3) -> bytes:
    """One float32 tensor of NumPy shape (2, 3): the valid base of the hostile variants."""
    values = np.arange(6, dtype=np.float32).tobytes()
    return assemble([kv_u32("general.alignment", 32)], [tensor_info("w", [3, 2], 0, 0)],
                    values, version=version)
