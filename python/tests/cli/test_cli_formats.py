"""Every ``ocf`` command on every format OCF reads, end to end through the console script.

The same tensors are written as an OCF file, an OCF directory, a managed
directory, a safetensors file (by the safetensors package) and an npz
archive (by NumPy); TensorFlow checkpoints are written by real TensorFlow
(tf_support). ``--json`` output is parsed back and validated against the
command's JSON Schema (ocf/cli/schemas/); the expected values come from
the tensors written, never from the code under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from cli_support import Written, run, run_json, write_every_format

import ocf

FORMAT_OF = {"ocf-file": "OCF", "ocf-directory": "OCF", "managed": "OCF",
             "safetensors": "safetensors", "npz": "npz"}
FLAT = ("ocf-file", "ocf-directory", "safetensors", "npz")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_every_format(tmp_path_factory.mktemp("formats"))


@pytest.fixture
def tf_dir(tf_generated: Path) -> Path:
    return tf_generated


@pytest.mark.parametrize("name", list(FORMAT_OF))
def test_inspect_json_lists_every_tensor_with_dtype_and_shape(written: Written,
                                                              name: str) -> None:
    document = run_json("inspect", str(written.paths[name]))
    assert document["format"] == FORMAT_OF[name]
    listed = {t["key"]: (t["dtype"], t["shape"]) for t in document["tensors"]}
    if name == "managed":
        assert document["managed"]["checkpoints"][0]["latest"] is True
        assert listed["dense_kernel/.value"] == ("float32", [40, 30])
        return
    expected = {k: (v.dtype.name, list(v.shape)) for k, v in written.tensors.items()}
    assert listed == expected


@pytest.mark.parametrize("name", FLAT)
def test_inspect_text_and_tensor_values_on_every_format(written: Written, name: str) -> None:
    done = run("inspect", str(written.paths[name]))
    assert done.returncode == 0, done.stderr
    assert "dense/kernel" in done.stdout
    assert "[40, 30]" in done.stdout
    one = run("inspect", str(written.paths[name]), "--tensor", "step")
    assert one.stdout.splitlines() == ["tensor_name: step", "42"]


@pytest.mark.parametrize("name", FLAT)
def test_inspect_stats_match_numpy_over_finite_values(written: Written, name: str) -> None:
    document = run_json("inspect", str(written.paths[name]), "--stats")
    for entry in document["tensors"]:
        values = written.tensors[entry["key"]]
        wide = values.astype(np.float64)
        finite = wide[np.isfinite(wide)]
        stats = entry["stats"]
        assert stats["elements"] == values.size
        assert stats["nan"] == int(np.isnan(wide).sum())
        assert stats["inf"] == int(np.isinf(wide).sum())
        assert stats["zero"] == int((wide == 0).sum())
        assert stats["min"] == finite.min()
        assert stats["max"] == finite.max()
        assert math.isclose(stats["mean"], finite.mean(), rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(stats["std"], finite.std(), rel_tol=1e-12, abs_tol=1e-12)


def test_stats_text_table_has_a_row_per_tensor(written: Written) -> None:
    done = run("inspect", str(written.paths["npz"]), "--stats", "--tensor", "dense/*")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["KEY", "DTYPE", "SHAPE", "MIN", "MAX", "MEAN", "STD", "NAN",
                                "INF", "ZERO"]
    kernel = next(line for line in lines if line.startswith("dense/kernel")).split()
    assert kernel[-3:] == ["1", "2", "5"]  # one NaN, two infinities, five zeros
    assert {line.split()[0] for line in lines[1:]} == {"dense/kernel", "dense/bias"}


def test_streaming_variance_stays_accurate_where_naive_sums_cancel(tmp_path: Path) -> None:
    """A large offset and a tiny spread, over many pieces: E[x^2] - E[x]^2 would lose
    every digit in float64; the merged moments keep them."""
    values = (1e9 + np.arange(3_000_000) % 7).astype(np.float64)
    ocf.save_file({"x": values}, tmp_path / "x.ocf")
    stats = run_json("inspect", str(tmp_path / "x.ocf"), "--stats")["tensors"][0]["stats"]
    assert math.isclose(stats["std"], values.std(), rel_tol=1e-9)
    assert math.isclose(stats["mean"], values.mean(), rel_tol=1e-15)


def test_tensor_glob_selects_keys_and_a_near_miss_suggests_the_key(tmp_path: Path) -> None:
    path = tmp_path / "objects.ocf"
    ocf.write({"step": ocf.Variable(np.int64(3)), "w": ocf.Variable(np.ones(2))}, path)
    done = run("inspect", str(path), "--tensor", "step")
    assert done.returncode == 1
    assert "did you mean 'step/.value'?" in done.stderr
    assert done.stderr.startswith("NOT_FOUND:")
    globbed = run_json("inspect", str(path), "--tensor", "*/.value")
    assert [t["key"] for t in globbed["tensors"]] == ["step/.value", "w/.value"]
    assert globbed["tensors"][0]["value"] == 3


@pytest.mark.parametrize("name", list(FORMAT_OF))
def test_verify_json_on_every_format(written: Written, name: str) -> None:
    document = run_json("verify", str(written.paths[name]))
    assert document["ok"] is True
    assert document["checksums"] is (name != "safetensors")
    assert document["tensors"] == (5 if name == "managed" else 4)


def test_verify_json_reports_a_flipped_bit_as_an_integrity_error(tmp_path: Path) -> None:
    path = tmp_path / "m.ocf"
    ocf.save_file({"w": np.arange(1000, dtype=np.float32)}, path)
    data = bytearray(path.read_bytes())
    data[64 + 100] ^= 0x10
    path.write_bytes(bytes(data))
    document = run_json("verify", str(path), status=1)
    assert document["error"]["category"] == "INTEGRITY"
    assert document["error"]["key"] == "w"


def test_tree_json_gives_nodes_edges_slots_and_attributes(tmp_path: Path) -> None:
    path = tmp_path / "objects.ocf"
    weight = ocf.Variable(np.zeros((2, 3), np.float32))
    ocf.write({"model": {"w": weight}, "again": weight}, path)
    document = run_json("tree", str(path))
    nodes = document["object_graph"]["nodes"]
    root = nodes[0]
    assert root["origin"] is None
    assert set(root["children"]) == {"model", "again"}
    variable = nodes[root["children"]["again"]]
    assert variable["attributes"]["value"]["shape"] == [2, 3]
    assert nodes[nodes[root["children"]["model"]]["children"]["w"]] == variable
    flat = run_json("tree", str(tmp_path / "objects.ocf"))
    assert flat == document


@pytest.mark.parametrize("name", ["safetensors", "npz", "ocf-file"])
def test_tree_json_of_a_flat_checkpoint_is_null(written: Written, name: str) -> None:
    assert run_json("tree", str(written.paths[name]))["object_graph"] is None


def test_every_command_reads_a_tensorflow_prefix_and_directory(tf_dir: Path) -> None:
    prefix = str(tf_dir / "sharded" / "ckpt")
    listed = run_json("inspect", prefix, "--stats")
    assert listed["format"] == "TensorFlow"
    big = next(t for t in listed["tensors"] if t["key"].startswith("big/"))
    expected = np.arange(3000, dtype=np.float64)  # what tf_support saved as "big"
    assert big["stats"]["max"] == expected.max()
    assert math.isclose(big["stats"]["std"], expected.std(), rel_tol=1e-12)
    assert run_json("verify", prefix)["checksums"] is True
    nodes = run_json("tree", prefix)["object_graph"]["nodes"]
    assert "big" in nodes[0]["children"]
    directory = str(tf_dir / "v1_partitioned")  # a directory with TensorFlow's state file
    assert run_json("verify", directory)["path"].endswith("model.ckpt-5")
    assert run("tree", directory).returncode == 0


def test_diff_of_a_tensorflow_checkpoint_and_its_ocf_conversion_is_empty(
        tf_dir: Path, tmp_path: Path) -> None:
    for prefix in (tf_dir / "sharded" / "ckpt", tf_dir / "v1_partitioned" / "model.ckpt-5"):
        converted = tmp_path / f"{prefix.parent.name}.ocf"
        assert run("convert", str(prefix), str(converted)).returncode == 0
        document = run_json("diff", str(prefix), str(converted))
        assert document["equal"] is True, document
        assert document["compared"] == len(ocf.list_variables(str(prefix)))
        text = run("diff", str(converted), str(prefix))
        assert text.returncode == 0
        assert text.stdout.splitlines()[-1].startswith("equal: ")
