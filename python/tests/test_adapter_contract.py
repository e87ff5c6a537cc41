"""The adapter contract: one suite, every framework adapter (numpy, torch, jax).

``ocf.numpy``, ``ocf.torch`` and ``ocf.jax`` each have ``save_file``,
``load_file``, ``save`` and ``restore`` with the same arguments in the same
order and the same behaviour; each test here runs over all three, with the
framework's own tensors. What is written is checked through ``ocf.open``
(the reference reader), never through the adapter under test alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from helpers import corrupt_tensor
from s3server import S3Server

import ocf
import ocf.jax
import ocf.numpy
import ocf.torch


@dataclass(frozen=True)
class Adapter:
    """One framework adapter and how to move values between it and NumPy."""

    module: ModuleType
    tensor: Callable[[np.ndarray], Any]  # a NumPy array as the framework's tensor
    array: Callable[[Any], np.ndarray]  # and back
    float16: Any  # the framework's half-precision dtype
    # What a restore produced: the returned tree (jax) or the target filled in place.
    restored: Callable[[Any, Any], Any]

    @property
    def name(self) -> str:
        return self.module.__name__


ADAPTERS = [
    Adapter(ocf.numpy, np.array, np.asarray, np.float16, lambda result, target: target),
    Adapter(ocf.torch, torch.from_numpy, lambda t: t.numpy(), torch.float16,
            lambda result, target: target),
    Adapter(ocf.jax, jnp.asarray, np.asarray, jnp.float16, lambda result, target: result),
]


@pytest.fixture(params=ADAPTERS, ids=lambda a: a.name)
def adapter(request: pytest.FixtureRequest) -> Adapter:
    return request.param  # type: ignore[no-any-return]


def values() -> dict[str, np.ndarray]:
    return {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
            "b": np.array([1, -2, 3], dtype=np.int32)}  # jax keeps 32 bits


def framework_tensors(adapter: Adapter) -> dict[str, Any]:
    return {key: adapter.tensor(array) for key, array in values().items()}


def stored(path: Path | str, **options: Any) -> dict[str, np.ndarray]:
    with ocf.open(path, **options) as reader:
        return {key: reader.read_tensor(key) for key in reader}


def assert_same(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(actual) == sorted(expected)
    for key, array in expected.items():
        assert actual[key].dtype == array.dtype, key
        np.testing.assert_array_equal(actual[key], array)


# -- the same signatures -------------------------------------------------------------

# Parameters only some adapters have, each for a documented reason: ``device`` where
# the framework has devices; ``translation`` for another framework's names (jax).
ADAPTER_ONLY = {"device", "translation"}


@pytest.mark.parametrize("function", ["save_file", "load_file", "save", "restore"])
def test_every_adapter_takes_the_same_arguments_in_the_same_order(function: str) -> None:
    def shape(module: ModuleType) -> list[tuple[str, Any, Any]]:
        parameters = inspect.signature(getattr(module, function)).parameters.values()
        return [(p.name, p.kind, p.default) for p in parameters if p.name not in ADAPTER_ONLY]

    reference = shape(ocf.numpy)
    for module in (ocf.torch, ocf.jax):
        assert shape(module) == reference, module.__name__


# -- save_file / load_file -----------------------------------------------------------

def test_save_file_then_load_file_gives_back_every_tensor(adapter: Adapter,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    assert adapter.module.save_file(framework_tensors(adapter), path) is None
    assert_same(stored(path), values())
    loaded = adapter.module.load_file(path)
    assert_same({k: adapter.array(v) for k, v in loaded.items()}, values())


def test_metadata_is_the_third_positional_argument_of_save_file(adapter: Adapter,
                                                                tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    adapter.module.save_file(framework_tensors(adapter), path, {"step": 7, "name": "run"})
    with ocf.open(path) as reader:
        assert reader.metadata == {"step": 7, "name": "run"}


def test_load_file_reads_only_the_keys_asked_for(adapter: Adapter, tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    adapter.module.save_file(framework_tensors(adapter), path)
    assert list(adapter.module.load_file(path, ["b"])) == ["b"]
    with pytest.raises(ocf.NotFoundError, match="'missing'"):
        adapter.module.load_file(path, ["missing"])


def test_directory_layout_and_compression_are_options_of_save_file(adapter: Adapter,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    adapter.module.save_file(framework_tensors(adapter), path, layout="directory",
                             compression="zstd")
    assert (path / "index.ocf").is_file()
    with ocf.open(path) as reader:
        assert {reader[key].codec_name for key in reader} == {"zstd"}
    assert_same(stored(path), values())


def test_save_file_without_blocking_returns_a_handle_and_commits_in_the_background(
        adapter: Adapter, tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    tensors = framework_tensors(adapter)
    handle = adapter.module.save_file(tensors, path, blocking=False)
    assert isinstance(handle, ocf.SaveHandle)
    assert handle.wait() == str(path)
    assert_same(stored(path), values())


def test_an_unknown_option_is_a_type_error_at_the_call_even_without_blocking(
        adapter: Adapter, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="chunk_sise"):
        adapter.module.save_file(framework_tensors(adapter), tmp_path / "x.ocf",
                                 blocking=False, chunk_sise=4096)
    assert list(tmp_path.iterdir()) == []


def test_load_file_keeps_stored_dtypes_unless_dtype_casts_them(adapter: Adapter,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    adapter.module.save_file({"w": adapter.tensor(values()["w"])}, path)
    assert adapter.array(adapter.module.load_file(path)["w"]).dtype == np.float32
    cast = adapter.array(adapter.module.load_file(path, dtype=adapter.float16)["w"])
    assert cast.dtype == np.float16
    np.testing.assert_array_equal(cast, values()["w"].astype(np.float16))


def test_load_file_verifies_checksums_unless_told_not_to(adapter: Adapter,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    adapter.module.save_file({"w": adapter.tensor(values()["w"])}, path)
    with ocf.open(path) as reader:
        offset = reader["w"].blocks[0].offset
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ocf.IntegrityError, match=r"flat\.ocf: tensor 'w'"):
        adapter.module.load_file(path)
    assert adapter.array(adapter.module.load_file(path, verify=False)["w"]).shape == (3, 4)


def test_save_file_and_load_file_reach_an_object_store_through_storage_options(
        adapter: Adapter, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"{s3_bucket}/flat.ocf"
    options = s3_server.storage_options
    adapter.module.save_file(framework_tensors(adapter), url, storage_options=options)
    assert_same(stored(url, storage_options=options), values())
    loaded = adapter.module.load_file(url, storage_options=options)
    assert_same({k: adapter.array(v) for k, v in loaded.items()}, values())


# -- save / restore --------------------------------------------------------------------

def state_of(adapter: Adapter, scale: float) -> dict[str, Any]:
    """A nested state of the adapter's tensors: what ``save`` and ``restore`` take."""
    return {"layer": {"w": adapter.tensor(values()["w"] * scale)},
            "bias": adapter.tensor(values()["b"] * int(scale))}


