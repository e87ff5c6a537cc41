"""Strict restores cover every piece of training state, not only tensors (issue 24).

An optimizer restores only into its own class with its own hyperparameters,
whatever ``partial`` and ``cast`` say; a scheduler, a gradient scaler or any
object whose state is metadata, present on one side only, fails a strict
restore at restore time (``partial=True`` is the way out), and a refused
restore changes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")
pytest.importorskip("optax")

import jax.numpy as jnp
import optax
import torch
from torch import nn

import ocf
import ocf.jax
import ocf.torch


def trained(optimizer_class: type[torch.optim.Optimizer], seed: int = 0, **options: object
            ) -> tuple[nn.Linear, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Linear(4, 2)
    optimizer = optimizer_class(model.parameters(), lr=0.01, **options)
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def state_of(model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """Everything a restore could change, as text: parameters, groups, per-parameter state."""
    return repr((model.state_dict(), optimizer.state_dict()))


@pytest.mark.parametrize("options", [{}, {"partial": True}, {"cast": True}])
def test_an_adamw_checkpoint_is_refused_by_sgd_naming_classes_and_hyperparameters(
        tmp_path: Path, options: dict[str, bool]) -> None:
    model, adamw = trained(torch.optim.AdamW)
    path = ocf.Checkpoint(model=model, optimizer=adamw).write(tmp_path / "adamw")
    target, sgd = trained(torch.optim.SGD, seed=1, momentum=0.9)
    before = state_of(target, sgd)
    with pytest.raises(ocf.InvalidError) as caught:
        ocf.Checkpoint(model=target, optimizer=sgd).restore(path, **options)
    message = str(caught.value)
    assert message.startswith(f"INVALID: {path}: object 'optimizer': the checkpoint holds a "
                              "torch.optim.AdamW, this object is a torch.optim.SGD")
    assert "hyperparameters amsgrad, betas, capturable, decoupled_weight_decay, eps are not " \
        "this one's (which has dampening, momentum, nesterov)" in message
    assert state_of(target, sgd) == before  # not even the model took a value


def test_optimizers_with_the_same_hyperparameter_names_are_told_apart_by_class(
        tmp_path: Path) -> None:
    # torch's Adam and AdamW have the same param_group keys; only the class differs.
    model, adam = trained(torch.optim.Adam)
    path = ocf.torch.save({"model": model, "optimizer": adam}, tmp_path / "adam.ocf")
    target, adamw = trained(torch.optim.AdamW, seed=1)
    assert set(adam.param_groups[0]) == set(adamw.param_groups[0])
    with pytest.raises(ocf.InvalidError, match=r"holds a torch\.optim\.Adam, this object is a "
                                               r"torch\.optim\.AdamW"):
        ocf.torch.restore({"model": target, "optimizer": adamw}, path)


def test_the_same_optimizer_class_restores_hyperparameters_and_state(tmp_path: Path) -> None:
    model, adamw = trained(torch.optim.AdamW, betas=(0.8, 0.9))
    path = ocf.torch.save({"model": model, "optimizer": adamw}, tmp_path / "a.ocf")
    target, fresh = trained(torch.optim.AdamW, seed=1)
    ocf.torch.restore({"model": target, "optimizer": fresh}, path)
    assert state_of(target, fresh) == state_of(model, adamw)


def test_a_scheduler_only_in_the_target_fails_at_restore_time_and_changes_nothing(
        tmp_path: Path) -> None:
    model, optimizer = trained(torch.optim.SGD)
    path = ocf.Checkpoint(model=model, optimizer=optimizer).write(tmp_path / "no-scheduler")
    target, fresh = trained(torch.optim.SGD, seed=1)
    scheduler = torch.optim.lr_scheduler.StepLR(fresh, step_size=3)
    before = state_of(target, fresh)
    checkpoint = ocf.Checkpoint(model=target, optimizer=fresh, scheduler=scheduler)
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        checkpoint.restore(path)
    assert str(caught.value) == (
        f"INVALID: {path}: 1 objects holding training state (metadata) have no value in the "
        "checkpoint: 'scheduler' (restore(..., partial=True) accepts this and leaves these "
        "objects as they are)")
    assert state_of(target, fresh) == before
    status = checkpoint.restore(path, partial=True)  # the documented way out
    assert torch.equal(target.weight, model.weight)
    with pytest.raises(ocf.RestoreMismatchError, match="'scheduler'"):
        status.assert_consumed()  # the strict default and assert_consumed agree


def test_a_scheduler_only_in_the_checkpoint_fails_at_restore_time(tmp_path: Path) -> None:
    model, optimizer = trained(torch.optim.SGD)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3)
    path = ocf.Checkpoint(model=model, optimizer=optimizer, scheduler=scheduler).write(
        tmp_path / "with-scheduler")
    target, fresh = trained(torch.optim.SGD, seed=1)
    before = state_of(target, fresh)
    with pytest.raises(ocf.RestoreMismatchError) as caught:
        ocf.Checkpoint(model=target, optimizer=fresh).restore(path)
    assert str(caught.value) == (
        f"INVALID: {path}: 1 checkpoint objects holding training state (metadata) matched no "
        "object: 'scheduler' (restore(..., partial=True) accepts this and ignores these "
        "values)")
    assert state_of(target, fresh) == before


def test_a_scheduler_restores_only_into_its_own_class(tmp_path: Path) -> None:
    _, optimizer = trained(torch.optim.SGD)
    step = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3)
    path = ocf.torch.save({"optimizer": optimizer, "scheduler": step}, tmp_path / "s.ocf")
    _, fresh = trained(torch.optim.SGD, seed=1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(fresh, T_max=10)
    with pytest.raises(ocf.InvalidError, match=r"object 'scheduler': the checkpoint holds a "
                       r"torch\.optim\.lr_scheduler\.StepLR, this object is a "
                       r"torch\.optim\.lr_scheduler\.CosineAnnealingLR"):
        ocf.torch.restore({"optimizer": fresh, "scheduler": cosine}, path, partial=True)
    assert not hasattr(cosine, "step_size")


def test_a_gradient_scaler_on_one_side_only_is_a_strict_error(tmp_path: Path) -> None:
    model, _ = trained(torch.optim.SGD)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    path = ocf.torch.save({"model": model, "scaler": scaler}, tmp_path / "s.ocf")
    with pytest.raises(ocf.RestoreMismatchError, match="matched no object: 'scaler'"):
        ocf.torch.restore({"model": nn.Linear(4, 2)}, path)
    ocf.torch.restore({"model": nn.Linear(4, 2)}, path, partial=True)


KERAS_ADAMW_INTO_SGD = textwrap.dedent("""
    import sys
    import keras
    import ocf, ocf.keras

    def model():
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])

    saved, adamw = model(), keras.optimizers.AdamW(0.01)
    adamw.build(saved.trainable_variables)
    path = ocf.keras.save({"model": saved, "optimizer": adamw}, sys.argv[1])
    target, sgd = model(), keras.optimizers.SGD(0.1, momentum=0.9)
    sgd.build(target.trainable_variables)
    try:
        ocf.keras.restore({"model": target, "optimizer": sgd}, path, partial=True)
    except ocf.InvalidError as error:
        print(error)
