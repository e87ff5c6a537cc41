"""One JAX process of the multi-process tests of ocf.distributed.jax.

Run as ``python jax_worker.py '<json job>'`` with RANK, WORLD_SIZE and
OCF_TEST_INIT in the environment (tests/ranks.py; the port of OCF_TEST_INIT
is the coordinator's). Each process has two CPU devices, and the mesh is
(processes, 2) with axes ("data", "model").

- ``save``: the tree of :func:`global_tree` sharded with :data:`SAVED`, saved.
- ``restore``: restored against abstract targets sharded with :data:`RESTORED`;
  each process reports whether every shard it holds equals the global value
  at its index, the bytes it read and the bytes its distinct shards hold.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax
import ml_dtypes
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ocf.distributed import jax as distributed
from ocf.format.reader import Reader

SAVED = {"params/w": P("data", "model"), "params/b": P("model"), "params/emb": P(None, "model"),
         "opt/mu": P("data", "model"), "step": P()}
RESTORED = {"params/w": P("model", "data"), "params/b": P("data"), "params/emb": P("data", None),
            "opt/mu": P(None, "data"), "step": P()}


def global_tree() -> dict[str, Any]:
    rng = np.random.default_rng(11)
    return {
        "params": {"w": rng.standard_normal((256, 128)).astype(np.float32),
                   "b": rng.standard_normal(128).astype(np.float32),
                   "emb": rng.standard_normal((512, 64)).astype(ml_dtypes.bfloat16)},
        "opt": {"mu": rng.standard_normal((256, 128)).astype(np.float32)},
        "step": np.array(42, dtype=np.int32),
    }


def shardings(mesh: Mesh, specs: dict[str, P]) -> dict[str, Any]:
    tree = global_tree()
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    flat = {distributed.leaf_key(p): NamedSharding(mesh, specs[distributed.leaf_key(p)])
            for p, _ in paths}
    return jax.tree_util.tree_map_with_path(lambda p, _: flat[distributed.leaf_key(p)], tree)


def save(job: dict[str, Any], mesh: Mesh) -> dict[str, Any]:
    tree = jax.tree.map(lambda value, sharding: jax.make_array_from_callback(
        value.shape, sharding, lambda index: value[index]), global_tree(),
        shardings(mesh, SAVED))
    distributed.save(tree, job["path"])
    return {}


def restore(job: dict[str, Any], mesh: Mesh) -> dict[str, Any]:
    expected = global_tree()
    target = jax.tree.map(lambda value, sharding: jax.ShapeDtypeStruct(
        value.shape, value.dtype, sharding=sharding), expected, shardings(mesh, RESTORED))
    with Reader(job["path"]) as reader:
        restored = distributed.read_tree(reader, target)
        read = reader.bytes_read
    equal, needed = True, 0
    for value, array in zip(jax.tree.leaves(expected), jax.tree.leaves(restored)):
        seen = set()
        for shard in array.addressable_shards:
            equal &= np.asarray(shard.data).tobytes() == value[shard.index].tobytes()
            bounds = tuple(s.indices(n)[:2] for s, n in zip(shard.index, value.shape))
            if bounds not in seen:
                seen.add(bounds)
                needed += value[shard.index].nbytes
    return {"equal": bool(equal), "bytes_read": read, "bytes_needed": needed}


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


if __name__ == "__main__":
    main()
