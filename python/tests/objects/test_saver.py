"""The name-based API: the tf.compat.v1.train.Saver workflow of seed 004."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ocf


def test_save_and_restore_all_variables_in_place(tmp_path: Path) -> None:
    v1 = np.arange(3, dtype=np.float32)
    v2 = np.arange(5, dtype=np.float32) * 2
    path = ocf.Saver({"v1": v1, "v2": v2}).save(tmp_path / "model.ocf")
    r1, r2 = np.zeros_like(v1), np.zeros_like(v2)
    ocf.Saver({"v1": r1, "v2": r2}).restore(path)
    assert np.array_equal(r1, v1)
    assert np.array_equal(r2, v2)


def test_global_step_numbers_the_checkpoint(tmp_path: Path) -> None:
    path = ocf.Saver({"v": np.zeros(1)}).save(tmp_path / "model.ocf", global_step=1000)
    assert path == str(tmp_path / "model.ocf-1000")
    assert Path(path).is_file()


def test_a_dict_renames_on_save_and_on_restore(tmp_path: Path) -> None:
    kernel = np.arange(6, dtype=np.float64).reshape(2, 3)
    path = ocf.Saver({"dense/kernel": kernel}).save(tmp_path / "m.ocf")
    assert ocf.list_variables(path) == [("dense/kernel", "float64", (2, 3))]
    renamed = np.zeros((2, 3))
    ocf.Saver({"dense/kernel": renamed}).restore(path)  # any array, found by its saved name
    assert np.array_equal(renamed, kernel)


def test_restore_a_subset(tmp_path: Path) -> None:
    path = ocf.Saver({"a": np.ones(2), "b": np.full(2, 2.0)}).save(tmp_path / "m.ocf")
    b = np.zeros(2)
    ocf.Saver({"b": b}).restore(path)
    assert b.tolist() == [2.0, 2.0]
    assert list(ocf.load_file(path, keys=["a"])) == ["a"]


def test_restore_refuses_mismatches_and_changes_nothing(tmp_path: Path) -> None:
    path = ocf.Saver({"a": np.ones(2), "b": np.ones(3)}).save(tmp_path / "m.ocf")
    a, wrong_shape = np.zeros(2), np.zeros(4)
    with pytest.raises(ocf.InvalidError, match="shape"):
        ocf.Saver({"a": a, "b": wrong_shape}).restore(path)
    assert not a.any()
    with pytest.raises(ocf.InvalidError, match="dtype"):
        ocf.Saver({"a": np.zeros(2, np.float32)}).restore(path)
    with pytest.raises(ocf.NotFoundError, match="'missing'"):
        ocf.Saver({"missing": np.zeros(2)}).restore(path)


def test_restore_after_corruption_raises_integrity_and_changes_nothing(tmp_path: Path) -> None:
    path = Path(ocf.Saver({"a": np.ones(4), "b": np.ones(4)}).save(tmp_path / "m.ocf"))
    with ocf.open(path) as reader:
        offset = reader["b"].block.offset  # type: ignore[union-attr]
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(b"\x55")  # the first byte of 1.0 is 0x00
    a, b = np.zeros(4), np.zeros(4)
    with pytest.raises(ocf.IntegrityError, match="'b'"):
        ocf.Saver({"a": a, "b": b}).restore(path)
    assert not a.any()
    assert not b.any()


def test_load_variable_returns_one_value(tmp_path: Path) -> None:
    path = ocf.Saver({"step": np.array(7)}).save(tmp_path / "m.ocf")
    assert ocf.load_variable(path, "step") == 7


def test_saver_needs_numpy_arrays() -> None:
    with pytest.raises(ocf.InvalidError, match="NumPy arrays"):
        ocf.Saver({"x": [1, 2]})  # type: ignore[dict-item]
