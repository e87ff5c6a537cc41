"""The ocf command line, end to end through the installed console script."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from cli_support import run

import ocf
from ocf.format.checksum import crc32c
from ocf.v1 import index_pb2


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "model.ocf"
    ocf.save_file({"dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3),
                   "step": np.array(42, np.int64)}, path, metadata={"epoch": 3})
    return path


def test_inspect_lists_keys_dtypes_shapes_sizes_and_codecs(checkpoint: Path) -> None:
    done = run("inspect", str(checkpoint))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "format 1.2" in lines[1]
    assert "metadata epoch = 3" in lines
    assert lines[-4].split() == ["KEY", "DTYPE", "SHAPE", "STORED", "CODEC"]
    assert lines[-3].split() == ["dense/kernel", "float32", "[2,", "3]", "24", "B", "none"]
    assert lines[-2].split() == ["step", "int64", "[]", "8", "B", "none"]
    assert lines[-1].startswith("data: tensor bytes not read, checksums not checked; ")


def test_inspect_prints_one_tensor_or_all(checkpoint: Path) -> None:
    one = run("inspect", str(checkpoint), "--tensor", "step")
    assert one.stdout.splitlines() == ["tensor_name: step", "42"]
    every = run("inspect", str(checkpoint), "--all")
    assert "tensor_name: dense/kernel" in every.stdout
    assert "[[0. 1. 2.]" in every.stdout


def test_inspect_of_a_missing_key_exits_1_with_not_found(checkpoint: Path) -> None:
    done = run("inspect", str(checkpoint), "--tensor", "nope")
    assert done.returncode == 1
    assert done.stderr.startswith("NOT_FOUND:")


def test_verify_passes_on_a_good_checkpoint_and_a_directory(checkpoint: Path,
                                                            tmp_path: Path) -> None:
    assert run("verify", str(checkpoint)).returncode == 0
    ocf.save_file({"x": np.ones(1000)}, tmp_path / "d", layout="directory",
                  compression="zstd")
    done = run("verify", str(tmp_path / "d"))
    assert done.returncode == 0
    assert done.stdout.startswith("OK:")


def test_verify_reports_a_flipped_bit_as_integrity_naming_the_key(checkpoint: Path) -> None:
    data = bytearray(checkpoint.read_bytes())
    data[64 + 5] ^= 0x01  # inside dense/kernel, the first tensor
    checkpoint.write_bytes(bytes(data))
    done = run("verify", str(checkpoint))
    assert done.returncode == 1
    assert done.stderr.startswith("INTEGRITY:")
    assert "'dense/kernel'" in done.stderr
    assert "[R-CRC-001]" in done.stderr


def test_verify_reports_truncation_as_malformed(checkpoint: Path) -> None:
    checkpoint.write_bytes(checkpoint.read_bytes()[:-7])
    done = run("verify", str(checkpoint))
    assert done.returncode == 1
    assert done.stderr.startswith("MALFORMED:")


def test_usage_errors_exit_2() -> None:
    assert run("frobnicate").returncode == 2


def test_tree_draws_edges_slots_and_tensors(tmp_path: Path) -> None:
    weight = ocf.Variable(np.zeros((2, 3), np.float32))
    root = {"model": {"w": weight}, "again": weight, "optimizer": ocf.Module()}
    path = tmp_path / "objects.ocf"
    ocf.write(root, path)
    done = run("tree", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "(root) dict",
        "├── model  dict",
        "│   └── w -> (shared: again)",
        "├── again  ocf.Variable",
        "│   └── .value: float32 [2, 3]",
        "└── optimizer  ocf.objects.tracking.Module",
    ]


def test_tree_of_a_name_based_checkpoint_says_so(checkpoint: Path) -> None:
    done = run("tree", str(checkpoint))
    assert done.returncode == 0
    assert "name-based checkpoint" in done.stdout


def test_tree_draws_graphs_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    root: dict[str, object] = {}
    current = root
    for _ in range(1500):  # deeper than Python's default recursion limit of 1000
        current["a"] = {}
        current = current["a"]  # type: ignore[assignment]
    current["w"] = np.zeros(1)
    ocf.write(root, tmp_path / "deep.ocf")
    done = run("tree", str(tmp_path / "deep.ocf"))
    assert done.returncode == 0, done.stderr[-500:]
    assert len(done.stdout.splitlines()) == 1 + 1500 + 2


def test_a_managed_directory_is_listed_by_inspect_and_its_latest_used_by_the_others(
        tmp_path: Path) -> None:
    weights = np.zeros(4, np.float32)
    manager = ocf.CheckpointManager(ocf.Checkpoint(w=ocf.Variable(weights)), tmp_path,
                                    max_to_keep=2)
    for step in range(3):
        weights[...] = step
        manager.save()
    manager.close()
    listed = run("inspect", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"managed directory: {tmp_path} (2 checkpoints)"
    assert lines[1].split() == ["CHECKPOINT", "SAVED", "(UTC)", "SIZE"]
    assert lines[2].split()[0] == "ckpt-2"
    assert lines[2].split()[-1] != "latest"
    assert lines[3].split()[0] == "ckpt-3"
    assert lines[3].split()[-1] == "latest"
    assert f"checkpoint: {tmp_path / 'ckpt-3'}" in listed.stdout
    verified = run("verify", str(tmp_path))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith(f"OK: {tmp_path / 'ckpt-3'}: ")
    tree = run("tree", str(tmp_path))
    assert tree.returncode == 0, tree.stderr
    assert "save_counter" in tree.stdout


@pytest.mark.parametrize("name", ["state.pkl", "weights.pickle"])
def test_convert_refuses_pickled_formats_and_says_how_to_convert_safely(
        checkpoint: Path, tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"\x80\x04not loaded")
    for args in ((str(tmp_path / name), str(tmp_path / "out.ocf")),
                 (str(checkpoint), str(tmp_path / "out" / name))):
        done = run("convert", *args)
        assert done.returncode == 1
        assert done.stderr.startswith("INVALID: ")
        assert "pickle" in done.stderr
        assert "torch.load(path, weights_only=True)" in done.stderr
    assert not (tmp_path / "out").exists()


def test_convert_to_an_unknown_suffix_lists_the_formats(checkpoint: Path,
                                                        tmp_path: Path) -> None:
    done = run("convert", str(checkpoint), str(tmp_path / "weights.h5"))
    assert done.returncode == 1
    assert "no format writes '.h5' files; known formats: ocf, safetensors, npz, tensorflow" \
        in done.stderr
    listed = run("convert", "--help")
    assert "ocf, safetensors, npz, tensorflow" in " ".join(listed.stdout.split())  # wrapped
    wrong = run("convert", str(checkpoint), str(tmp_path / "x"), "--to", "pickle")
    assert wrong.returncode == 1
    assert "unknown checkpoint format 'pickle'; known: ocf, safetensors" in wrong.stderr


def test_inspect_and_verify_read_a_file_written_by_the_safetensors_package(
        tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.int64)},
              str(path), metadata={"format": "pt"})
    listed = run("inspect", str(path))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[1].startswith("safetensors file, 2 tensors")
    assert lines[2] == "metadata format = 'pt'"
    assert [line.split()[:3] for line in lines[4:-1]] == [["b", "int64", "[2]"],
                                                         ["w", "float32", "[2,"]]
    one = run("inspect", str(path), "--tensor", "w")
    assert one.stdout.splitlines() == ["tensor_name: w", "[[0. 1. 2.]", " [3. 4. 5.]]"]
    missing = run("inspect", str(path), "--tensor", "x")
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"NOT_FOUND: {path}: tensor 'x'")
    verified = run("verify", str(path))
    assert verified.returncode == 0
    assert "2 tensors read" in verified.stdout
    assert "no checksums" in verified.stdout
    path.write_bytes(path.read_bytes()[:-4])  # the data buffer no longer tiles
    broken = run("verify", str(path))
    assert broken.returncode == 1
    assert broken.stderr.startswith(("MALFORMED: ", "INVALID: "))


def test_verify_checks_the_object_graph_before_any_tensor_byte(tmp_path: Path) -> None:
    # A full verification [R-VERIFY-001]: a graph with an edge to a missing node is
    # INVALID, reported before the wrong CRC of the only tensor.
    path = tmp_path / "g.ocf"
    ocf.save_file({"w": np.zeros(2, np.float32)}, path)
    blob = bytearray(path.read_bytes())
    offset, length = struct.unpack_from("<QQ", blob, len(blob) - 32)
    index = index_pb2.Index()
    index.ParseFromString(bytes(blob[offset:offset + length]))
    index.object_graph.nodes.add().children.add(name="x", node_id=5)
    index.blocks.chunk_crcs[0] ^= 1
    data = index.SerializeToString(deterministic=True)
    footer = struct.pack("<QQIHH8s", offset, len(data), crc32c(data), 1, 1, b"\x89OCFEND\n")
    path.write_bytes(bytes(blob[:offset]) + data + footer)
    done = run("verify", str(path))
    assert done.returncode != 0
    assert "INVALID" in done.stderr, done.stderr
    assert "R-GRAPH-002" in done.stderr, done.stderr


def test_the_path_help_of_every_command_names_every_registered_format() -> None:
    from ocf.cli.main import PATH_HELP
    from ocf.interop.registry import FORMATS

    for known in FORMATS:
        assert known.title.replace("-", " ").lower() in PATH_HELP.lower(), known.name
