"""``ocf.huggingface.save_state`` replaces a folder only when it holds nothing but
its own files, and a step failing on one process raises on every process.

A folder of the user's (notes in it, the working directory, ".") is refused
before anything is written, and kept as it was; in two real processes
(huggingface_ranks_worker.py, gloo), a commit refused on the main process
makes the other process raise too instead of waiting at a barrier forever.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
import torch
from accelerate import Accelerator
from repo_paths import TESTS_DIR

import ocf
from ocf.huggingface import save_state

WORKER = TESTS_DIR / "huggingface_ranks_worker.py"


@pytest.fixture(scope="module")
def accelerator() -> Accelerator:
    accelerator = Accelerator(cpu=True)
    accelerator.prepare(torch.nn.Linear(4, 2))
    return accelerator


def test_save_state_replaces_a_folder_holding_only_its_own_files(
        tmp_path: Path, accelerator: Accelerator) -> None:
    folder = tmp_path / "state"
    save_state(accelerator, folder)
    first = (folder / "state.ocf").stat().st_ino
    save_state(accelerator, folder)
    assert sorted(os.listdir(folder)) == ["random_states_0.ocf", "state.ocf"]
    assert (folder / "state.ocf").stat().st_ino != first  # a new folder, not the old one
    assert os.listdir(tmp_path) == ["state"]


def test_save_state_into_a_folder_holding_the_users_files_is_refused_and_keeps_them(
        tmp_path: Path, accelerator: Accelerator) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "state.ocf").write_text("an older save")
    with pytest.raises(ocf.InvalidError, match=rf"{folder}: a checkpoint folder is replaced "
                                               r"whole, and this one holds entries the save "
                                               r"does not write \(notes.txt\)"):
        save_state(accelerator, folder)
    assert os.listdir(tmp_path) == ["state"]
    assert sorted(os.listdir(folder)) == ["notes.txt", "state.ocf"]
    assert (folder / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("target", [".", "here"])
def test_save_state_into_the_working_directory_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, accelerator: Accelerator,
        target: str) -> None:
    working = tmp_path / "here"
    working.mkdir()
    monkeypatch.chdir(working)
    with pytest.raises(ocf.InvalidError, match=r"'\.' or '\.\.'|holds the working directory"):
        save_state(accelerator, "." if target == "." else working)
    assert os.listdir(tmp_path) == ["here"]
    assert os.listdir(working) == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_commit_refused_on_the_main_process_raises_on_every_process(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    port = str(_free_port())
    ranks = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        ranks.append(subprocess.Popen([sys.executable, str(WORKER), str(folder)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    try:
        # A generous guard: without the fix the second process waits at a barrier forever.
        outputs = [process.communicate(timeout=300) for process in ranks]
    finally:
        for process in ranks:
            process.kill()
    for (out, err), process in zip(outputs, ranks):
        assert process.returncode == 0, err
        assert out.splitlines()[0] == "first saved", err
    assert outputs[0][0].splitlines()[1].startswith(
        "raised InvalidError: INVALID: " + str(folder) + ": a checkpoint folder is replaced whole")
    assert outputs[1][0].splitlines()[1].startswith(
        "raised RuntimeError: the save failed on another process (process 0: InvalidError")
    assert os.listdir(tmp_path) == ["state"]  # no staging folder left behind
    assert sorted(os.listdir(folder)) == ["notes.txt", "random_states_0.ocf",
                                          "random_states_1.ocf", "state.ocf"]
    assert ocf.torch.state_trees.load_tree(folder / "state.ocf")["custom_objects"] == [
        {"armed": False}]  # the first save, kept
