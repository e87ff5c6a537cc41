"""One JAX process of the JAX part of the sharding matrix (test_sharding_matrix_jax.py).

Run as ``python sharding_jax_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT in the environment (tests/ranks.py; the port of OCF_TEST_INIT is
the coordinator's). Each process has two CPU devices; the mesh is
(processes, 2) with axes ("data", "model").

- ``save``: the leaves of :func:`initial_tree` sharded with :data:`SAVED`
  (both axes, one axis replicated, the two axes as one, all replicated, no
  elements), trained :data:`SAVE_AT` steps, saved with
  ``ocf.distributed.jax.save``; process 0 keeps the full tree then as
  ``saved.npz`` (gathered by ``process_allgather``). Then :data:`AFTER` steps
  (the losses of the uninterrupted run), and the same steps from the tree
  restored with the shardings that saved it (the losses of the resumed run).
- ``restore``: restored against targets sharded with :data:`RESTORED`; each
  process reports, per leaf, whether every shard it holds equals the saved
  full value at its index.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ocf.distributed import jax as distributed

SAVE_AT, AFTER = 2, 2
SAVED = {"w": P("data", "model"), "b": P("model"), "emb": P(None, "model"),
         "fused": P(("data", "model"), None), "table": P(), "empty": P("data"), "step": P()}
RESTORED = {"w": P("model", "data"), "b": P("data"), "emb": P("data", None),
            "fused": P("model", None), "table": P(None, "data"), "empty": P(None, "model"),
            "step": P()}


def initial_tree() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {"w": rng.standard_normal((12, 6)).astype(np.float32),
            "b": rng.standard_normal(6).astype(np.float32),
            "emb": rng.standard_normal((12, 4)).astype(np.float32),
            "fused": rng.integers(-50, 50, (8, 4)).astype(np.int32),
            "table": rng.standard_normal((3, 6)).astype(ml_dtypes.bfloat16),
            "empty": np.zeros((0, 4), np.float32),
            "step": np.array(0, np.int32)}


def placed(mesh: Mesh, specs: dict[str, P], tree: dict[str, np.ndarray]) -> dict[str, Any]:
    return {key: jax.make_array_from_callback(
        value.shape, NamedSharding(mesh, specs[key]), lambda index, v=value: v[index])
        for key, value in tree.items()}


def loss_of(tree: dict[str, Any]) -> Any:
    x = jnp.linspace(-1.0, 1.0, 5 * 12, dtype=jnp.float32).reshape(5, 12)
    hidden = jnp.tanh(x @ tree["w"] + tree["b"])
    return jnp.mean(hidden ** 2) + jnp.mean(tree["emb"] ** 2) * 1e-2


def train_step(tree: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    trained = {key: tree[key] for key in ("w", "b", "emb")}
    loss, grads = jax.value_and_grad(loss_of)(trained)
    updated = dict(tree)
    updated.update({key: trained[key] - 0.1 * grads[key] for key in trained})
    updated["step"] = tree["step"] + 1
    return loss, updated


def steps(tree: dict[str, Any], count: int) -> tuple[list[float], dict[str, Any]]:
    """``count`` training steps; every leaf keeps its sharding (XLA may pick others for
    the outputs of a jitted function, a leaf without elements replicated)."""
    shardings = {key: value.sharding for key, value in tree.items()}
    mesh = shardings["w"].mesh
    step = jax.jit(train_step, out_shardings=(NamedSharding(mesh, P()), shardings))
    losses = []
    for _ in range(count):
        loss, tree = step(tree)
        losses.append(float(loss))
    return losses, tree


def targets(mesh: Mesh, specs: dict[str, P]) -> dict[str, Any]:
    return {key: jax.ShapeDtypeStruct(value.shape, value.dtype,
                                      sharding=NamedSharding(mesh, specs[key]))
            for key, value in initial_tree().items()}


def save(job: dict[str, Any], mesh: Mesh) -> dict[str, Any]:
    _, tree = steps(placed(mesh, SAVED, initial_tree()), SAVE_AT)
    specs = {key: str(value.sharding.spec) for key, value in tree.items()}
    distributed.save(tree, job["path"])
    full = {key: np.asarray(multihost_utils.process_allgather(value, tiled=True))
            for key, value in tree.items()}
    if jax.process_index() == 0:
        np.savez("saved.npz", **full)
    uninterrupted, _ = steps(tree, AFTER)
    resumed, _ = steps(distributed.restore(targets(mesh, SAVED), job["path"]), AFTER)
    return {"uninterrupted": uninterrupted, "resumed": resumed, "specs": specs}


def restore(job: dict[str, Any], mesh: Mesh) -> dict[str, Any]:
    dtypes = {key: value.dtype for key, value in initial_tree().items()}
    with np.load(job["saved"]) as data:  # bfloat16 comes back as raw 2-byte items
        expected = {key: data[key].view(dtypes[key]) for key in data.files}
    restored = distributed.restore(targets(mesh, RESTORED), job["path"])
    equal = {}
    for key, array in restored.items():
        equal[key] = array.shape == expected[key].shape and array.dtype == expected[key].dtype \
            and all(np.asarray(shard.data).tobytes() == expected[key][shard.index].tobytes()
                    for shard in array.addressable_shards)
    return {"equal": equal}


def main() -> None:
    job = json.loads(sys.argv[1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = os.environ["OCF_TEST_INIT"].rsplit(":", 1)[1]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=world,
                               process_id=rank)
    mesh = Mesh(np.array(jax.devices()).reshape(world, 2), ("data", "model"))
    result = {"save": save, "restore": restore}[job["mode"]](job, mesh)
    (Path(job["out"]) / f"{rank}.json").write_text(json.dumps(result))
    jax.distributed.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
