"""ocf.torch.state_trees: nested state dicts in one OCF file without pickle, and
hostile structures refused by path and file."""

from __future__ import annotations

import random
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainer_support import assert_same  # noqa: E402

import ocf  # noqa: E402
from ocf.torch.random_states import global_random_states, set_global_random_states  # noqa: E402
from ocf.torch.state_trees import STRUCTURE_KEY, load_tree, save_tree  # noqa: E402


def test_a_training_state_comes_back_with_its_types_and_bytes(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    tree = {"model": model.state_dict(), "optimizers": [optimizer.state_dict()],
            "random": global_random_states(), "dtype": torch.bfloat16, 3: None, 1.5: b"x",
            "half": torch.ones(2, dtype=torch.bfloat16), "scalar": np.float32(0.25)}
    save_tree(tree, tmp_path / "t.ocf")
    back = load_tree(tmp_path / "t.ocf")
    assert_same(tree, back)
    assert isinstance(back["model"], OrderedDict)
    assert back["model"]._metadata == tree["model"]._metadata  # module versions
    optimizer.load_state_dict(back["optimizers"][0])


def test_restored_random_states_draw_the_same_numbers(tmp_path: Path) -> None:
    save_tree(global_random_states(), tmp_path / "r.ocf")
    drawn = (random.random(), np.random.rand(), torch.rand(1).item())
    set_global_random_states(load_tree(tmp_path / "r.ocf"))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == drawn


def test_a_value_that_would_need_pickle_is_refused_by_path(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match="nothing is pickled") as error:
        save_tree({"a": [1, {"f": print}]}, tmp_path / "t.ocf")
    assert error.value.key == "a/1/f"
    assert not (tmp_path / "t.ocf").exists()


@pytest.mark.parametrize(("structure", "message"), [
    ({"tensor": "missing"}, "tensors the file lacks"),
    ({"dict": ["a"]}, "odd number"),
    ({"set": []}, "expected one of"),
    ({"list": [], "tuple": []}, "expected one of"),
    ({"torch.dtype": "save"}, "torch.dtype"),
    ({"list": {"a": 1}}, "not a list"),
    ([1, 2], "bare list"),
    ({"dict": [{"list": []}, 2]}, "key of type dict"),
])
def test_a_hostile_structure_is_invalid_naming_the_file(
        tmp_path: Path, structure: object, message: str) -> None:
    path = tmp_path / "hostile.ocf"
    ocf.save_file({"w": np.ones(2)}, path, metadata={STRUCTURE_KEY: structure})
    with pytest.raises(ocf.InvalidError, match=message) as error:
        load_tree(path)
    assert str(path) in str(error.value)
