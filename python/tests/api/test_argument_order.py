"""Every save and restore takes the object first and the path second (0.3.0).

A call in the order of 0.2.0 (the path first) is a TypeError that says the
order, raised before anything is written or read; so is an object where the
path goes. The options every ``save_file`` and ``save`` take are one type,
:class:`ocf.format.save_options.WriteOptions`, which must name what
:class:`ocf.Writer` takes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")

import numpy as np
import torch

import ocf
import ocf.distributed.jax
import ocf.distributed.torch
import ocf.jax
import ocf.numpy
import ocf.torch
from ocf.format.save_options import WriteOptions
from ocf.torch.state_trees import save_tree

ORDER = "the object comes first and the path second"


def state() -> dict[str, Any]:
    return {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.array(3)}


def tensors() -> dict[str, torch.Tensor]:
    return {"w": torch.ones(2, 3)}


# (name shown in the message, function, the object it takes first)
SAVES: list[tuple[str, Callable[..., object], Callable[[], object]]] = [
    ("save_file", ocf.save_file, state),
    ("save_file", ocf.numpy.save_file, state),
    ("save", ocf.numpy.save, state),
    ("ocf.torch.save_file", ocf.torch.save_file, tensors),
    ("save", ocf.torch.save, lambda: {"model": torch.nn.Linear(3, 2)}),
    ("ocf.torch.save_model", ocf.torch.save_model, lambda: torch.nn.Linear(3, 2)),
    ("ocf.jax.save_file", ocf.jax.save_file, state),
    ("ocf.jax.save", ocf.jax.save, state),
    ("ocf.write", ocf.write, state),
    ("save_tree", save_tree, lambda: {"optimizer": {"step": 3}}),
    ("ocf.distributed.torch.save", ocf.distributed.torch.save, tensors),
    ("ocf.distributed.jax.save", ocf.distributed.jax.save, state),
]
RESTORES: list[tuple[str, Callable[..., object], Callable[[], object]]] = [
    ("restore", ocf.numpy.restore, state),
    ("restore", ocf.torch.restore, lambda: {"model": torch.nn.Linear(3, 2)}),
    ("ocf.torch.load_model", ocf.torch.load_model, lambda: torch.nn.Linear(3, 2)),
    ("ocf.jax.restore", ocf.jax.restore, state),
    ("ocf.restore", ocf.restore, state),
    ("ocf.distributed.torch.load_into", ocf.distributed.torch.load_into, tensors),
    ("ocf.distributed.jax.restore", ocf.distributed.jax.restore, state),
]


@pytest.mark.parametrize(("name", "save", "make"), SAVES, ids=[f"{s[0]}-{i}" for i, s in
                                                                 enumerate(SAVES)])
def test_a_save_given_the_path_first_says_the_order_and_writes_nothing(
        name: str, save: Callable[..., object], make: Callable[[], object],
        tmp_path: Path) -> None:
    path = tmp_path / "ckpt.ocf"
    with pytest.raises(TypeError) as raised:
        save(path, make())
    message = str(raised.value)
    assert message.startswith(f"{name}(")
    assert ORDER in message
    assert "got a path as the first argument" in message
    assert "ckpt.ocf" in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "save", "make"), SAVES, ids=[f"{s[0]}-{i}" for i, s in
                                                                 enumerate(SAVES)])
def test_a_save_given_an_object_where_the_path_goes_says_the_order(
        name: str, save: Callable[..., object], make: Callable[[], object]) -> None:
    with pytest.raises(TypeError, match=f"{ORDER}; got a dict as the second argument"):
        save(make(), {"not": "a path"})


@pytest.mark.parametrize(("name", "restore", "make"), RESTORES,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(RESTORES)])
def test_a_restore_given_the_path_first_says_the_order(
        name: str, restore: Callable[..., object], make: Callable[[], object],
        tmp_path: Path) -> None:
    ocf.numpy.save_file({"w": np.zeros((2, 3), np.float32)}, tmp_path / "ckpt.ocf")
    target = make()
    with pytest.raises(TypeError) as raised:
        restore(tmp_path / "ckpt.ocf", target)
    message = str(raised.value)
    assert message.startswith(f"{name}(")
    assert ORDER in message
    assert "got a path as the first argument" in message


def test_the_path_may_be_a_string_a_pathlib_path_or_bytes(tmp_path: Path) -> None:
    for path in (str(tmp_path / "a.ocf"), tmp_path / "b.ocf", bytes(tmp_path / "c.ocf")):
        with pytest.raises(TypeError, match="got a path as the first argument"):
            ocf.numpy.save(path, state())
    saved = ocf.numpy.save(state(), str(tmp_path / "a.ocf"))
    target = {"w": np.zeros((2, 3), np.float32), "step": np.array(0)}
    ocf.numpy.restore(target, Path(saved))
    np.testing.assert_array_equal(target["w"], state()["w"])


def test_a_numbered_distributed_save_takes_the_tensors_first(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=f"save_numbered\\(tensors, path\\): {ORDER}"):
        ocf.distributed.torch.save_numbered(tmp_path, 1, tensors())  # type: ignore[arg-type]


def test_the_write_options_are_the_options_of_the_writer() -> None:
    taken = {name for name, parameter in inspect.signature(ocf.Writer).parameters.items()
             if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(WriteOptions.__annotations__) == taken - {"metadata"}


def test_a_write_option_reaches_the_writer_through_every_save(tmp_path: Path) -> None:
    zeros = np.zeros((256, 256), np.float32)  # compressible: zstd keeps what it shrinks
    model = torch.nn.Linear(256, 256)
    with torch.no_grad():
        model.weight.zero_()
    ocf.torch.save_file({"w": torch.from_numpy(zeros)}, tmp_path / "flat", layout="directory",
                        compression="zstd")
    ocf.torch.save({"model": model}, tmp_path / "graph", layout="directory", compression="zstd")
    ocf.jax.save({"w": zeros}, tmp_path / "tree", layout="directory", compression="zstd")
    for name in ("flat", "graph", "tree"):
        assert (tmp_path / name / "index.ocf").is_file()
        with ocf.open(tmp_path / name) as reader:
            assert "zstd" in {reader[key].codec_name for key in reader}
