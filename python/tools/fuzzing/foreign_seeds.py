"""Seeds of the formats read through a Source only: GGUF files and sharded safetensors.

A GGUF seed is written by the gguf package (llama.cpp's own writer, in the
test set-up) with metadata of every value type, plain tensors and Q8_0 and
Q4_0 ones; a sharded safetensors seed is two shards written by OCF's
safetensors writer and the index Hugging Face would write for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import ocf
from fuzzing.seeds import Seed
from ocf.interop.safetensors import convert as safetensors


def foreign_seeds(work: Path, arrays: dict[str, np.ndarray]) -> list[Seed]:
    work.mkdir(parents=True, exist_ok=True)
    return [_gguf_seed(work, arrays), _sharded_seed(work, arrays)]


def _gguf_seed(work: Path, arrays: dict[str, np.ndarray]) -> Seed:
    import gguf

    path = work / "x.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.block_count", 2)
    writer.add_int64("llama.big", -(1 << 40))
    writer.add_float64("llama.eps", 1e-6)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_string("general.name", "seed")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "a", "\u00fc"])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.5])
    writer.add_array("nested", [[1, 2], [3]])
    for key in ("f32", "i64", "u8"):
        value = arrays[key]
        writer.add_tensor(key, value.astype(np.int8) if value.dtype == np.uint8 else value)
    values = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    for name in ("Q8_0", "Q4_0"):
        qtype = gguf.GGMLQuantizationType[name]
        writer.add_tensor(name.lower(), gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Seed("gguf", {"x.gguf": path.read_bytes()}, "x.gguf")


def _sharded_seed(work: Path, arrays: dict[str, np.ndarray]) -> Seed:
    plain = {k: v for k, v in arrays.items() if v.dtype != object}
    keys = sorted(plain)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    files: dict[str, bytes] = {}
    weight_map: dict[str, str] = {}
    for name, members in shards.items():
        flat = work / f"{name}.ocf"
        ocf.save_file({k: plain[k] for k in members}, flat)
        safetensors.from_ocf(flat, work / name)
        files[f"m/{name}"] = (work / name).read_bytes()
        weight_map.update(dict.fromkeys(members, name))
    index = {"metadata": {"total_size": sum(plain[k].nbytes for k in keys)},
             "weight_map": weight_map}
    files["m/model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return Seed("sharded-safetensors", files, "m")
