"""Renamed objects have a working remedy in object checkpoints (issue 24, item 3).

A restore takes ``rename=`` (a dict of path prefixes, or a function of a
checkpoint path); the strict error for a renamed layer suggests the very map
that fixes it, never partial=True as if it did; optimizer state follows the
renamed parameters; a flat weights file restores into a bare module by key, and
otherwise points to ocf.torch.load_model.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch import nn

import ocf
import ocf.torch


def net(first: str, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(OrderedDict([(first, nn.Linear(4, 3)), ("head", nn.Linear(3, 2))]))


def trained(first: str, seed: int = 0) -> tuple[nn.Sequential, torch.optim.AdamW]:
    model = net(first, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def optimizer_state(optimizer: torch.optim.Optimizer) -> str:
    return repr(optimizer.state_dict())


def test_a_renamed_layer_fails_suggesting_the_rename_that_then_restores_everything(
        tmp_path: Path) -> None:
    model, optimizer = trained("fc1")
    path = ocf.Checkpoint(model=model, optimizer=optimizer).write(tmp_path / "ckpt")
    renamed, fresh = trained("encoder", seed=1)
    checkpoint = ocf.Checkpoint(model=renamed, optimizer=fresh)
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        checkpoint.restore(path)
    message = str(caught.value)
    assert "holding tensors matched no object: 'model/fc1/bias', 'model/fc1/weight'" in message
    assert "have no value in the checkpoint: 'model/encoder/bias', 'model/encoder/weight'" \
        in message
    assert message.endswith(
        " (if objects were renamed, restore(..., rename={'model/fc1': 'model/encoder'}) "
        "maps the checkpoint's paths to the objects'; partial=True would leave these "
        "objects as they are)")
    assert "accepts this" not in message
    checkpoint.restore(path, rename={"model/fc1": "model/encoder"}).assert_consumed()
    assert torch.equal(renamed.encoder.weight, model.fc1.weight)
    assert torch.equal(renamed.head.bias, model.head.bias)
    assert optimizer_state(fresh) == optimizer_state(optimizer)  # slots followed


def test_rename_takes_a_function_of_the_checkpoint_path(tmp_path: Path) -> None:
    model, optimizer = trained("fc1")
    path = ocf.torch.save({"model": model, "optimizer": optimizer}, tmp_path / "o.ocf")
    renamed, fresh = trained("encoder", seed=1)
    seen: list[str] = []

    def rename(checkpoint_path: str) -> str:
        seen.append(checkpoint_path)
        return checkpoint_path.replace("model/fc1", "model/encoder")

    ocf.torch.restore({"model": renamed, "optimizer": fresh}, path, rename=rename)
    assert torch.equal(renamed.encoder.bias, model.fc1.bias)
    assert optimizer_state(fresh) == optimizer_state(optimizer)
    assert "model/fc1/weight" in seen


def test_rename_can_move_an_object_under_another_parent(tmp_path: Path) -> None:
    model, _ = trained("fc1")
    path = ocf.torch.save({"model": model}, tmp_path / "m.ocf")
    backbone = nn.Sequential(OrderedDict([("fc1", nn.Linear(4, 3))]))
    target = {"model": nn.Sequential(OrderedDict([("head", nn.Linear(3, 2))])),
              "backbone": backbone}
    ocf.torch.restore(target, path, rename={"model/fc1": "backbone/fc1"})
    assert torch.equal(backbone.fc1.weight, model.fc1.weight)
    assert torch.equal(target["model"].head.weight, model.head.weight)


def test_the_longest_prefix_wins_and_a_bad_map_is_refused(tmp_path: Path) -> None:
    model, _ = trained("fc1")
    path = ocf.torch.save({"model": model}, tmp_path / "m.ocf")
    target = net("encoder", seed=2)
    ocf.torch.restore({"model": target}, path,
                      rename={"model": "model", "model/fc1": "model/encoder"})
    assert torch.equal(target.encoder.weight, model.fc1.weight)
    with pytest.raises(ocf.InvalidError, match="rename maps non-empty path strings"):
        ocf.torch.restore({"model": target}, path, rename={"": "model"})
    with pytest.raises(ocf.InvalidError, match="returned a int, not a path"):
        ocf.torch.restore({"model": target}, path, rename=lambda p: 3)  # type: ignore


def test_a_flat_state_dict_restores_into_a_bare_module_by_key(tmp_path: Path) -> None:
    model = net("fc1", seed=0)
    ocf.torch.save_file(model.state_dict(), tmp_path / "weights.ocf")
    target = net("fc1", seed=1)
    ocf.torch.restore(target, tmp_path / "weights.ocf")  # fc1/weight/.value is fc1.weight
    assert torch.equal(target.fc1.weight, model.fc1.weight)


def test_a_flat_state_dict_that_does_not_match_points_to_load_model(tmp_path: Path) -> None:
    model = net("fc1", seed=0)
    ocf.torch.save_file(model.state_dict(), tmp_path / "weights.ocf")
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        ocf.torch.restore({"model": net("fc1", seed=1)}, tmp_path / "weights.ocf")
    message = str(caught.value)
    assert "'fc1.bias'" in message
    assert "'model/fc1/bias/.value'" in message
    assert message.endswith("load a module's state_dict with ocf.torch.load_model(model, "
                            "path), read the tensors with load_file, or give name_map= to "
                            "map keys")
    assert "partial=True" not in message
    assert "rename" not in message
    with pytest.raises(ocf.InvalidError, match="rename= maps object paths, and this "
                       "checkpoint has no object graph: name_map= maps its tensor keys"):
        ocf.torch.restore({"model": net("fc1", seed=1)}, tmp_path / "weights.ocf",
                          rename={"model": "net"})


def test_jax_restore_takes_a_rename_map(tmp_path: Path) -> None:
    import jax.numpy as jnp

    import ocf.jax
    path = ocf.jax.save({"params": {"fc1": {"w": jnp.arange(3.0)}}}, tmp_path / "t.ocf")
    restored = ocf.jax.restore({"params": {"encoder": {"w": jnp.zeros(3)}}}, path,
                               rename={"params/fc1": "params/encoder"})
    assert restored["params"]["encoder"]["w"].tolist() == [0.0, 1.0, 2.0]
