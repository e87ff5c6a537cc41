"""Sharded ``jax.Array`` trees saved by many JAX processes and restored on any mesh.

:func:`save` is collective over the processes of ``jax.distributed``: each
process writes the shards it can address, one copy of each replica (the
shard with ``replica_id`` 0), as its part of one OCF checkpoint
(spec/parts.md); process 0 merges once every process reports its part
written, and every process returns once the checkpoint is committed, or
raises when it is not. Leaves are stored under their tree paths
(``params/dense/kernel``), so the result is an ordinary flat checkpoint that
``ocf.load_file`` reads in one process.

:func:`restore` needs no collective: given a target tree of
``jax.ShapeDtypeStruct`` (or arrays) with shardings, each process reads only
the regions its devices hold, whatever mesh and process count saved them.

Example::

    ocf.distributed.jax.save(state, "run/ckpt-100")            # on every process
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                           sharding=new_sharding), state)
    state = ocf.distributed.jax.restore(abstract, "run/ckpt-100")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from ocf.distributed.parts import LocalBox, PartWriter, merge_parts, new_save_id
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILES
from ocf.format.argument_order import check_object_then_path
from ocf.format.errors import InvalidError
from ocf.format.reader import Reader
from ocf.format.storage.location import StorageOptions


def save(tree: Any, path: str | os.PathLike[str], *,
         metadata: Mapping[str, object] | None = None, **options: Any) -> None:
    """Write this process's shards of every leaf of ``tree`` as its part of the
    checkpoint at ``path``; call on every process with the same arguments.

    Leaves are ``jax.Array`` (sharded or not), NumPy arrays or Python numbers;
    process 0's ``metadata`` is stored. ``options`` go to the writer
    (compression, chunk_size and tile_bytes, small by default so that
    restores on another mesh read little more than they need).

    Examples:
        >>> jax.distributed.initialize(...)  # every process, then:
        >>> ocf.distributed.jax.save({"params": params, "step": step}, "run/ckpt-100")
    """
    check_object_then_path("ocf.distributed.jax.save", tree, path, first_name="tree")
    options.setdefault("chunk_size", RESHARD_CHUNK_SIZE)
    options.setdefault("tile_bytes", RESHARD_TILES)
    me, count = jax.process_index(), jax.process_count()
    save_id = _from_process_0(new_save_id() if me == 0 else "0" * 16)
    own = _attempt(lambda: _write_part(path, tree, me, count, save_id,
                                       metadata if me == 0 else None, options))
    failed = [int(p) for p in np.flatnonzero(_gathered(own is not None))]
    if not failed and me == 0:
        own = _attempt(lambda: merge_parts(path, save_id=save_id, parts=count,
                                           storage_options=options.get("storage_options")))
    merge_failed = bool(_gathered(own is not None and not failed)[0])
    if own is not None:
        raise own
    if failed or merge_failed:
        what = f"process(es) {failed} failed to write their parts" if failed else \
            "process 0 failed to merge the parts"
        raise InvalidError(f"{what}; the checkpoint is not committed", path=os.fspath(path))


def restore(target: Any, path: str | os.PathLike[str], *, verify: bool = True,
            storage_options: StorageOptions | None = None) -> Any:
    """A tree like ``target`` whose leaves are arrays with the target leaves' shardings,
    read from the checkpoint at ``path``: each process reads only what its devices hold.
    Every leaf's shape and dtype is checked before anything is read.

    Examples:
        >>> abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(
        ...     x.shape, x.dtype, sharding=NamedSharding(mesh, P("data"))), params)
        >>> params = ocf.distributed.jax.restore(abstract, "run/ckpt-100")
    """
    check_object_then_path("ocf.distributed.jax.restore", target, path, first_name="target")
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        return read_tree(reader, target)


def read_tree(reader: Reader, target: Any) -> Any:
    """:func:`restore` from an open reader (whose ``bytes_read`` then says what it cost).

    Examples:
        >>> with ocf.Reader("run/ckpt-100") as reader:
        ...     params = ocf.distributed.jax.read_tree(reader, abstract)
        ...     print(reader.bytes_read)
    """
    leaves, structure = jax.tree_util.tree_flatten_with_path(target)
    keys = [leaf_key(p) for p, _ in leaves]
    for key, (_, leaf) in zip(keys, leaves):
        _check_leaf(reader, key, leaf)
    arrays = [_read_leaf(reader, key, leaf) for key, (_, leaf) in zip(keys, leaves)]
    return jax.tree_util.tree_unflatten(structure, arrays)


def leaf_key(path: tuple[Any, ...]) -> str:
    """The checkpoint key of a leaf: its tree path's names joined by ``/``.

    Examples:
        >>> path, _ = jax.tree_util.tree_flatten_with_path({"params": {"w": 1}})[0][0]
        >>> ocf.distributed.jax.leaf_key(path)
        'params/w'
    """
    names = []
    for entry in path:
        for attribute in ("key", "name", "idx"):
            if hasattr(entry, attribute):
                names.append(str(getattr(entry, attribute)))
                break
        else:
            names.append(str(entry))
    return "/".join(names) or "value"


# -- saving ----------------------------------------------------------------------------------


def _write_part(path: str | os.PathLike[str], tree: Any, me: int, count: int, save_id: str,
                metadata: Mapping[str, object] | None, options: dict[str, Any]) -> None:
    with PartWriter(path, part=me, parts=count, save_id=save_id, metadata=metadata,
                    **options) as writer:
        for leaf_path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            key = leaf_key(leaf_path)
            for box in _boxes(key, leaf, me):
                if isinstance(box, LocalBox):
                    writer.write_slice(key, np.asarray(box.value), box.start, box.shape)
                else:
                    writer.write(key, box)


def _boxes(key: str, leaf: Any, me: int) -> list[LocalBox | np.ndarray]:
    """What this process stores of ``leaf``: its replica-0 shards of a jax.Array, or the
    whole value on process 0 for anything else."""
    if not isinstance(leaf, jax.Array):
        return [np.asarray(leaf)] if me == 0 else []
    if leaf.is_fully_replicated:
        return [np.asarray(leaf.addressable_shards[0].data)] if me == 0 else []
    boxes: list[LocalBox | np.ndarray] = []
    for shard in leaf.addressable_shards:
        if shard.replica_id != 0:
            continue
        start = tuple(s.indices(n)[0] for s, n in zip(shard.index, leaf.shape))
        boxes.append(LocalBox(np.asarray(shard.data), start, tuple(leaf.shape)))
    return boxes


# -- restoring -------------------------------------------------------------------------------


def _check_leaf(reader: Reader, key: str, leaf: Any) -> None:
    info = reader[key]
    shape, dtype = tuple(np.shape(leaf)), np.dtype(getattr(leaf, "dtype", None) or
                                                   np.asarray(leaf).dtype)
    if shape != tuple(info.shape):
        raise InvalidError(f"the checkpoint's tensor has shape {list(info.shape)}, the "
                           f"target {list(shape)}", path=reader.path, key=key)
    if info.dtype.numpy != dtype:
        raise InvalidError(f"the checkpoint's tensor has dtype {info.dtype.name}, the target "
                           f"{dtype}", path=reader.path, key=key)


def _read_leaf(reader: Reader, key: str, leaf: Any) -> Any:
    sharding = getattr(leaf, "sharding", None)
    if sharding is None:
        return reader.read_tensor(key)
    shape = tuple(leaf.shape)
    regions: dict[tuple[tuple[int, int], ...], np.ndarray] = {}  # a replica once a process

    def region(index: tuple[slice, ...] | None) -> np.ndarray:
        index = index or tuple(slice(None) for _ in shape)
        bounds = tuple(s.indices(n)[:2] for s, n in zip(index, shape))
        if bounds not in regions:
            regions[bounds] = reader.get_slice(key, index) if shape else reader.read_tensor(key)
        return regions[bounds]

    return jax.make_array_from_callback(shape, sharding, region)


# -- between processes -----------------------------------------------------------------------


def _attempt(step: Callable[[], None]) -> Exception | None:
    try:
        step()
    except Exception as exc:  # reported to every process, raised on this one
        return exc
    return None


def _gathered(flag: bool) -> np.ndarray:
    """Every process's ``flag``, in process order."""
    return np.asarray(multihost_utils.process_allgather(np.array([flag]))).reshape(-1)


def _from_process_0(save_id: str) -> str:
    """Process 0's save id on every process."""
    raw = np.frombuffer(save_id.encode("ascii"), np.uint8)
    return bytes(np.asarray(multihost_utils.broadcast_one_to_all(raw))).decode("ascii")


__all__ = ["leaf_key", "read_tree", "restore", "save"]
