"""``ocf diff A B`` end to end: what it reports, its exit status, and across formats.

Expected differences are computed here with NumPy from the arrays written,
never by the code under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from cli_support import run, run_json, sample_tensors

import ocf


def save(path: Path, tensors: dict[str, np.ndarray], **options: object) -> str:
    ocf.save_file(tensors, path, **options)  # type: ignore[arg-type]
    return str(path)


def test_identical_checkpoints_compare_equal_across_layouts_and_codecs(tmp_path: Path) -> None:
    tensors = sample_tensors()
    a = save(tmp_path / "a.ocf", tensors)
    b = save(tmp_path / "b", tensors, layout="directory", compression="zstd")
    done = run("diff", a, b)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("equal: 4 tensors in both, 0 differ")


def test_keys_dtypes_shapes_and_values_that_differ_are_each_reported(tmp_path: Path) -> None:
    base = {"same": np.arange(5.0), "gone": np.zeros(2), "cast": np.arange(4, dtype=np.int32),
            "reshaped": np.zeros((2, 3)), "values": np.array([1.0, 2.0, 4.0, 8.0])}
    changed = dict(base)
    del changed["gone"]
    changed["new"] = np.ones(1)
    changed["cast"] = np.arange(4, dtype=np.int64)
    changed["reshaped"] = np.zeros((3, 2))
    changed["values"] = np.array([1.0, 2.5, 4.0, 7.0])
    document = run_json("diff", save(tmp_path / "a.ocf", base),
                        save(tmp_path / "b.ocf", changed), status=1)
    assert document["equal"] is False
    assert document["only_in_a"] == ["gone"]
    assert document["only_in_b"] == ["new"]
    assert document["compared"] == 4
    found = {t["key"]: t for t in document["tensors"]}
    assert set(found) == {"cast", "reshaped", "values"}
    assert found["cast"]["dtype"] == ["int32", "int64"]
    assert found["cast"]["differing"] == 0  # same numbers, another dtype
    assert found["reshaped"]["shape"] == [[2, 3], [3, 2]]
    assert found["reshaped"]["elements"] is None
    a, b = base["values"], changed["values"]
    assert found["values"]["differing"] == int((a != b).sum())
    assert found["values"]["max_abs_diff"] == np.abs(a - b).max()
    assert found["values"]["max_rel_diff"] == (np.abs(a - b) / np.abs(b)).max()
    text = run("diff", str(tmp_path / "a.ocf"), str(tmp_path / "b.ocf"))
    assert text.returncode == 1
    assert "only in A: gone" in text.stdout
    assert "only in B: new" in text.stdout
    assert "tensor cast: dtype int32 -> int64" in text.stdout
    assert "tensor reshaped: shape [2, 3] -> [3, 2]" in text.stdout
    assert "tensor values: 2 of 4 elements differ, max abs diff 1, max rel diff 0.2" \
        in text.stdout


def test_tolerances_decide_which_elements_are_equal(tmp_path: Path) -> None:
    a = np.array([1.0, 100.0, np.nan, np.inf, 0.0])
    b = np.array([1.0 + 1e-7, 100.01, np.nan, np.inf, -0.0])
    pa, pb = save(tmp_path / "a.ocf", {"x": a}), save(tmp_path / "b.ocf", {"x": b})
    exact = run_json("diff", pa, pb, status=1)["tensors"][0]
    assert exact["differing"] == 2  # NaN equals NaN, inf equals inf, -0.0 equals 0.0
    assert run_json("diff", pa, pb, "--rtol", "1e-3")["equal"] is True
    loose = run_json("diff", pa, pb, "--atol", "1e-6", status=1)["tensors"][0]
    assert loose["differing"] == 1  # 100 against 100.01 is still 0.01 apart
    assert math.isclose(loose["max_abs_diff"], 0.01, rel_tol=1e-9)


def test_large_tensors_are_compared_piece_by_piece_to_the_same_answer(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1500, 1000))  # 12 MB of float64: two pieces
    b = a.copy()
    b[1, 2] += 0.5
    b[1499, 999] = -b[1499, 999] * 3
    document = run_json("diff", save(tmp_path / "a.ocf", {"w": a}, compression="zstd"),
                        save(tmp_path / "b.ocf", {"w": b}), status=1)
    entry = document["tensors"][0]
    assert entry["elements"] == a.size
    assert entry["differing"] == 2
    assert entry["max_abs_diff"] == np.abs(a - b).max()
    nonzero = b != 0
    assert entry["max_rel_diff"] == (np.abs(a - b)[nonzero] / np.abs(b)[nonzero]).max()


def test_metadata_and_object_graph_differences_are_reported(tmp_path: Path) -> None:
    a, b = tmp_path / "a.ocf", tmp_path / "b.ocf"
    ocf.write({"model": {"w": ocf.Variable(np.ones(2))}, "epochs": ocf.Variable(np.int64(1))},
              a, metadata={"lr": 0.1, "name": "run"})
    ocf.write({"model": {"w": ocf.Variable(np.ones(2)), "b": ocf.Variable(np.zeros(1))},
               "epochs": ocf.Variable(np.int64(1))}, b, metadata={"lr": 0.2, "seed": 1})
    document = run_json("diff", str(a), str(b), status=1)
    metadata = {d["where"]: (d["a"], d["b"]) for d in document["metadata"]}
    assert metadata == {"lr": (0.1, 0.2), "name": ("run", None), "seed": (None, 1)}
    assert document["only_in_b"] == ["model/b/.value"]
    assert {"where": "model", "what": "child b", "a": None, "b": "b"} in document["objects"]


def test_a_name_based_and_an_object_based_checkpoint_differ_in_their_graphs(
        tmp_path: Path) -> None:
    flat = save(tmp_path / "flat.ocf", {"w/.value": np.ones(2)})
    ocf.write({"w": ocf.Variable(np.ones(2))}, tmp_path / "objects.ocf")
    document = run_json("diff", flat, str(tmp_path / "objects.ocf"), status=1)
    assert document["tensors"] == []
    assert document["objects"] == [{"where": "", "what": "graph", "a": False, "b": True}]


@pytest.mark.parametrize("target", ["model.safetensors", "model.npz", "ocf_directory"])
def test_a_checkpoint_and_its_conversion_compare_equal(tmp_path: Path, target: str) -> None:
    tensors = sample_tensors()
    source = tmp_path / ("source.safetensors" if target == "ocf_directory" else "source.ocf")
    if target == "ocf_directory":
        from safetensors.numpy import save_file

        save_file(tensors, str(source), metadata={"format": "np"})
        options = ["--layout", "directory"]
    else:
        ocf.save_file(tensors, source)
        options = []
    converted = tmp_path / target
    done = run("convert", str(source), str(converted), *options)
    assert done.returncode == 0, done.stderr
    assert run_json("diff", str(source), str(converted))["equal"] is True
    assert run_json("diff", str(converted), str(source))["equal"] is True


def test_safetensors_and_npz_of_the_same_tensors_compare_equal(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    tensors = sample_tensors()
    save_file(tensors, str(tmp_path / "m.safetensors"))
    np.savez(tmp_path / "m.npz", **tensors)
    document = run_json("diff", str(tmp_path / "m.safetensors"), str(tmp_path / "m.npz"))
    assert document["equal"] is True
    assert (document["a"]["format"], document["b"]["format"]) == ("safetensors", "npz")
    save_file(tensors, str(tmp_path / "m.safetensors"), metadata={"format": "pt"})
    changed = run_json("diff", str(tmp_path / "m.safetensors"), str(tmp_path / "m.npz"),
                       status=1)
    assert changed["metadata"] == [{"where": "safetensors.metadata", "what": "value",
                                    "a": {"format": "pt"}, "b": None}]


def test_errors_exit_2_with_a_json_error_document(tmp_path: Path) -> None:
    good = save(tmp_path / "a.ocf", {"x": np.ones(3)})
    document = run_json("diff", good, str(tmp_path / "missing.ocf"), status=2)
    assert document["error"]["category"] == "NOT_FOUND"
    broken = tmp_path / "broken.ocf"
    broken.write_bytes(Path(good).read_bytes()[:-9])
    done = run("diff", good, str(broken))
    assert done.returncode == 2
    assert done.stderr.startswith("MALFORMED:")


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "x"])
def test_a_negative_or_non_finite_tolerance_is_a_usage_error(tmp_path: Path,
                                                             value: str) -> None:
    good = save(tmp_path / "a.ocf", {"x": np.ones(3)})
    done = run("diff", good, good, "--rtol", value)
    assert done.returncode == 2
    assert "--rtol" in done.stderr
