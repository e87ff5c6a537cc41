"""The spec's worked example, built byte by byte without the reference writer."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from repo_paths import REPOSITORY

import ocf
from ocf.distributed.parts import merge_parts
from ocf.v1 import index_pb2

EXAMPLES = REPOSITORY / "spec" / "examples"


def test_reference_reader_reads_the_spec_example() -> None:
    with ocf.open(EXAMPLES / "minimal.ocf") as reader:
        assert reader.format_version == (1, 0)
        assert reader.metadata == {"step": 7}
        tensor = reader.get_tensor("w")
    assert tensor.dtype == np.float32
    assert tensor.tolist() == [1.0, -2.0]


def test_spec_example_script_rebuilds_the_committed_file(tmp_path: Path) -> None:
    committed = (EXAMPLES / "minimal.ocf").read_bytes()
    subprocess.run([sys.executable, str(EXAMPLES / "make_minimal.py")], check=True,
                   cwd=tmp_path, capture_output=True)
    assert (EXAMPLES / "minimal.ocf").read_bytes() == committed


# -- the walkthroughs of spec/examples/walkthroughs.md ------------------------------------------

KERNEL = [[1.0, 2.0], [3.0, 4.0]]
BIAS = [0.5, -0.5]
SAVE_ID = "00112233445566aa"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_walkthrough_script_rebuilds_the_committed_files_and_text(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(EXAMPLES / "make_walkthroughs.py"), "--out",
                    str(tmp_path)], check=True, capture_output=True)
    rebuilt = _files(tmp_path)
    committed = {name: data for name, data in _files(EXAMPLES).items()
                 if name in rebuilt or name.startswith(("directory/", "merge/"))}
    assert sorted(rebuilt) == sorted(committed)
    assert [name for name in rebuilt if rebuilt[name] != committed[name]] == []


def test_reference_reader_reads_the_directory_walkthrough() -> None:
    with ocf.open(EXAMPLES / "directory") as reader:
        assert reader.format_version == (1, 1)
        assert list(reader) == ["kernel", "bias"]
        assert reader.metadata == {"epoch": 3}
        assert reader.get_tensor("kernel").tolist() == KERNEL
        assert reader.get_tensor("bias").tolist() == BIAS


def _index(path: Path) -> index_pb2.Index:
    blob = path.read_bytes()
    offset, length = struct.unpack_from("<QQ", blob, len(blob) - 32)
    index = index_pb2.Index()
    index.ParseFromString(blob[offset:offset + length])
    return index


def test_reference_merge_of_the_walkthrough_parts_gives_the_merged_index(
        tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "merge", tmp_path / "d")
    (tmp_path / "d" / "index.ocf").unlink()
    merge_parts(tmp_path / "d", save_id=SAVE_ID, parts=2, cleanup=False)
    merged, built = _index(tmp_path / "d" / "index.ocf"), _index(EXAMPLES / "merge" / "index.ocf")
    merged.ClearField("header")  # the merger names itself in Header.writer
    assert merged == built
    with ocf.open(EXAMPLES / "merge") as reader:
        assert reader.get_tensor("kernel").tolist() == KERNEL
        assert reader.get_tensor("bias").tolist() == BIAS
        assert reader.metadata == {"epoch": 3}
