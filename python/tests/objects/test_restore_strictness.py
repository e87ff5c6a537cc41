"""Restores that fail loudly and never half-apply: strictness, all-or-nothing, one dtype policy.

Every object restore (``ocf.restore``, ``Checkpoint.restore``, the adapters'
``restore``) is strict unless ``partial=True``, checks every value before it
copies the first, and refuses a dtype other than the target's unless
``cast=True``. Each test here failed on the code before these rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")

import jax.numpy as jnp
import numpy as np
import torch
from helpers import corrupt_tensor
from torch import nn

import ocf
import ocf.jax
import ocf.numpy
import ocf.objects.read_ahead
import ocf.torch


def trained_net(seed: int = 0) -> tuple[nn.Sequential, torch.optim.Adam]:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    net(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    return net, optimizer


def snapshot(net: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, bytes]:
    """Every parameter's and optimizer state tensor's bytes, by name."""
    out = {f"param/{k}": v.detach().numpy().tobytes() for k, v in net.state_dict().items()}
    for i, state in enumerate(optimizer.state.values()):
        for name, value in state.items():
            out[f"state/{i}/{name}"] = value.detach().numpy().tobytes()
    out["param_groups"] = repr(optimizer.state_dict()["param_groups"]).encode()
    return out


# -- the objects are never mixed with options ------------------------------------------

def test_objects_given_as_keywords_are_a_type_error_not_objects(tmp_path: Path) -> None:
    net, optimizer = trained_net()
    path = ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "o.ocf")
    with pytest.raises(TypeError, match="unexpected keyword argument 'model'"):
        ocf.torch.restore(path, model=net, optimzer=optimizer)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="strict"):
        ocf.torch.restore({"model": net}, path, strict=True)  # type: ignore[call-arg]


def test_a_typo_in_an_object_name_fails_naming_both_sides_and_the_file(tmp_path: Path) -> None:
    net, optimizer = trained_net()
    path = ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "o.ocf")
    fresh, fresh_optimizer = trained_net(seed=1)
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        ocf.torch.restore({"model": fresh, "optimzer": fresh_optimizer}, path)
    message = str(caught.value)
    assert message.startswith(f"INVALID: {path}: 12 checkpoint objects holding tensors "
                              "matched no object: 'optimizer/.slot/model/0/bias/exp_avg'")
    assert "; 12 objects holding tensors have no value in the checkpoint: 'optimzer/" in message


# -- strict unless partial ---------------------------------------------------------------

def test_a_model_with_an_extra_layer_is_refused_unless_partial(tmp_path: Path) -> None:
    net, _ = trained_net()
    path = ocf.torch.save({"model": net}, tmp_path / "m.ocf")
    bigger = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Linear(2, 2))
    with pytest.raises(ocf.RestoreMismatchError, match=r"m\.ocf.*'model/3/weight'"):
        ocf.torch.restore({"model": bigger}, path)
    ocf.torch.restore({"model": bigger}, path, partial=True)
    assert torch.equal(bigger[0].weight, net[0].weight)


def test_a_model_with_a_missing_layer_is_refused_unless_partial(tmp_path: Path) -> None:
    net, _ = trained_net()
    path = ocf.torch.save({"model": net}, tmp_path / "m.ocf")
    smaller = nn.Sequential(nn.Linear(4, 8))
    before = smaller[0].weight.detach().clone()
    with pytest.raises(ocf.RestoreMismatchError, match=r"'model/2/weight'"):
        ocf.torch.restore({"model": smaller}, path)
    assert torch.equal(smaller[0].weight, before)  # the refusal changed nothing
    status = ocf.torch.restore({"model": smaller}, path, partial=True)
    assert torch.equal(smaller[0].weight, net[0].weight)
    assert status.unmatched_checkpoint_paths(holding_values=True) == ["model/2/bias",
                                                                      "model/2/weight"]


def test_checkpoint_restore_and_ocf_restore_are_strict_by_default(tmp_path: Path) -> None:
    state = {"w": np.arange(3.0), "b": np.ones(2)}
    path = ocf.Checkpoint(**state).save(tmp_path / "ckpt")
    with pytest.raises(ocf.RestoreMismatchError, match="'b'"):
        ocf.Checkpoint(w=np.zeros(3)).restore(path)
    flat_path = ocf.numpy.save(state, tmp_path / "s.ocf")
    with pytest.raises(ocf.RestoreMismatchError, match="'extra'"):
        ocf.restore({"w": np.zeros(3), "b": np.zeros(2), "extra": np.zeros(1)}, flat_path)
    ocf.Checkpoint(w=np.zeros(3)).restore(path, partial=True)


# -- all or nothing --------------------------------------------------------------------

def test_a_restore_failing_on_the_last_layer_leaves_model_and_optimizer_untouched(
        tmp_path: Path) -> None:
    net, optimizer = trained_net()
    path = ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "o.ocf")
    torch.manual_seed(5)
    other = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))  # last layer differs
    other_optimizer = torch.optim.Adam(other.parameters(), lr=0.5)
    other(torch.ones(3, 4)).sum().backward()
    other_optimizer.step()
    before = snapshot(other, other_optimizer)
    with pytest.raises(ocf.InvalidError, match=r"o\.ocf: tensor 'model/2/weight/\.value': "
                       r"cannot restore a tensor of shape \[2, 8\] into a Parameter of shape "
                       r"\[3, 8\]"):
        ocf.torch.restore({"model": other, "optimizer": other_optimizer}, path)
    assert snapshot(other, other_optimizer) == before


def test_a_numpy_restore_failing_on_one_array_changes_no_array(tmp_path: Path) -> None:
    path = ocf.numpy.save({"a": np.arange(4.0), "z": np.ones((2, 2))}, tmp_path / "s.ocf")
    target = {"a": np.zeros(4), "z": np.zeros((3, 3))}
    with pytest.raises(ocf.InvalidError, match=r"tensor 'z/\.value'.*shape \[2, 2\]"):
        ocf.numpy.restore(target, path)
    assert target["a"].tolist() == [0.0] * 4


def test_a_strictness_failure_changes_nothing_either(tmp_path: Path) -> None:
    path = ocf.numpy.save({"a": np.arange(4.0), "b": np.ones(2)}, tmp_path / "s.ocf")
    target = {"a": np.zeros(4)}
    with pytest.raises(ocf.RestoreMismatchError, match="'b'"):
        ocf.numpy.restore(target, path)
    assert target["a"].tolist() == [0.0] * 4


@pytest.mark.parametrize("read_ahead", ["kept", "checked only"])
@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("corrupted", ["model/2/bias/.value",
                                       "optimizer/.slot/model/2/bias/exp_avg_sq/.value"])
def test_a_checksum_failure_in_the_last_tensor_leaves_model_and_optimizer_untouched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corrupted: str,
        compression: str | None, read_ahead: str) -> None:
    # The last parameter and the last slot value: every other value is read before them.
    # Without room to keep values, each is checked by its stored chunks' checksums only.
    if read_ahead == "checked only":
        monkeypatch.setattr(ocf.objects.read_ahead, "READ_AHEAD_BYTES", 0)
    net, optimizer = trained_net()
    path = Path(ocf.torch.save({"model": net, "optimizer": optimizer}, tmp_path / "o.ocf",
                               compression=compression))
    corrupt_tensor(path, corrupted)
    other, other_optimizer = trained_net(seed=5)
    before = snapshot(other, other_optimizer)
    with pytest.raises(ocf.IntegrityError, match="CRC-32C") as caught:
        ocf.torch.restore({"model": other, "optimizer": other_optimizer}, path)
    assert (caught.value.key, caught.value.path) == (corrupted, str(path))
    assert snapshot(other, other_optimizer) == before


@pytest.mark.parametrize(("layout", "compression"),
                         [("file", None), ("file", "zstd"), ("directory", None)])
def test_verify_tensor_finds_a_flipped_byte_in_any_chunk_and_returns_nothing(
        tmp_path: Path, layout: str, compression: str | None) -> None:
    # What a restore runs on values beyond its read-ahead budget: the stored chunks'
    # checksums, for a mapped file, compressed chunks, and a shard of a directory.
    path = tmp_path / "c"
    values = {"a": np.arange(1000.0), "b": np.random.default_rng(0).standard_normal(3000)}
    ocf.save_file(values, path, layout=layout, compression=compression, chunk_size=4096)
    with ocf.open(path) as reader:
        block = reader["b"].blocks[0]
        assert block.chunk_count > 2
        start, end = block.stored_range(block.chunk_count - 1)
        name = reader.index.shards[block.shard].path
        shard = reader.path.parent / name if name else Path(reader.path)
        assert reader.verify_tensor("b") is None
    data = bytearray(shard.read_bytes())
    data[(start + end) // 2] ^= 0x10
    shard.write_bytes(bytes(data))
    with ocf.open(path) as reader:
        reader.verify_tensor("a")
        with pytest.raises(ocf.IntegrityError, match=rf"chunk {block.chunk_count - 1} "
                           r".*CRC-32C") as caught:
            reader.verify_tensor("b")
        assert caught.value.key == "b"
    with ocf.open(path, verify=False) as reader:
        reader.verify_tensor("b")  # nothing to check without verification


def test_a_checksum_failure_in_a_restore_by_name_changes_no_array(tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    ocf.save_file({"a": np.arange(4.0), "b": np.arange(5.0), "z": np.ones(6)}, path)
    corrupt_tensor(path, "z")
    target = {"a": np.zeros(4), "b": np.zeros(5), "z": np.zeros(6)}
    with pytest.raises(ocf.IntegrityError, match="CRC-32C") as caught:
        ocf.restore(target, path, name_map=lambda key: key.removesuffix("/.value"))
    assert caught.value.key == "z"
    assert [v.tolist() for v in target.values()] == [[0.0] * 4, [0.0] * 5, [0.0] * 6]


def test_an_optimizer_refusing_its_parameter_groups_leaves_the_model_untouched(
        tmp_path: Path) -> None:
    # The optimizer is deeper in the graph than the model's parameters: they come first.
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = ocf.torch.save({"model": model, "trainer": {"optimizer": optimizer}},
                          tmp_path / "o.ocf")
    torch.manual_seed(1)
    other = nn.Linear(4, 2)
    two_groups = torch.optim.SGD([{"params": [other.weight]}, {"params": [other.bias]}],
                                 lr=0.5)
    before = snapshot(other, two_groups)
    with pytest.raises(ocf.InvalidError, match=r"o\.ocf: .*1 parameter groups, this one 2"):
        ocf.torch.restore({"model": other, "trainer": {"optimizer": two_groups}}, path)
    assert snapshot(other, two_groups) == before


# -- one dtype policy ----------------------------------------------------------------------

def test_torch_refuses_a_float32_checkpoint_for_a_float16_model_unless_cast(
        tmp_path: Path) -> None:
    net, _ = trained_net()
    path = ocf.torch.save({"model": net}, tmp_path / "m.ocf")
    half = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).half()
    before = half[0].weight.detach().clone()
    with pytest.raises(ocf.InvalidError, match=r"the checkpoint holds float32, the Parameter is "
                       r"float16: restore\(\.\.\., cast=True\) casts"):
        ocf.torch.restore({"model": half}, path)
    assert torch.equal(half[0].weight, before)
    ocf.torch.restore({"model": half}, path, cast=True)
    assert torch.equal(half[0].weight, net[0].weight.half())


def test_numpy_and_jax_follow_the_same_dtype_policy(tmp_path: Path) -> None:
    path = ocf.numpy.save({"w": np.arange(3, dtype=np.float32)}, tmp_path / "s.ocf")
    half = {"w": np.zeros(3, np.float16)}
    with pytest.raises(ocf.InvalidError, match="cast=True"):
        ocf.numpy.restore(half, path)
    ocf.numpy.restore(half, path, cast=True)
    assert half["w"].dtype == np.float16
    assert half["w"].tolist() == [0.0, 1.0, 2.0]

    with pytest.raises(ocf.InvalidError, match="float16"):
        ocf.jax.restore({"w": jnp.zeros(3, jnp.float16)}, path)
    restored = ocf.jax.restore({"w": jnp.zeros(3, jnp.float16)}, path, cast=True)
    assert restored["w"].dtype == jnp.float16
    assert restored["w"].tolist() == [0.0, 1.0, 2.0]


# -- the strictness check asks the live objects for names, not values ---------------------

class CountedVariable(ocf.Variable):
    """An ocf.Variable counting the requests for its values (for a GPU tensor, each
    request would copy it to the host)."""

    def __init__(self, value: object) -> None:
        super().__init__(value)
        self.value_requests = 0

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        self.value_requests += 1
        return super().ocf_tensors()


class UnnamedHolder:
    """A trackable object without ``ocf_tensor_names``: judged by its tensors' keys."""

    def __init__(self, size: int) -> None:
        self.value = np.zeros(size)

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {"value": self.value}

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        self.value[...] = values["value"]