def arrays_of(state: Any, adapter: Adapter) -> dict[str, np.ndarray]:
    return {"layer/w": adapter.array(state["layer"]["w"]), "bias": adapter.array(state["bias"])}


def test_save_then_restore_gives_the_target_the_saved_values(adapter: Adapter,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "state.ocf"
    assert adapter.module.save(state_of(adapter, 2.0), path, {"step": 3}) == str(path)
    with ocf.open(path) as reader:
        assert reader.metadata == {"step": 3}
    target = state_of(adapter, 0.0)
    restored = adapter.restored(adapter.module.restore(target, path), target)
    assert_same(arrays_of(restored, adapter), arrays_of(state_of(adapter, 2.0), adapter))


def test_save_takes_the_options_of_save_file(adapter: Adapter, tmp_path: Path) -> None:
    path = tmp_path / "state"
    handle = adapter.module.save(state_of(adapter, 1.0), path, layout="directory",
                                 compression="zstd", blocking=False)
    assert isinstance(handle, ocf.SaveHandle)
    handle.wait()
    with ocf.open(path) as reader:
        assert reader.object_graph is not None
        assert {reader[key].codec_name for key in reader} == {"zstd"}


def test_restore_is_strict_unless_partial(adapter: Adapter, tmp_path: Path) -> None:
    path = tmp_path / "state.ocf"
    adapter.module.save(state_of(adapter, 2.0), path)
    bigger = {**state_of(adapter, 0.0), "extra": adapter.tensor(np.zeros(2, np.float32))}
    with pytest.raises(ocf.OCFError, match=r"state\.ocf.*'extra'"):
        adapter.module.restore(bigger, path)
    result = adapter.module.restore(bigger, path, partial=True)
    restored = adapter.restored(result, bigger)
    assert adapter.array(restored["layer"]["w"]).tolist() == (values()["w"] * 2).tolist()
    assert adapter.array(restored["extra"]).tolist() == [0.0, 0.0]


def test_a_corrupt_value_fails_the_restore_before_the_target_changes(
        adapter: Adapter, tmp_path: Path) -> None:
    # layer/w is read last (breadth-first), after bias: the failure comes before any copy.
    path = tmp_path / "state.ocf"
    adapter.module.save(state_of(adapter, 2.0), path)
    corrupt_tensor(path, "layer/w/.value")
    target = state_of(adapter, 0.0)
    with pytest.raises(ocf.IntegrityError) as caught:
        adapter.module.restore(target, path)
    assert (caught.value.key, caught.value.path) == ("layer/w/.value", str(path))
    assert_same(arrays_of(target, adapter), arrays_of(state_of(adapter, 0.0), adapter))


def test_restore_reads_an_object_store_through_storage_options(
        adapter: Adapter, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"{s3_bucket}/state.ocf"
    options = s3_server.storage_options
    adapter.module.save(state_of(adapter, 3.0), url, storage_options=options)
    target = state_of(adapter, 0.0)
    result = adapter.module.restore(target, url, storage_options=options)
    assert_same(arrays_of(adapter.restored(result, target), adapter),
                arrays_of(state_of(adapter, 3.0), adapter))

