"""OCF as the storage of torch.distributed.checkpoint, with FSDP2 on real gloo ranks.

Four processes train an FSDP2 model with AdamW and save through ``dcp.save``
with OCF's StorageWriter (and, for comparison, DCP's own FileSystemWriter);
the job is SIGKILLed during a later save; two processes (another mesh)
resume from the OCF checkpoint and from DCP's, and must agree bit for bit,
with each other and with the state that was saved. The OCF checkpoint holds
no pickle and reads in this plain process.
"""

from __future__ import annotations

import io
import re
import signal
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from repo_paths import TESTS_DIR
from samples import assert_all_bit_exact
from torch.distributed.checkpoint.api import CheckpointException

import ocf
from ocf.distributed.dcp import StorageReader, StorageWriter

HERE = TESTS_DIR
sys.path.insert(0, str(HERE))
import ranks  # noqa: E402

WORKER = HERE / "dcp_worker.py"
# Single-process dcp.save/load say they assume one process: that is what these tests mean.
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
SAVE_AT, UNTIL = 3, 6
# Four ranks importing torch and FSDP on a loaded 2-core machine: generous, never hit when
# things work (a failing rank ends its job at once).
TIMEOUT = 600
# What a pickle of torch or Python objects holds: the module of a class it rebuilds, as
# protocol 2+ writes it (SHORT_BINUNICODE before STACK_GLOBAL) or protocol 0-1 (GLOBAL),
# and the member name of torch.save's zip archives.
PICKLED_NAMES = re.compile(rb"\x8c.(?:torch|collections|builtins|copyreg|numpy)|"
                           rb"\nc(?:torch|collections|builtins|copyreg|numpy)[\w.]*\n|"
                           rb"data\.pkl", re.DOTALL)


