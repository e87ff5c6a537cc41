"""PyTorch's own checkpoints in ocf.open and every ``ocf`` command: ``.pt`` files and
DCP directories.

Every file is written by torch itself (``torch.save``, and
``torch.distributed.checkpoint.save`` in this process, without a process
group); the expected values are the tensors given to torch. Hostile files
are made by damaging real ones, or by pickles that would leave a marker
file behind if anything ever ran them.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from cli_support import run, run_json

import ocf
from ocf.testing import SourceTests

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")


def _as_torch(tensors: Mapping[str, np.ndarray]) -> dict[str, object]:
    return {key: torch.from_numpy(value.copy()) for key, value in tensors.items()}


def _dcp_save(state: dict[str, object], directory: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(directory)), no_dist=True)
    return directory


class TestPyTorchFile(SourceTests):
    format_name = "PyTorch"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        path = directory / "model.pt"
        torch.save(_as_torch(tensors), path)
        return path


class TestDcpDirectory(SourceTests):
    format_name = "DCP"

    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        return _dcp_save(_as_torch(tensors), directory / "step-1")


def _trainer_state() -> dict[str, object]:
    """What a trainer saves (Lightning's checkpoint keys): a model, Adam's state after one
    step, plain values, and two things OCF cannot read (a sparse tensor, a complex)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return {"epoch": 2, "global_step": 40, "pytorch-lightning_version": "2.6.0",
            "state_dict": model.state_dict(), "optimizer_states": [optimizer.state_dict()],
            "hyper_parameters": {"lr": 0.01, "layers": (4, 3, 2)},
            "loops": {"fit_loop": {"epoch_progress": {"total": {"ready": 3}}}},
            "mask": torch.ones(3).to_sparse(), "phase": 1 + 2j,
            "wide": torch.ones(1).expand(1 << 20)}


def test_a_trainer_dict_reads_its_tensors_and_reports_the_rest(tmp_path: Path) -> None:
    state = _trainer_state()
    path = tmp_path / "trainer.pt"
    torch.save(state, path)
    with ocf.open(path) as opened:
        weight = opened.read_tensor("state_dict.0.weight")
        np.testing.assert_array_equal(weight, state["state_dict"]["0.weight"].numpy())
        adam = state["optimizer_states"][0]["state"][1]["exp_avg"]
        np.testing.assert_array_equal(opened.read_tensor("optimizer_states.0.state.1.exp_avg"),
                                      adam.numpy())
        values = opened.metadata["pytorch.values"]
        unread = opened.metadata["pytorch.unread"]
    assert values["epoch"] == 2
    assert values["hyper_parameters"] == {"lr": 0.01, "layers": [4, 3, 2]}
    assert values["loops"] == {"fit_loop": {"epoch_progress": {"total": {"ready": 3}}}}
    assert values["optimizer_states.0.param_groups"][0]["lr"] == 0.01
    assert "sparse" in unread["mask"]
    assert "complex" in unread["phase"]
    assert "over 4 bytes of storage" in unread["wide"]  # never materialized
    done = run("inspect", str(path))
    assert done.returncode == 0, done.stderr
    assert "3 entries not read" in done.stdout
    assert "pytorch.unread mask: a tensor of layout torch.sparse_coo" in done.stdout


def test_a_state_dict_converts_to_ocf_and_back_keeping_tensors_and_plain_values(
        tmp_path: Path) -> None:
    state = _trainer_state()
    del state["mask"], state["phase"], state["wide"]
    source = tmp_path / "trainer.pt"
    torch.save(state, source)
    middle, back = tmp_path / "trainer.ocf", tmp_path / "again.pt"
    assert run("convert", str(source), str(middle)).returncode == 0
    converted = run("convert", str(middle), str(back))
    assert converted.returncode == 0, converted.stderr
    flat = torch.load(back, weights_only=True)
    assert torch.equal(flat["state_dict.1.bias"], state["state_dict"]["1.bias"])
    assert flat["epoch"] == 2
    assert flat["hyper_parameters"] == {"lr": 0.01, "layers": [4, 3, 2]}
    assert run_json("diff", str(source), str(back))["equal"] is True
    model = torch.nn.Linear(3, 2)  # a plain state dict loads into its module as written
    torch.save(model.state_dict(), tmp_path / "linear.pt")
    assert run("convert", str(tmp_path / "linear.pt"), str(tmp_path / "l.ocf")).returncode == 0
    assert run("convert", str(tmp_path / "l.ocf"), str(tmp_path / "l.bin")).returncode == 0
    fresh = torch.nn.Linear(3, 2)
    fresh.load_state_dict(torch.load(tmp_path / "l.bin", weights_only=True))
    assert torch.equal(fresh.weight, model.weight)


def test_every_command_reads_a_pt_file_and_a_dcp_directory(tmp_path: Path) -> None:
    state = {"model": {"w": torch.arange(12.0).reshape(3, 4),
                       "b": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)},
             "step": 7}
    pt = tmp_path / "model.pt"
    torch.save(state, pt)
    directory = _dcp_save(state, tmp_path / "dcp")
    for path, name in ((pt, "PyTorch"), (directory, "DCP")):
        listed = run_json("inspect", str(path), "--stats")
        assert listed["format"] == name
        tensors = {t["key"]: t for t in listed["tensors"]}
        assert (tensors["model.w"]["dtype"], tensors["model.w"]["shape"]) == ("float32", [3, 4])
        assert tensors["model.b"]["dtype"] == "bfloat16"
        assert tensors["model.w"]["stats"]["max"] == 11.0
        verified = run_json("verify", str(path))
        assert verified["ok"] is True
        assert (verified["checksums"], verified["tensors"]) == (False, 2)
        assert run_json("tree", str(path))["object_graph"] is None
    assert run_json("diff", str(pt), str(directory))["equal"] is True  # the same keys
    with ocf.open(directory) as opened:
        assert opened.metadata == {"pytorch.values": {"step": 7}}


