"""The PyTorch adapter, ocf.torch, with real PyTorch (CPU)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("torch")

import torch
from repo_paths import PYTHON_DIR
from torch import nn
from torch_models import ConvNet, image_batch, mlp, train, vector_batch

import ocf
import ocf.torch
from ocf.objects.saving import collect, collect_names

# -- resuming training ---------------------------------------------------------

OPTIMIZERS: dict[str, Callable[[list[nn.Parameter], float], torch.optim.Optimizer]] = {
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
    "adamw-amsgrad": lambda params, lr: torch.optim.AdamW(params, lr=lr, weight_decay=0.05,
                                                          amsgrad=True),
    "sgd-nesterov": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9,
                                                       nesterov=True),
}


def assert_same_state(a: nn.Module, b: nn.Module) -> None:
    a_state, b_state = a.state_dict(), b.state_dict()
    assert list(a_state) == list(b_state)
    for key in a_state:
        assert a_state[key].dtype == b_state[key].dtype, key
        assert torch.equal(a_state[key], b_state[key]), key


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_training_resumed_from_a_checkpoint_continues_bit_identically(
        tmp_path: Path, kind: str) -> None:
    make = OPTIMIZERS[kind]
    torch.manual_seed(0)
    uninterrupted = ConvNet()
    first = ConvNet()
    first.load_state_dict(uninterrupted.state_dict())
    expected = train(uninterrupted, make(list(uninterrupted.parameters()), 0.05), 8, image_batch)

    optimizer = make(list(first.parameters()), 0.05)
    before = train(first, optimizer, 4, image_batch)
    path = ocf.Checkpoint(model=first, optimizer=optimizer).save(tmp_path / "ckpt")

    torch.manual_seed(7)  # other initial weights, another learning rate: all restored
    model = ConvNet()
    resumed_optimizer = make(list(model.parameters()), 0.5)
    ocf.Checkpoint(model=model, optimizer=resumed_optimizer).restore(path).assert_consumed()
    assert resumed_optimizer.param_groups[0]["lr"] == 0.05
    after = train(model, resumed_optimizer, 4, image_batch)

    assert before + after == expected
    assert_same_state(model, uninterrupted)


def test_checkpoint_keeps_batchnorm_buffers_and_adam_state_under_documented_keys(
        tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ConvNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train(model, optimizer, 3, image_batch)
    path = ocf.Checkpoint(model=model, optimizer=optimizer).write(tmp_path / "ckpt.ocf")
    with ocf.open(path) as reader:  # read by name, as any OCF reader can
        assert reader.read_tensor("model/norm/num_batches_tracked/.value").tolist() == 3
        assert reader["model/norm/running_mean/.value"].shape == (3,)
        assert reader["model/head/1/weight/.value"].shape == (8, 48)
        step = reader.read_tensor("optimizer/.slot/model/conv/weight/step/.value")
        assert step.dtype == np.dtype(np.float32)
        assert step.tolist() == 3.0
        assert reader["optimizer/.slot/model/head/3/bias/exp_avg_sq/.value"].shape == (1,)
        graph = reader.object_graph
    assert graph is not None
    root = graph.nodes[0]
    assert graph.nodes[root.children["model"]].type_name == "torch_models.ConvNet"
    norm = graph.nodes[root.children["model"]].children["norm"]
    assert graph.nodes[norm].type_name == "torch.nn.BatchNorm2d"
    assert list(graph.nodes[norm].children) == ["weight", "bias", "running_mean", "running_var",
                                   "num_batches_tracked"]
    stored_optimizer = graph.nodes[root.children["optimizer"]]
    assert stored_optimizer.type_name == "torch.optim.Adam"
    groups = stored_optimizer.metadata["param_groups"]
    assert isinstance(groups, list)
    assert groups[0]["lr"] == 0.01  # type: ignore[index,call-overload]
    assert groups[0]["betas"] == [0.9, 0.999]  # type: ignore[index,call-overload]
    assert groups[0]["amsgrad"] is False  # type: ignore[index,call-overload]


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.body(x)
        return result


def run_with_schedule(model: nn.Module, optimizer: torch.optim.Optimizer,
                      scheduler: torch.optim.lr_scheduler.LRScheduler, steps: int
                      ) -> list[tuple[float, float]]:
    """(loss, learning rate) per step; dropout draws from the global generator."""
    done = []
    for _ in range(steps):
        loss = train(model, optimizer, 1, vector_batch)[0]
        scheduler.step()
        done.append((loss, optimizer.param_groups[0]["lr"]))
    return done


def make_scheduled(model: nn.Module) -> tuple[torch.optim.Optimizer,
                                              torch.optim.lr_scheduler.LRScheduler]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    return optimizer, torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2, total_steps=12)


def test_scheduler_and_random_generator_resume_with_dropout_bit_identically(
        tmp_path: Path) -> None:
    torch.manual_seed(0)
    uninterrupted = DropoutNet()
    first = DropoutNet()
    first.load_state_dict(uninterrupted.state_dict())
    torch.manual_seed(1)
    expected = run_with_schedule(uninterrupted, *make_scheduled(uninterrupted), 10)

    torch.manual_seed(1)
    optimizer, scheduler = make_scheduled(first)
    before = run_with_schedule(first, optimizer, scheduler, 5)
    path = ocf.torch.save({"model": first, "optimizer": optimizer, "scheduler": scheduler,
                           "rng": torch.default_generator}, tmp_path / "ckpt.ocf")

    torch.manual_seed(99)  # another random state, other weights, a fresh schedule
    model = DropoutNet()
    resumed_optimizer, resumed_scheduler = make_scheduled(model)
    ocf.torch.restore({"model": model, "optimizer": resumed_optimizer,
                       "scheduler": resumed_scheduler, "rng": torch.default_generator}, path)
    assert before + run_with_schedule(model, resumed_optimizer, resumed_scheduler, 5) == expected
    with ocf.open(path) as reader:
        graph = reader.object_graph
    assert graph is not None
    stored = graph.nodes[graph.nodes[0].children["scheduler"]]
    assert stored.type_name == "torch.optim.lr_scheduler.OneCycleLR"
    assert stored.metadata["last_epoch"] == 5
    assert stored.metadata["_anneal_func_type"] == "cos"


# -- lazy modules: restore-on-create ---------------------------------------------


def test_lazy_linear_receives_values_and_optimizer_state_when_it_materialises(
        tmp_path: Path) -> None:
    torch.manual_seed(0)
    trained = mlp(lazy=True)
    trained(vector_batch()[0])
    optimizer = torch.optim.Adam(trained.parameters(), lr=0.02)
    train(trained, optimizer, 3, vector_batch)
    path = ocf.Checkpoint(model=trained, optimizer=optimizer).save(tmp_path / "ckpt")
    expected = train(trained, optimizer, 3, vector_batch)

    torch.manual_seed(5)
    model = mlp(lazy=True)  # nothing materialised: the optimizer holds lazy parameters
    resumed_optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    status = ocf.Checkpoint(model=model, optimizer=resumed_optimizer).restore(path, partial=True)
    with pytest.raises(ocf.RestoreMismatchError, match="model/0/weight"):
        status.assert_consumed()  # the values wait for the first forward pass
    assert not resumed_optimizer.state

    assert train(model, resumed_optimizer, 3, vector_batch) == expected
    status.assert_consumed()
    assert isinstance(model[0], nn.Linear)
    assert_same_state(model, trained)


def test_optimizer_attached_after_the_dry_run_gets_its_slots(tmp_path: Path) -> None:
    torch.manual_seed(0)
    trained = mlp(lazy=True)
    trained(vector_batch()[0])
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.05, momentum=0.9)
    train(trained, optimizer, 2, vector_batch)
    path = ocf.Checkpoint(model=trained, optimizer=optimizer).save(tmp_path / "ckpt")

    model = mlp(lazy=True)
    checkpoint = ocf.Checkpoint(model=model)
    status = checkpoint.restore(path, partial=True)
    model(vector_batch()[0])  # the dry run lazy modules ask for, before the optimizer
    resumed_optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    checkpoint.optimizer = resumed_optimizer  # restore-on-create for the optimizer
    status.assert_consumed()
    for old, new in zip(trained.parameters(), model.parameters()):
        assert torch.equal(optimizer.state[old]["momentum_buffer"],
                           resumed_optimizer.state[new]["momentum_buffer"])


def test_submodule_assigned_after_restore_receives_its_values(tmp_path: Path) -> None:
    saved = nn.Sequential()
    saved.add_module("head", nn.Linear(2, 2))
    path = ocf.torch.save({"model": saved}, tmp_path / "ckpt.ocf")

    model = nn.Sequential()
    status = ocf.torch.restore({"model": model}, path, partial=True)  # judged below
    model.head = nn.Linear(2, 2)  # registered after the restore started
    status.assert_consumed()
    assert torch.equal(model.head.weight, saved.head.weight)


# -- renamed and reordered modules --------------------------------------------------


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 6)
        self.outer = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.outer(torch.tanh(self.inner(x)))
        return result


class Saved(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.head(torch.tanh(self.encoder(x)))
        return result


class Refactored(nn.Module):
    """Saved, refactored: other attribute names, registered in the other order."""

    def __init__(self) -> None:
        super().__init__()
        self.classifier = nn.Linear(4, 1)
        self.backbone = Encoder()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.classifier(torch.tanh(self.backbone(x)))
        return result


def test_optimizer_state_finds_its_parameters_in_renamed_reordered_modules(
        tmp_path: Path) -> None:
    torch.manual_seed(0)
    saved = Saved()
    optimizer = torch.optim.Adam(saved.parameters(), lr=0.03)
    train(saved, optimizer, 3, vector_batch)
    path = ocf.Checkpoint(model=saved, optimizer=optimizer).save(tmp_path / "ckpt")
    expected = train(saved, optimizer, 3, vector_batch)

    model = Refactored()
    # Parameters in yet another order: torch's index-based optimizer state_dict
    # would hand each parameter the state of another.
    resumed_optimizer = torch.optim.Adam(list(model.parameters())[::-1], lr=0.03)
    shapes = [tuple(p.shape) for p in resumed_optimizer.param_groups[0]["params"]]
    assert shapes != [tuple(p.shape) for p in optimizer.param_groups[0]["params"]]
    # The old structure, pointing at the renamed modules.
    old_layout = {"encoder": model.backbone, "head": model.classifier}
    ocf.Checkpoint(model=old_layout, optimizer=resumed_optimizer).restore(path) \
        .assert_consumed()

    assert train(model, resumed_optimizer, 3, vector_batch) == expected
    assert torch.equal(model.classifier.weight, saved.head.weight)
    assert torch.equal(model.backbone.inner.bias, saved.encoder.inner.bias)


# -- optimizer metadata -------------------------------------------------------------


def test_hyperparameters_restore_with_their_types_and_tensor_lr_in_place(
        tmp_path: Path) -> None:
    model = nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.125), betas=(0.8, 0.9))
    optimizer.param_groups[0]["initial_lr"] = 0.5  # as LR schedulers add
    path = ocf.torch.save({"model": model, "optimizer": optimizer}, tmp_path / "ckpt.ocf")

    fresh = torch.optim.Adam(model.parameters(), lr=torch.tensor(1.0), betas=(0.1, 0.2))
    lr = fresh.param_groups[0]["lr"]
    ocf.torch.restore({"model": model, "optimizer": fresh}, path)
    group = fresh.param_groups[0]
    assert group["lr"] is lr  # the same tensor, filled in place
    assert lr.item() == 0.125
    assert group["betas"] == (0.8, 0.9)
    assert isinstance(group["betas"], tuple)
    assert group["initial_lr"] == 0.5
    assert group["amsgrad"] is False


def test_a_different_number_of_parameter_groups_is_refused(tmp_path: Path) -> None:
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = ocf.torch.save({"model": model, "optimizer": optimizer}, tmp_path / "ckpt.ocf")
    two_groups = torch.optim.SGD([{"params": model[0].parameters()},
                                  {"params": model[2].parameters()}], lr=0.1)
    with pytest.raises(ocf.InvalidError, match="1 parameter groups, this one 2"):
        ocf.torch.restore({"model": model, "optimizer": two_groups}, path)


def test_every_torch_object_names_its_tensors_as_its_values_do() -> None:
    # What a restore's strictness check asks instead of the values (a GPU model would
    # be copied to the host): the same keys, node by node.
    model = ConvNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train(model, optimizer, 1, image_batch)
    state = {"model": model, "optimizer": optimizer, "rng": torch.Generator().manual_seed(3)}
    named = collect_names(state)
    assert [n.attributes for n in named.nodes] == [n.attributes for n in collect(state).nodes]
    assert "model/norm/running_mean/.value" in {k for n in named.nodes
                                                 for k in n.attributes.values()}


def test_python_number_state_comes_back_as_python_numbers(tmp_path: Path) -> None:
    torch.manual_seed(0)
    embedding = nn.Embedding(5, 2, sparse=True)
    optimizer = torch.optim.SparseAdam(embedding.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        embedding(torch.tensor([1, 3])).sum().backward()
        optimizer.step()
    assert optimizer.state[embedding.weight]["step"] == 2  # SparseAdam keeps a Python int
    path = ocf.torch.save({"model": embedding, "optimizer": optimizer}, tmp_path / "ckpt.ocf")

    fresh = nn.Embedding(5, 2, sparse=True)
    fresh_optimizer = torch.optim.SparseAdam(fresh.parameters(), lr=0.1)
    ocf.torch.restore({"model": fresh, "optimizer": fresh_optimizer}, path) \
        .assert_consumed()
    step = fresh_optimizer.state[fresh.weight]["step"]
    assert step == 2
    assert type(step) is int
    assert torch.equal(fresh_optimizer.state[fresh.weight]["exp_avg"],
                       optimizer.state[embedding.weight]["exp_avg"])


# -- errors of object-based restore -------------------------------------------------


def test_restoring_into_a_parameter_of_another_shape_names_both_shapes(
        tmp_path: Path) -> None:
    path = ocf.torch.save({"model": nn.Linear(3, 4)}, tmp_path / "ckpt.ocf")
    with pytest.raises(ocf.InvalidError, match=r"tensor 'model/weight/.value': .*shape "
                                               r"\[4, 3\] into a Parameter of shape \[5, 3\]"):
        ocf.torch.restore({"model": nn.Linear(3, 5)}, path)


def test_unsaved_parameters_are_reported_by_path(tmp_path: Path) -> None:
    path = ocf.torch.save({"model": nn.Linear(3, 4, bias=False)}, tmp_path / "ckpt.ocf")
    status = ocf.torch.restore({"model": nn.Linear(3, 4)}, path, partial=True)
    with pytest.raises(ocf.RestoreMismatchError, match="'model/bias'"):
        status.assert_existing_objects_matched()


# -- flat state dicts: save_file / load_file ------------------------------------------

# The bit-exact round trip of every dtype: ocf.testing.AdapterTests
# (test_adapter_contract_torch.py).


def test_bfloat16_and_float8_values_match_ml_dtypes(tmp_path: Path) -> None:
    values = [0.0, -1.5, 2.0, 448.0, float("inf")]
    tensors = {
        "bf16": torch.tensor(values, dtype=torch.bfloat16),
        "e4m3": torch.tensor(values[:4], dtype=torch.float8_e4m3fn),
        "e5m2": torch.tensor(values, dtype=torch.float8_e5m2),
    }
    ocf.torch.save_file(tensors, tmp_path / "f.ocf")
    arrays = ocf.load_file(tmp_path / "f.ocf")
    assert arrays["bf16"].dtype == ml_dtypes.bfloat16
    assert arrays["bf16"].astype(np.float64).tolist() == values
    assert arrays["e4m3"].astype(np.float64).tolist() == values[:4]
    assert arrays["e5m2"].dtype == ml_dtypes.float8_e5m2
    assert arrays["e5m2"].astype(np.float64).tolist() == values


def test_non_contiguous_and_conjugated_tensors_save_their_values(tmp_path: Path) -> None:
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    complex_values = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    ocf.torch.save_file({"t": base.t(), "conj": complex_values.conj(),
                         "grad": nn.Parameter(base.clone())}, tmp_path / "f.ocf")
    loaded = ocf.torch.load_file(tmp_path / "f.ocf")
    assert loaded["t"].tolist() == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    assert loaded["conj"].tolist() == [1 - 2j, 3 + 4j]
    assert not loaded["grad"].requires_grad


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", [torch.complex32, torch.float8_e4m3fnuz, torch.float8_e8m0fnu])
def test_dtype_without_ocf_counterpart_is_refused_naming_key_and_dtype(
        tmp_path: Path, dtype: torch.dtype) -> None:
    tensor = torch.zeros(2, dtype=dtype)
    with pytest.raises(ocf.InvalidError, match=rf"'weird'.*{dtype}"):
        ocf.torch.save_file({"weird": tensor}, tmp_path / "f.ocf")
    assert not (tmp_path / "f.ocf").exists()


def mapped_regions(path: Path) -> list[tuple[int, int, str]]:
    """The address ranges of this process that map ``path``, with their permissions."""
    regions = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5] == str(path):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            regions.append((start, end, fields[1]))
    return regions


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_load_file_gives_zero_copy_tensors_over_a_private_file_mapping(tmp_path: Path) -> None:
    path = tmp_path / "weights.ocf"
    original = torch.arange(4096, dtype=torch.float32).reshape(64, 64)
    ocf.torch.save_file({"w": original, "b": torch.ones(7, dtype=torch.bfloat16)}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it wraps read-only memory
        loaded = ocf.torch.load_file(path)
    regions = mapped_regions(path)
    for key in ("w", "b"):
        pointer = loaded[key].data_ptr()
        assert any(start <= pointer < end and "p" in perms for start, end, perms in regions), key
    loaded["w"].add_(1)  # copy-on-write: this process only, never the file
    assert torch.equal(ocf.torch.load_file(path)["w"], original)
    with ocf.open(path) as reader:
        reader.verify_all()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_compressed_tensors_load_into_memory_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "weights.ocf"
    original = torch.zeros(64, 64)
    ocf.torch.save_file({"w": original}, path, compression="zstd")
    loaded = ocf.torch.load_file(path)
    pointer = loaded["w"].data_ptr()
    assert not any(start <= pointer < end for start, end, _ in mapped_regions(path))
    assert torch.equal(loaded["w"], original)


def test_directory_checkpoint_loads_from_its_shards(tmp_path: Path) -> None:
    tensors = {f"t{i}": torch.full((300,), float(i)) for i in range(4)}
    ocf.torch.save_file(tensors, tmp_path / "ckpt", layout="directory", max_shard_size=2048)
    loaded = ocf.torch.load_file(tmp_path / "ckpt")
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors)


def test_a_corrupted_chunk_is_caught_on_a_zero_copy_load(tmp_path: Path) -> None:
    path = tmp_path / "weights.ocf"
    ocf.torch.save_file({"w": torch.ones(256)}, path)
    with ocf.open(path) as reader:
        block = reader["w"].block
        assert block is not None
        offset = block.offset + 100
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ocf.IntegrityError, match=r"tensor 'w'.*CRC-32C"):
        ocf.torch.load_file(path)
    assert ocf.torch.load_file(path, verify=False)["w"][25].item() != 1.0  # the flipped bit


def test_load_file_device_moves_or_maps_each_tensor(tmp_path: Path) -> None:
    path = tmp_path / "f.ocf"
    ocf.torch.save_file({"a": torch.ones(2, 3), "b": torch.zeros(4)}, path)
    on_meta = ocf.torch.load_file(path, device="meta")
    assert {k: (t.device.type, tuple(t.shape)) for k, t in on_meta.items()} == \
        {"a": ("meta", (2, 3)), "b": ("meta", (4,))}
    on_cpu = ocf.torch.load_file(path, device=torch.device("cpu"))
    assert on_cpu["a"].device.type == "cpu"

    def only_a_as_double(key: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.double() if key == "a" else tensor.to("meta")

    mixed = ocf.torch.load_file(path, device=only_a_as_double)
    assert (mixed["a"].dtype, mixed["b"].device.type) == (torch.float64, "meta")
    with pytest.raises(ocf.InvalidError, match=r"'a'.*returned a str"):
        ocf.torch.load_file(path, device=lambda key, tensor: "cpu")  # type: ignore[arg-type,return-value]


def test_byte_string_tensors_are_refused_by_load_file(tmp_path: Path) -> None:
    ocf.save_file({"names": np.array([b"a", b"bc"], dtype=object)}, tmp_path / "f.ocf")
    with pytest.raises(ocf.InvalidError, match=r"'names'.*bytes has no torch counterpart"):
        ocf.torch.load_file(tmp_path / "f.ocf")


def test_state_dict_round_trips_through_save_model_and_load_model(tmp_path: Path) -> None:
    torch.manual_seed(0)
    trained = ConvNet()
    train(trained, torch.optim.SGD(trained.parameters(), lr=0.1), 2, image_batch)
    ocf.torch.save_model(trained, tmp_path / "model.ocf", metadata={"epoch": 2})
    assert ocf.open(tmp_path / "model.ocf").metadata == {"epoch": 2}
    assert set(ocf.torch.load_file(tmp_path / "model.ocf")) == set(trained.state_dict())

    model = ConvNet()
    assert ocf.torch.load_model(model, tmp_path / "model.ocf") == ([], [])
    assert_same_state(model, trained)
    lazy = mlp(lazy=True)
    ocf.torch.save_model(mlp(), tmp_path / "mlp.ocf")
    ocf.torch.load_model(lazy, tmp_path / "mlp.ocf")  # materialises from the file
    assert lazy[0].weight.shape == (8, 3)


def test_load_model_names_missing_unexpected_and_mismatched_keys(tmp_path: Path) -> None:
    ocf.torch.save_model(nn.Linear(3, 4), tmp_path / "linear.ocf")
    with pytest.raises(ocf.InvalidError, match=r"'weight'.*shape \[4, 3\].*\[5, 3\]"):
        ocf.torch.load_model(nn.Linear(3, 5), tmp_path / "linear.ocf")
    with pytest.raises(ocf.NotFoundError, match=r"'0\.weight'"):
        ocf.torch.load_model(nn.Sequential(nn.Linear(3, 4)), tmp_path / "linear.ocf")
    with pytest.raises(ocf.InvalidError, match="keys the model lacks: bias"):
        ocf.torch.load_model(nn.Linear(3, 4, bias=False), tmp_path / "linear.ocf")
    no_bias = nn.Linear(3, 4, bias=False)
    assert ocf.torch.load_model(no_bias, tmp_path / "linear.ocf", strict=False) == \
        ([], ["bias"])


# -- a module's own protocol methods and extra state ----------------------------------


class FineTuned(nn.Module):
    """Saves only its head, not the frozen backbone, and a counter as its own metadata."""

    ocf_type_name = "tests.FineTuned"

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)
        self.updates = 0

    def ocf_children(self) -> dict[str, object]:
        return {"head": self.head}

    def ocf_metadata(self) -> dict[str, object]:
        return {"updates": self.updates}

    def ocf_restore_metadata(self, values: dict[str, object]) -> None:
        self.updates = int(values["updates"])  # type: ignore[call-overload]


def test_a_modules_own_protocol_methods_win_over_the_nn_module_adapter(tmp_path: Path
                                                                     ) -> None:
    torch.manual_seed(0)
    model = FineTuned()
    model.updates = 12
    path = ocf.torch.save({"model": model}, tmp_path / "ckpt.ocf")
    with ocf.open(path) as reader:
        assert sorted(k for k in reader if k.startswith("model/")) == [
            "model/head/bias/.value", "model/head/weight/.value"]  # no backbone
        graph = reader.object_graph
    assert graph is not None
    stored = graph.nodes[graph.nodes[0].children["model"]]
    assert (stored.type_name, stored.metadata) == ("tests.FineTuned", {"updates": 12})

    fresh = FineTuned()
    backbone = fresh.backbone.weight.detach().clone()
    ocf.torch.restore({"model": fresh}, path).assert_consumed()
    assert fresh.updates == 12
    assert torch.equal(fresh.head.weight, model.head.weight)
    assert torch.equal(fresh.backbone.weight, backbone)  # not in the checkpoint: untouched


class Calibrated(nn.Module):
    """A layer keeping extra state (an FP8-style recipe) through get/set_extra_state."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.extra: object = None
        self.received: object = None

    def get_extra_state(self) -> object:
        return self.extra

    def set_extra_state(self, state: object) -> None:
        self.received = state