def pickle_traces(directory: Path) -> list[str]:
    """Files under ``directory`` that hold what a pickle holds."""
    return [str(p.relative_to(directory)) for p in sorted(directory.rglob("*"))
            if p.is_file() and PICKLED_NAMES.search(p.read_bytes())]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of a 4-rank run killed during its second save."""
    out = tmp_path_factory.mktemp("fsdp")
    ready = out / "victim-ready"
    job = {"mode": "train", "out": str(out), "save_at": SAVE_AT, "victim": 1,
           "ready": str(ready)}
    processes = ranks.start(WORKER, job, 4)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert time.monotonic() < deadline, "the save never reached the victim's stall"
            assert all(p.poll() is None for p in processes), \
                "\n".join(p.stderr.read().decode()[-2000:] for p in processes if p.stderr)
            time.sleep(0.05)
        for process in processes:  # the whole job dies mid-save
            process.send_signal(signal.SIGKILL)
    finally:
        codes = ranks.finish(processes)
        ranks.close_pipes(processes)
    assert codes == [-signal.SIGKILL] * 4
    return out


@pytest.fixture(scope="module")
def resumed(trained: Path) -> dict[str, list[dict[str, object]]]:
    """Two ranks resume from each source; what each rank reported."""
    return {source: ranks.run(WORKER, {"mode": "resume", "out": str(trained), "source": source,
                                       "save_at": SAVE_AT, "until": UNTIL}, 2, TIMEOUT)
            for source in ("ocf", "dcp")}


def npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_a_save_killed_mid_way_is_not_a_checkpoint_and_the_previous_one_reads(
        trained: Path) -> None:
    assert not (trained / "ocf" / f"ckpt-{SAVE_AT + 1}" / "index.ocf").exists()
    with pytest.raises(ocf.NotFoundError):
        ocf.open(trained / "ocf" / f"ckpt-{SAVE_AT + 1}")
    with ocf.open(trained / "ocf" / f"ckpt-{SAVE_AT}") as checkpoint:
        checkpoint.verify_all()


def test_the_checkpoint_holds_no_pickle_where_dcps_own_does(trained: Path) -> None:
    ours, theirs = trained / "ocf" / f"ckpt-{SAVE_AT}", trained / "dcp" / f"ckpt-{SAVE_AT}"
    assert pickle_traces(ours) == []
    assert {p.name for p in ours.iterdir()} == {"index.ocf"} | {
        p.name for p in ours.glob("data-*.ocfd")}
    assert pickle_traces(theirs)  # the scan finds what DCP's FileSystemWriter stores


def test_a_plain_process_reads_what_four_ranks_saved(trained: Path) -> None:
    saved = npz(trained / "saved.npz")
    loaded = ocf.load_file(trained / "ocf" / f"ckpt-{SAVE_AT}")
    for key, value in saved.items():  # saved.npz: model/<fqn>, optim/<fqn>/<state>
        kind, rest = key.split("/", 1)
        ocf_key = f"model.{rest}" if kind == "model" else "optim.state." + rest.replace("/", ".")
        assert loaded[ocf_key].tobytes() == value.tobytes(), key
        assert loaded[ocf_key].shape == value.shape, key


def test_two_ranks_resume_bit_identically_from_ocf_and_from_dcp(
        trained: Path, resumed: dict[str, list[dict[str, object]]]) -> None:
    saved = npz(trained / "saved.npz")
    assert_all_bit_exact(npz(trained / "loaded-ocf.npz"), saved)
    assert_all_bit_exact(npz(trained / "loaded-dcp.npz"), saved)
    final = npz(trained / "final-ocf.npz")
    assert_all_bit_exact(final, npz(trained / "final-dcp.npz"))
    assert any(not np.array_equal(final[k], saved[k]) for k in saved)  # training went on


def test_each_resuming_rank_reads_about_its_share(
        trained: Path, resumed: dict[str, list[dict[str, object]]]) -> None:
    stored = sum(a.nbytes for a in ocf.load_file(trained / "ocf" / f"ckpt-{SAVE_AT}").values())
    read = [int(r["bytes_read"]) for r in resumed["ocf"]]  # type: ignore[call-overload]
    assert all(0 < r <= 0.6 * stored for r in read), (read, stored)
    assert sum(read) <= 1.1 * stored, (read, stored)


def test_one_process_saves_and_loads_with_non_tensor_values_kept(tmp_path: Path) -> None:
    state = {"w": torch.arange(12.0).reshape(3, 4), "step": 7, "lr": 0.5,
             "betas": (0.9, 0.999), "names": ["a", "b"], "nothing": None}
    dcp.save(state, storage_writer=StorageWriter(tmp_path / "one"))
    assert pickle_traces(tmp_path / "one") == []
    target = {"w": torch.zeros(3, 4), "step": 0, "lr": 0.0, "betas": (0.0, 0.0),
              "names": [], "nothing": 1}
    dcp.load(target, storage_reader=StorageReader(tmp_path / "one"))
    assert torch.equal(target["w"], state["w"])
    assert {k: v for k, v in target.items() if k != "w"} == \
        {k: v for k, v in state.items() if k != "w"}


def test_two_ranks_keep_non_tensor_values_held_by_the_coordinator_or_by_both(
        tmp_path: Path) -> None:
    ranks.run(WORKER, {"mode": "values", "out": str(tmp_path)}, 2, TIMEOUT)
    # A rank with no item of its own still hands its (empty) part to the merge.
    target: dict[str, object] = {"w0": torch.ones(3), "note0": None}
    dcp.load(target, storage_reader=StorageReader(tmp_path / "nothing-on-1"))
    assert torch.equal(target.pop("w0"), torch.zeros(3))  # type: ignore[arg-type]
    assert target == {"note0": "from rank 0"}
    assert not [p for p in (tmp_path / "nothing-on-1").iterdir() if "part" in p.name]
    for name, expected in (("values-on-0", {"note0": "from rank 0", "step": 7}),
                           ("values-on-both", {"note0": "from rank 0", "note1": [1, 2]})):
        assert sorted(p.name for p in (tmp_path / name).iterdir() if "part" in p.name) == []
        target: dict[str, object] = {"w0": torch.zeros(3), "w1": torch.zeros(3),
                                     **dict.fromkeys(expected)}
        dcp.load(target, storage_reader=StorageReader(tmp_path / name))
        assert torch.equal(target.pop("w0"), torch.zeros(3))  # type: ignore[arg-type]
        assert torch.equal(target.pop("w1"), torch.ones(3))  # type: ignore[arg-type]
        assert target == expected, name


def test_a_value_that_is_not_plain_data_is_refused_naming_its_key(tmp_path: Path) -> None:
    state = {"w": torch.ones(2), "odd": io.BytesIO(b"x")}
    with pytest.raises(CheckpointException) as caught:
        dcp.save(state, storage_writer=StorageWriter(tmp_path / "odd"))
    error = caught.value.failures[0][0]  # DCP wraps each rank's error with its traceback
    assert isinstance(error, ocf.InvalidError)
    assert error.key == "odd"
    assert "no pickle" in str(error)
    assert not (tmp_path / "odd" / "index.ocf").exists()


def test_an_ordinary_ocf_checkpoint_loads_through_dcp(tmp_path: Path) -> None:
    ocf.save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, tmp_path / "plain.ocf")
    target = {"a": torch.zeros(2, 3)}
    dcp.load(target, storage_reader=StorageReader(tmp_path / "plain.ocf"))
    assert torch.equal(target["a"], torch.arange(6.0).reshape(2, 3))