def test_a_dcp_directory_converts_to_ocf_safetensors_and_back_to_dcp(tmp_path: Path) -> None:
    weights = torch.randn(64, 16)
    state = {"model": {"embed": weights, "head": torch.zeros(16, dtype=torch.float16)},
             "optimizer": {"lr": 0.5, "step": 9}}
    directory = _dcp_save(state, tmp_path / "step-9")
    for target in ("c.ocf", "c.safetensors"):
        done = run("convert", str(directory), str(tmp_path / target))
        assert done.returncode == 0, done.stderr
    assert run_json("diff", str(directory), str(tmp_path / "c.ocf"))["equal"] is True
    from safetensors.torch import load_file  # read back by the safetensors package itself

    converted = load_file(str(tmp_path / "c.safetensors"))
    assert converted.keys() == {"model.embed", "model.head"}
    assert torch.equal(converted["model.embed"], weights)
    assert converted["model.head"].dtype == torch.float16
    loaded = ocf.load_file(tmp_path / "c.ocf")
    np.testing.assert_array_equal(loaded["model.embed"], weights.numpy())
    back = tmp_path / "back"
    assert run("convert", str(tmp_path / "c.ocf"), str(back), "--to", "dcp").returncode == 0
    restored = {"model": {"embed": torch.zeros(64, 16),
                          "head": torch.ones(16, dtype=torch.float16)},
                "optimizer": {"lr": 0.0, "step": 0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(restored, storage_reader=dcp.FileSystemReader(str(back)), no_dist=True)
    assert torch.equal(restored["model"]["embed"], weights)
    assert restored["optimizer"] == {"lr": 0.5, "step": 9}  # plain values came back too
    again = run("convert", str(tmp_path / "c.ocf"), str(back), "--to", "dcp")
    assert again.returncode == 1
    assert again.stderr.startswith("INVALID: ")  # an existing directory is never overwritten


def test_a_sharded_dcp_checkpoint_is_assembled_from_its_chunks(tmp_path: Path) -> None:
    """Two ranks of a gloo group each save half of a row-sharded tensor."""
    directory = tmp_path / "sharded"
    code = f"""
import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://{tmp_path}/rendezvous", rank=rank,
                        world_size=2)
from torch.distributed.tensor import DeviceMesh, distribute_tensor, Shard
mesh = DeviceMesh("cpu", [0, 1])
full = torch.arange(40, dtype=torch.float32).reshape(8, 5)
dcp.save({{"w": distribute_tensor(full, mesh, [Shard(0)])}}, checkpoint_id="{directory}")
# Leave as gloo_rank.leave does: tearing a gloo group down now and then aborts a rank.
dist.barrier()
sys.stdout.flush()
os._exit(0)
"""
    children = [subprocess.Popen([sys.executable, "-c", code, str(rank)]) for rank in (0, 1)]
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    assert len(list(directory.glob("*.distcp"))) == 2
    listed = run_json("inspect", str(directory))
    assert [(t["key"], t["dtype"], t["shape"]) for t in listed["tensors"]] == \
        [("w", "float32", [8, 5])]
    with ocf.open(directory) as opened:
        np.testing.assert_array_equal(opened.read_tensor("w"),
                                      np.arange(40, dtype=np.float32).reshape(8, 5))
        np.testing.assert_array_equal(opened.get_slice("w", (slice(3, 6),)),
                                      np.arange(15, 30, dtype=np.float32).reshape(3, 5))


# -- hostile and missing -----------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Path]:
    """A real .pt file and a real DCP directory of the same state."""
    state = {"w": torch.arange(1000.0), "step": 3}
    pt = tmp_path / "model.pt"
    torch.save(state, pt)
    return pt, _dcp_save(state, tmp_path / "dcp")


class _Marker:
    """Unpickling this would create a file: proof that nothing ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def _refused(path: Path, category: str, *words: str) -> str:
    done = run("inspect", str(path))
    assert done.returncode == 1
    assert done.stderr.startswith(f"{category}: {path}"), done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_a_truncated_pt_file_is_malformed_naming_it(saved: tuple[Path, Path], keep: float
                                                    ) -> None:
    pt, _ = saved
    data = pt.read_bytes()
    pt.write_bytes(data[:int(len(data) * keep)])
    _refused(pt, "MALFORMED")


def test_pickles_that_name_code_are_refused_and_never_run(saved: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    pt, directory = saved
    marker = tmp_path / "ran"
    torch.save({"w": torch.ones(2), "payload": _Marker(marker)}, pt)
    _refused(pt, "INVALID", "io.open", "weights_only=True")
    (directory / ".metadata").write_bytes(pickle.dumps(_Marker(marker)))
    _refused(directory, "INVALID", "io.open", "DCP's metadata types")
    assert not marker.exists()


def test_legacy_torchscript_and_foreign_files_are_refused_naming_what_they_are(
        tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    _refused(legacy, "INVALID", "legacy torch.save format")
    script = tmp_path / "script.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit's own
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), script)
    _refused(script, "INVALID", "TorchScript")
    other = tmp_path / "weights.bin"
    other.write_bytes(b"GGUF\x03\x00\x00\x00 not a torch file")
    _refused(other, "MALFORMED", "not a PyTorch checkpoint")


def test_a_damaged_dcp_directory_is_an_ocf_error_naming_it(saved: tuple[Path, Path]) -> None:
    _, directory = saved
    metadata = directory / ".metadata"
    original = metadata.read_bytes()
    metadata.write_bytes(original[: len(original) // 2])
    _refused(directory, "MALFORMED", "DCP metadata")
    metadata.write_bytes(original.replace(b"__0_0.distcp", b"../0_.distcp"))  # same length
    _refused(directory, "MALFORMED", "not a plain file name")
    metadata.write_bytes(original)
    data = next(directory.glob("*.distcp"))
    data.write_bytes(data.read_bytes()[:100])
    _refused(directory, "MALFORMED", "runs past the end")


def test_without_torch_a_pt_file_and_a_dcp_directory_are_refused_saying_torch_is_needed(
        saved: tuple[Path, Path]) -> None:
    """In a process where ``import torch`` fails, as on a machine without it."""
    for path in saved:
        code = ("import sys; sys.modules['torch'] = None\n"
                "import ocf\n"
                f"try:\n    ocf.open({str(path)!r})\n"
                "except ocf.InvalidError as error:\n    print(error)\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        assert done.stdout.startswith(f"INVALID: {path}: "), done.stdout + done.stderr
        assert "needs PyTorch, which is not installed" in done.stdout


def test_a_checkpoint_lightning_wrote_reads_with_its_hyperparameters_and_loops(
        tmp_path: Path) -> None:
    """A real Trainer's ModelCheckpoint file (``.ckpt``), trained one epoch on CPU."""
    lightning = pytest.importorskip("lightning")

    class Model(lightning.LightningModule):  # type: ignore[misc, name-defined]
        def __init__(self, lr: float = 0.01) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 2)

        def training_step(self, batch: list[object], index: int) -> object:
            return self.layer(batch[0]).sum()

        def configure_optimizers(self) -> object:
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    data = torch.utils.data.TensorDataset(torch.randn(8, 4))
    trainer = lightning.Trainer(max_epochs=1, default_root_dir=str(tmp_path), logger=False,
                                enable_progress_bar=False, accelerator="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=4))
    (path,) = tmp_path.glob("checkpoints/*.ckpt")
    expected = torch.load(path, weights_only=True)
    listed = run_json("inspect", str(path))
    assert listed["format"] == "PyTorch"
    with ocf.open(path) as opened:
        np.testing.assert_array_equal(opened.read_tensor("state_dict.layer.weight"),
                                      expected["state_dict"]["layer.weight"].numpy())
        values = opened.metadata["pytorch.values"]
        assert "pytorch.unread" not in opened.metadata
    assert values["hyper_parameters"] == {"lr": 0.01}
    assert values["global_step"] == expected["global_step"] == 2
    assert values["loops"]["fit_loop"]["epoch_loop.state_dict"] == \
        expected["loops"]["fit_loop"]["epoch_loop.state_dict"]
    assert run("convert", str(path), str(tmp_path / "run.ocf")).returncode == 0
    assert run_json("diff", str(path), str(tmp_path / "run.ocf"))["equal"] is True


def test_a_damaged_tensor_read_ahead_with_others_is_named_alone(tmp_path: Path) -> None:
    """Tensors are read several at a time; the error still names the damaged one."""
    state = {"a": torch.arange(100.0), "b": torch.arange(200.0), "c": torch.ones(3)}
    directory = _dcp_save(state, tmp_path / "dcp")
    items = dcp.FileSystemReader(str(directory)).read_metadata().storage_data  # torch's own
    where = next(info for index, info in items.items() if index.fqn == "b")
    data_file = directory / where.relative_path
    data = bytearray(data_file.read_bytes())
    data[where.offset:where.offset + 64] = bytes(64)  # b's torch.save blob loses its header
    data_file.write_bytes(bytes(data))
    with ocf.open(directory) as opened:
        np.testing.assert_array_equal(opened.read_tensor("a"), np.arange(100.0))  # a, b, c read
        with pytest.raises(ocf.MalformedError) as info:
            opened.read_tensor("b")
        np.testing.assert_array_equal(opened.read_tensor("c"), np.ones(3))
    assert info.value.key == "b"
    assert info.value.path == str(directory)
