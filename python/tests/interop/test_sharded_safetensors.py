"""Hugging Face sharded safetensors models (an index and its shards) as one checkpoint.

Models are written by huggingface_hub.save_torch_state_dict (foreign_files.write_sharded),
the function transformers' save_pretrained shards with, with a small max_shard_size so
the tensors spread over several shards; the expected values are the tensors given to
it. Hostile variants edit the index it wrote (or the shards) by hand.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("safetensors")
pytest.importorskip("huggingface_hub")
pytest.importorskip("torch")

import numpy as np
from cli_support import run, run_json
from foreign_files import assert_reads_back, write_sharded

import ocf

INDEX = "model.safetensors.index.json"


TENSORS = {"model.embed.weight": np.arange(300, dtype=np.float32).reshape(75, 4),
           "model.layers.0.weight": np.linspace(-1, 1, 200).astype(np.float16),
           "lm_head.weight": np.arange(12, dtype=np.float64).reshape(3, 4),
           "step": np.array(7, dtype=np.int64)}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_sharded(tmp_path / "model", TENSORS)


def _index(model: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((model / INDEX).read_text())
    return loaded


def _weight_map(model: Path) -> dict[str, str]:
    found = _index(model)["weight_map"]
    assert isinstance(found, dict)
    return found


def _rewrite(model: Path, weight_map: dict[str, str]) -> None:
    (model / INDEX).write_text(json.dumps({"metadata": _index(model)["metadata"],
                                           "weight_map": weight_map}))


def test_every_tensor_of_every_shard_reads_as_one_checkpoint(model: Path) -> None:
    assert len(set(_weight_map(model).values())) >= 2  # really sharded
    for path in (model, model / INDEX):
        assert_reads_back(path, "sharded-safetensors", TENSORS)
        with ocf.open(path) as source:
            assert source.metadata["safetensors.index.metadata"] == _index(model)["metadata"]
            assert source.metadata["safetensors.metadata"] == {"format": "pt"}


def test_the_command_line_inspects_verifies_diffs_and_converts(model: Path,
                                                               tmp_path: Path) -> None:
    document = run_json("inspect", "--all", str(model))
    assert document["format"] == "sharded-safetensors"
    values = {t["key"]: t["value"] for t in document["tensors"]}
    np.testing.assert_array_equal(np.array(values["lm_head.weight"]), TENSORS["lm_head.weight"])
    text = run("inspect", str(model))
    assert "model-00001-of-" in text.stdout  # each tensor's shard
    verified = run_json("verify", str(model))
    assert (verified["ok"], verified["tensors"]) == (True, len(TENSORS))
    assert verified["bytes"] == sum(p.stat().st_size for p in model.glob("*.safetensors"))
    for target in ("one.ocf", "one.safetensors"):
        assert run("convert", str(model), str(tmp_path / target)).returncode == 0
        loaded = ocf.load_file(tmp_path / target)
        assert loaded.keys() == TENSORS.keys()
        for key, value in TENSORS.items():
            np.testing.assert_array_equal(loaded[key], value)
            assert loaded[key].dtype == value.dtype
    assert run("diff", str(model), str(tmp_path / "one.ocf")).returncode == 0
    from safetensors.numpy import load_file

    read_back = load_file(str(tmp_path / "one.safetensors"))  # the safetensors package reads it
    np.testing.assert_array_equal(read_back["model.embed.weight"], TENSORS["model.embed.weight"])
    changed = write_sharded(tmp_path / "changed", dict(TENSORS, step=np.array(8, np.int64)))
    report = run_json("diff", str(model), str(changed), status=1)
    assert [t["key"] for t in report["tensors"]] == ["step"]


def _refused(model: Path, error: type[ocf.OCFError], *words: str) -> None:
    with pytest.raises(error) as info:
        ocf.open(model).close()
    message = str(info.value)
    assert str(model) in message
    for word in words:
        assert word in message, message
    done = run("inspect", str(model))
    assert done.returncode == 1
    assert done.stderr.startswith(f"{info.value.label}: ")


@pytest.mark.parametrize("name", ["../outside.safetensors", "/etc/passwd",
                                  "sub/../../outside.safetensors"])
def test_a_shard_outside_the_directory_is_refused(model: Path, name: str) -> None:
    weight_map = _weight_map(model)
    weight_map["step"] = name
    _rewrite(model, weight_map)
    _refused(model, ocf.InvalidError, "outside")


def test_a_shard_linked_from_outside_the_directory_is_refused(model: Path,
                                                             tmp_path: Path) -> None:
    weight_map = _weight_map(model)
    shard = model / weight_map["step"]
    outside = tmp_path / "elsewhere.safetensors"
    os.replace(shard, outside)
    shard.symlink_to(outside)
    _refused(model, ocf.InvalidError, "symbolic link", shard.name)


def test_a_missing_shard_is_not_found(model: Path) -> None:
    weight_map = _weight_map(model)
    (model / weight_map["step"]).unlink()
    _refused(model, ocf.NotFoundError, weight_map["step"])


def test_a_key_its_shard_lacks_is_refused(model: Path) -> None:
    weight_map = _weight_map(model)
    weight_map["not.there"] = weight_map["step"]
    _rewrite(model, weight_map)
    _refused(model, ocf.InvalidError, "not.there", "does not hold it")


def test_a_tensor_in_a_shard_the_map_does_not_name_is_refused(model: Path) -> None:
    weight_map = _weight_map(model)
    names = sorted(set(weight_map.values()))
    moved = next(k for k, v in weight_map.items() if v == names[0])
    weight_map[moved] = names[1]  # the map now says another shard holds it
    _rewrite(model, weight_map)
    _refused(model, ocf.InvalidError, moved)


def test_a_key_named_twice_in_the_index_is_refused(model: Path) -> None:
    text = (model / INDEX).read_text()
    doubled = text.replace('"weight_map": {', '"weight_map": {"step": "x.safetensors", ', 1)
    assert doubled != text
    (model / INDEX).write_text(doubled)
    _refused(model, ocf.MalformedError, "twice")


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"weight_map": [1]}',
                                     b'{"weight_map": {"a": 3}}', b"\xff\xfe",
                                     b'{"weight_map": {}, "metadata": NaN}'])
def test_a_broken_index_is_malformed(model: Path, content: bytes) -> None:
    (model / INDEX).write_bytes(content)
    _refused(model, ocf.MalformedError)


def test_a_broken_shard_header_names_the_shard(model: Path) -> None:
    shard = model / _weight_map(model)["step"]
    shard.write_bytes(shard.read_bytes()[:20])
    with pytest.raises(ocf.MalformedError) as info:
        ocf.open(model).close()
    assert shard.name in str(info.value)