def requests(objects: Iterable[object]) -> list[int]:
    return [o.value_requests for o in objects if isinstance(o, CountedVariable)]


def test_a_strict_restore_and_its_status_ask_no_live_object_for_its_values(
        tmp_path: Path) -> None:
    path = ocf.numpy.save({"w": np.arange(3.0), "b": np.ones(2)}, tmp_path / "s.ocf")
    target = {"w": CountedVariable(np.zeros(3)), "b": CountedVariable(np.zeros(2))}
    status = ocf.restore(target, path)
    status.assert_consumed()
    assert status.unmatched_object_paths() == []
    assert requests(target.values()) == [0, 0]
    assert target["w"].value.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ocf.RestoreMismatchError, match="'extra'"):
        ocf.restore({**target, "extra": CountedVariable(np.zeros(1))}, path)


def test_a_strict_restore_by_name_asks_no_live_object_for_its_values(tmp_path: Path) -> None:
    path = tmp_path / "flat.ocf"
    ocf.save_file({"w": np.arange(3.0)}, path)
    target = {"w": CountedVariable(np.zeros(3))}
    ocf.restore(target, path, name_map=lambda key: key.removesuffix("/.value"))
    assert requests(target.values()) == [0]
    assert target["w"].value.tolist() == [0.0, 1.0, 2.0]


