"""``ocf convert``: re-layout of OCF checkpoints, string metadata into safetensors,
output files that follow the umask, and the formats listed. End to end through
the console script."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_support import ocf_command, run, run_json, sample_tensors

import ocf


def test_ocf_to_ocf_changes_layout_codec_and_chunks_and_keeps_everything_else(
        tmp_path: Path) -> None:
    source, target = tmp_path / "a.ocf", tmp_path / "b"
    weight = ocf.Variable(np.arange(20_000, dtype=np.float32))
    ocf.write({"model": {"w": weight}, "alias": weight}, source, metadata={"epoch": 3})
    done = run("convert", str(source), str(target), "--layout", "directory",
               "--compression", "zstd", "--chunk-size", "4096")
    assert done.returncode == 0, done.stderr
    assert (target / "index.ocf").is_file()
    listed = run_json("inspect", str(target))
    assert listed["metadata"] == {"epoch": 3}
    assert [t["codec"] for t in listed["tensors"]] == ["zstd"]
    with ocf.open(target) as reader:
        block = reader["alias/.value"].block  # type: ignore[index]
        assert block.raw_chunk_size == 4096
    assert run_json("diff", str(source), str(target))["equal"] is True
    assert run_json("tree", str(source))["object_graph"] == \
        run_json("tree", str(target))["object_graph"]
    back = tmp_path / "c.ocf"
    assert run("convert", str(target), str(back), "--compression", "none").returncode == 0
    assert run_json("inspect", str(back))["tensors"][0]["codec"] == "none"


def test_ocf_to_ocf_without_options_and_options_for_other_targets_are_refused(
        tmp_path: Path) -> None:
    ocf.save_file({"x": np.ones(2)}, tmp_path / "a.ocf")
    same = run("convert", str(tmp_path / "a.ocf"), str(tmp_path / "b.ocf"))
    assert same.returncode == 1
    assert same.stderr.startswith("INVALID: ")
    assert "--layout" in same.stderr
    wrong = run("convert", str(tmp_path / "a.ocf"), str(tmp_path / "b.npz"),
                "--compression", "zstd")
    assert wrong.returncode == 1
    assert "compression set how OCF stores tensors; the target format is npz" in wrong.stderr
    onto_itself = run("convert", str(tmp_path / "a.ocf"), str(tmp_path / "a.ocf"),
                      "--compression", "zstd")
    assert onto_itself.returncode == 1
    assert "same checkpoint" in onto_itself.stderr
    assert ocf.load_file(tmp_path / "a.ocf")["x"].tolist() == [1.0, 1.0]


def test_string_metadata_is_kept_in_safetensors_metadata(tmp_path: Path) -> None:
    from safetensors import safe_open

    ocf.save_file({"x": np.ones(2, np.float32)}, tmp_path / "a.ocf",
                  metadata={"run": "exp-7", "epoch": 3, "note": "ünïcode"})
    done = run("convert", str(tmp_path / "a.ocf"), str(tmp_path / "a.safetensors"))
    assert done.returncode == 0, done.stderr
    assert "'epoch'" in done.stderr  # the integer is dropped, with a warning
    with safe_open(str(tmp_path / "a.safetensors"), "np") as f:
        assert f.metadata() == {"note": "ünïcode", "run": "exp-7"}


@pytest.mark.parametrize("target", ["out.ocf", "out.safetensors", "out.npz", "tf/ckpt"])
def test_converted_files_are_created_with_the_users_umask(tmp_path: Path, target: str) -> None:
    from safetensors.numpy import save_file

    source = tmp_path / ("src.safetensors" if target == "out.ocf" else "src.ocf")
    if target == "out.ocf":
        save_file(sample_tensors(), str(source))
    else:
        ocf.save_file(sample_tensors(), source)
    args = [str(source), str(tmp_path / target)]
    if target.startswith("tf/"):
        (tmp_path / "tf").mkdir()
        args += ["--to", "tensorflow"]
    done = subprocess.run([*ocf_command(), "convert", *args], capture_output=True, text=True,
                          check=False, preexec_fn=lambda: os.umask(0o027))
    assert done.returncode == 0, done.stderr
    made = [p for p in (tmp_path / target).parent.iterdir() if p != source and p.is_file()]
    assert made
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path


def test_help_and_errors_list_every_format_convert_writes() -> None:
    listed = run("convert", "--help")
    assert "ocf, safetensors, npz, tensorflow" in " ".join(listed.stdout.split())  # wrapped
    for option in ("--layout", "--compression", "--chunk-size"):
        assert option in listed.stdout