def test_extra_state_tensors_and_python_values_are_saved_and_handed_back(tmp_path: Path
                                                                          ) -> None:
    model = nn.Sequential(nn.Linear(2, 2), Calibrated())
    model[1].extra = {
        "amax": torch.tensor([1.5, 2.5]),
        "history": [torch.arange(3, dtype=torch.int32), 7],
        "recipe": {"format": "e4m3", "margin": 0, "scale": 0.5, "delayed": True,
                   "tag": b"\x01", "unset": None},
        "shape": (2, 3),
    }
    path = ocf.torch.save({"model": model}, tmp_path / "ckpt.ocf")
    with ocf.open(path) as reader:  # documented keys, readable by name
        assert reader.read_tensor("model/1/.extra_state.0").tolist() == [1.5, 2.5]
        assert reader.read_tensor("model/1/.extra_state.1").tolist() == [0, 1, 2]
        graph = reader.object_graph
    assert graph is not None
    node = graph.node_at(["model", "1"])
    assert node is not None
    stored = graph.nodes[node].metadata
    assert stored["extra_state_tensors"] == [["amax"], ["history", 0]]

    fresh = nn.Sequential(nn.Linear(2, 2), Calibrated())
    ocf.torch.restore({"model": fresh}, path).assert_consumed()
    received = fresh[1].received
    assert isinstance(received, dict)
    assert torch.equal(received.pop("amax"), torch.tensor([1.5, 2.5]))
    history = received.pop("history")
    assert torch.equal(history[0], torch.tensor([0, 1, 2], dtype=torch.int32))
    assert received == {"recipe": {"format": "e4m3", "margin": 0, "scale": 0.5,
                                   "delayed": True, "tag": b"\x01", "unset": None},
                        "shape": [2, 3]}  # tuples come back as lists
    assert history[1:] == [7]