""")


def test_a_keras_adamw_checkpoint_is_refused_by_sgd(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", KERAS_ADAMW_INTO_SGD, str(tmp_path / "k.ocf")],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "KERAS_BACKEND": "jax"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == (
        f"INVALID: {tmp_path / 'k.ocf'}: object 'optimizer': the checkpoint holds a "
        "keras.optimizers.AdamW, this object is a keras.optimizers.SGD: an optimizer restores "
        "only into its own class")


def test_an_optax_adamw_state_is_refused_by_an_sgd_target_without_suggesting_partial(
        tmp_path: Path) -> None:
    params = {"w": jnp.ones(3)}
    path = ocf.jax.save({"params": params, "opt_state": optax.adamw(0.1).init(params)},
                        tmp_path / "adamw.ocf")
    target = {"params": params, "opt_state": optax.sgd(0.1, momentum=0.9).init(params)}
    with pytest.raises(ocf.InvalidError) as caught:
        ocf.jax.restore(target, path)
    assert str(caught.value) == (
        f"INVALID: {path}: 1 leaves of the target received no value: 'opt_state/0/trace/w'; "
        "1 checkpoint tensors matched no leaf of the target: 'opt_state/0/count' (the "
        "target's structure is not the saved one (another optax optimizer, a renamed "
        "layer?): build the target as the saved state was built; partial=True would leave "
        "these leaves as they are)")
