"""JAX, Flax and optax support: pytrees in OCF checkpoints (``pip install 'ocf[jax]'``).

Flat dicts of arrays, as safetensors' API has them::

    ocf.jax.save_file({"w": w}, "model.ocf", metadata={"step": 10})
    arrays = ocf.jax.load_file("model.ocf")           # dict[str, jax.Array]

Whole pytrees (dicts, lists, tuples, namedtuples, registered dataclasses,
Flax params, optax states) as object graphs; JAX arrays are immutable, so
a restore returns a new tree shaped like its target, which may be abstract::

    ocf.jax.save({"params": params, "opt_state": opt_state}, "ckpt.ocf")
    target = jax.eval_shape(init)                     # jax.ShapeDtypeStruct leaves
    state = ocf.jax.restore(target, "ckpt.ocf")

In an :class:`ocf.Checkpoint`, next to other objects::

    holder = ocf.jax.TreeState(state)
    ckpt = ocf.Checkpoint(state=holder)
    ckpt.save("run/ckpt")
    ckpt.restore(path).assert_consumed()
    state = holder.tree                               # the restored tree

Numbered checkpoints of a run, with no holder to keep in sync (each save
takes the tree, each restore returns a new one, as Orbax's manager does)::

    manager = ocf.jax.TreeManager("run", max_to_keep=3)
    manager.save(step, state)
    state = manager.restore(manager.latest_step(), jax.eval_shape(init))

Optimizer moments become slot variables of their parameters
(:mod:`ocf.jax.slots`); checkpoints of other frameworks restore through a
:class:`~ocf.jax.translations.Translation` (:data:`~ocf.jax.translations.TORCH_TO_FLAX`),
and trees save through one for other frameworks::

    ocf.jax.save(params, "ckpt.ocf", translation=ocf.jax.FLAX_TO_TORCH)
    ocf.restore(torch_model, "ckpt.ocf").assert_consumed()
"""

from __future__ import annotations

from ocf.jax.files import load_file, save_file
from ocf.jax.managed import TreeManager
from ocf.jax.staleness import StaleTreeWarning
from ocf.jax.translations import FLAX_TO_TORCH, TORCH_TO_FLAX, Translation
from ocf.jax.trees import TreeState, restore, save

__all__ = ["FLAX_TO_TORCH", "TORCH_TO_FLAX", "StaleTreeWarning", "Translation", "TreeManager",
           "TreeState", "load_file", "restore", "save", "save_file"]