def test_a_damaged_extra_state_is_refused_before_any_parameter_changes(tmp_path: Path
                                                                        ) -> None:
    # The extra state names a place its value lacks (a damaged or hand-made file): the
    # restore refuses it while planning, before the parameters found first are copied.
    torch.manual_seed(0)
    calibrated = Calibrated()
    calibrated.extra = {"amax": torch.tensor([1.5, 2.5])}
    graph = collect({"a": nn.Linear(2, 2), "b": {"c": calibrated}})
    graph.nodes[graph.paths.index("b/c")].metadata["extra_state_tensors"] = [["nowhere"]]
    path = tmp_path / "damaged.ocf"
    with ocf.Writer(path) as writer:
        for key, value in graph.tensors.items():
            writer.write(key, value)
        writer.set_object_graph(graph.nodes)
    torch.manual_seed(1)
    fresh = {"a": nn.Linear(2, 2), "b": {"c": Calibrated()}}
    before = [t.detach().clone() for t in fresh["a"].parameters()]
    with pytest.raises(ocf.InvalidError, match=r"damaged\.ocf: .*extra state of .*Calibrated "
                       r"has no place \['nowhere'\] for a tensor"):
        ocf.torch.restore(fresh, path)
    assert all(torch.equal(t, b) for t, b in zip(fresh["a"].parameters(), before))
    assert fresh["b"]["c"].received is None