def test_an_object_that_cannot_name_its_tensors_is_judged_by_their_keys(
        tmp_path: Path) -> None:
    path = ocf.numpy.save({"w": np.arange(3.0)}, tmp_path / "s.ocf")
    with pytest.raises(ocf.RestoreMismatchError, match="1 objects holding tensors have no "
                       "value in the checkpoint: 'extra'"):
        ocf.restore({"w": UnnamedHolder(3), "extra": UnnamedHolder(1)}, path)
    target = {"w": UnnamedHolder(3)}
    ocf.restore(target, path).assert_consumed()
    assert target["w"].value.tolist() == [0.0, 1.0, 2.0]


# -- the error hierarchy and the status -------------------------------------------------------

def test_restore_mismatch_is_an_ocf_error_and_an_assertion_error_naming_the_file(
        tmp_path: Path) -> None:
    path = ocf.numpy.save({"a": np.arange(2.0)}, tmp_path / "s.ocf")
    status = ocf.numpy.restore({"a": np.zeros(2), "b": np.zeros(1)}, path, partial=True)
    with pytest.raises(ocf.OCFError) as caught:
        status.assert_consumed()
    assert isinstance(caught.value, AssertionError)
    assert isinstance(caught.value, ocf.RestoreMismatchError)
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(f"INVALID: {path}: 1 objects have no value")


def test_restore_status_repr_counts_matched_and_unmatched(tmp_path: Path) -> None:
    path = ocf.numpy.save({"a": np.arange(2.0), "b": np.ones(1)}, tmp_path / "s.ocf")
    status = ocf.numpy.restore({"a": np.zeros(2), "c": np.zeros(1)}, path, partial=True)
    text = repr(status)
    assert text.startswith(f"<RestoreStatus of {str(path)!r} (by structure): ")
    assert "1 objects without value" in text
    assert "1 checkpoint values unmatched" in text


# -- the other API, named ----------------------------------------------------------------------

def test_a_flat_checkpoint_given_to_the_object_api_points_to_load_file(tmp_path: Path) -> None:
    net, _ = trained_net()
    path = tmp_path / "flat.ocf"
    ocf.torch.save_file(net.state_dict(), path)
    with pytest.raises(ocf.RestoreMismatchError, match=r"flat\.ocf: .*no object graph .*"
                       r"ocf\.torch\.load_model\(model, path\), read the tensors with "
                       r"load_file"):
        ocf.torch.restore({"model": trained_net(seed=1)[0]}, path)


def test_an_object_checkpoint_given_to_load_model_points_to_restore(tmp_path: Path) -> None:
    net, _ = trained_net()
    path = ocf.torch.save({"model": net}, tmp_path / "objects.ocf")
    with pytest.raises(ocf.NotFoundError, match=r"objects\.ocf: .*object-based checkpoint "
                       r".*ocf\.torch\.restore\(\{\"model\": model, \.\.\.\}, path\)"):
        ocf.torch.load_model(trained_net(seed=1)[0], path)