def test_a_tensor_extra_state_comes_back_as_the_tensor(tmp_path: Path) -> None:
    model = Calibrated()
    model.extra = torch.tensor([9, 8, 7], dtype=torch.uint8)  # as Transformer Engine keeps it
    path = ocf.torch.save({"model": model}, tmp_path / "ckpt.ocf")
    fresh = Calibrated()
    ocf.torch.restore({"model": fresh}, path).assert_consumed()
    assert isinstance(fresh.received, torch.Tensor)
    assert fresh.received.dtype == torch.uint8
    assert fresh.received.tolist() == [9, 8, 7]


class Uncalibrated(nn.Module):
    """Calibrated's structure without extra state."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)


def test_a_checkpoint_without_extra_state_makes_no_set_extra_state_call(tmp_path: Path
                                                                         ) -> None:
    path = ocf.torch.save({"model": Uncalibrated()}, tmp_path / "ckpt.ocf")
    with ocf.open(path) as reader:
        # The state given is the root: no save_counter, which only ocf.Checkpoint adds.
        assert sorted(reader) == ["model/linear/bias/.value", "model/linear/weight/.value"]
    fresh = Calibrated()
    fresh.received = "untouched"
    ocf.torch.restore({"model": fresh}, path).assert_consumed()
    assert fresh.received == "untouched"


@pytest.mark.parametrize(("extra", "shown"), [
    ({"config": object()}, r"a builtins\.object at \['config'\]"),
    ({1: torch.zeros(1)}, "a dict with non-str keys at the top"),
    ([np.zeros(2)], r"a numpy\.ndarray at \[0\]"),
    ({"big": 1 << 70}, r"the integer 1180591620717411303424 at \['big'\]"),
])
def test_unstorable_extra_state_is_refused_naming_the_module_path(
        tmp_path: Path, extra: object, shown: str) -> None:
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), Calibrated()))
    model[0][1].extra = extra
    with pytest.raises(ocf.InvalidError, match=rf"'model/0/1': the extra state of Calibrated "
                                               rf"holds {shown}"):
        ocf.torch.save({"model": model}, tmp_path / "ckpt.ocf")
    assert list(tmp_path.iterdir()) == []


# -- packaging -----------------------------------------------------------------------


def test_core_package_imports_no_framework() -> None:
    code = "import sys, ocf; print(sorted(m for m in ('torch', 'jax', 'tensorflow') " \
           "if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_missing_torch_names_the_extra_to_install() -> None:
    code = "import sys; sys.modules['torch'] = None; import ocf.torch"  # as if not installed
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0
    assert "pip install 'ocf[torch]'" in done.stderr


def test_torch_resume_example_matches_an_uninterrupted_run_bit_for_bit() -> None:
    example = PYTHON_DIR / "examples" / "torch_resume.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("losses match bit for bit")
    assert done.stdout.count("step ") == 10


# -- the rest of a training state: gradient scaler, RNG, plain values -----------------

def test_grad_scaler_rng_and_plain_values_resume_with_the_model(tmp_path: Path) -> None:
    model = nn.Linear(3, 2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):  # an inf gradient at step 1 backs the scale off
        optimizer.zero_grad()
        scaler.scale(model(torch.ones(1, 3)).sum()).backward()
        if step == 1:
            model.weight.grad.fill_(float("inf"))
        scaler.step(optimizer)
        scaler.update()
    generator = torch.Generator().manual_seed(7)
    torch.rand(3, generator=generator)
    state = {"model": model, "optimizer": optimizer, "scaler": scaler, "rng": generator,
             "epoch": 3, "best_loss": 0.25}
    path = ocf.torch.save(state, tmp_path / "amp.ocf")

    fresh_model = nn.Linear(3, 2)
    fresh = {"model": fresh_model,
             "optimizer": torch.optim.SGD(fresh_model.parameters(), lr=0.1),
             "scaler": torch.amp.GradScaler("cpu", growth_interval=3),
             "rng": torch.Generator(), "epoch": 0, "best_loss": 1.0}
    ocf.torch.restore(fresh, path)
    assert fresh["scaler"].state_dict() == scaler.state_dict()
    assert fresh["scaler"].get_scale() == 512.0
    assert torch.equal(torch.rand(3, generator=fresh["rng"]), torch.rand(3, generator=generator))
    assert (fresh["epoch"], fresh["best_loss"]) == (3, 0.25)
    assert torch.equal(fresh_model.weight, model.weight)
