"""Multi-writer checkpoints on torch.distributed (spec/parts.md).

:func:`save` is collective: every rank of the process group writes its part
of one checkpoint into a directory that all ranks see (the tensors it owns
whole, and its boxes of partitioned tensors as :class:`ocf.distributed.parts.LocalBox`),
rank 0 merges once every rank reports its part written, and every rank
returns only when the checkpoint is committed, or raises the same error
when it is not. No tensor travels between ranks; only a save id, status
records and the part indexes do, through the group's collectives, so the
same code runs on gloo (CPU) and NCCL. The part indexes go to rank 0
in-band (spec/parts.md, [R-PART-009]): no part file is written, read back
or deleted.

:func:`load` is not collective: each rank reads the regions it owns,
whatever partitioning wrote them, reading only the stored chunks that hold
them (:meth:`ocf.Reader.get_slice`), and says how many bytes that took.

:func:`save_numbered` saves ``<directory>/ckpt-<n>`` and lets rank 0 record
it in ``checkpoint.json`` (:class:`ocf.CheckpointManager`), so that
:func:`ocf.latest_checkpoint` names it only once it is committed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from ocf.distributed.parts import LocalBox, merge_parts, new_save_id, seal_part
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILES
from ocf.format.argument_order import check_object_then_path
from ocf.format.errors import ERROR_CLASSES, Category, InvalidError, OCFError
from ocf.format.object_graph import Node
from ocf.format.reader import Reader
from ocf.format.storage.location import join_path, url_scheme
from ocf.objects.manager import CheckpointManager
from ocf.objects.recovery import RecoveryWarning
from ocf.torch.tensors import from_numpy, ocf_dtype, to_numpy, torch_dtype

__all__ = ["Loaded", "SaveError", "load", "load_into", "region_of", "save", "save_numbered"]

Region = Sequence[slice] | slice | None
_T = TypeVar("_T")
# What a rank reports of its step: None when it succeeded, else the error's
# class name, category (None outside OCF's), message, path, key and requirement.
_Status = tuple[str, str | None, str, str | None, str | None, str | None] | None


class SaveError(RuntimeError):
    """A collective save failed for a reason outside OCF's error categories: the process
    group broke (a rank crashed or timed out), or a rank failed with an error that is not
    an ``ocf.OCFError`` (an OSError of its file system). Neither is bad input nor a
    misuse, which raise ``ocf.OCFError`` subclasses here as everywhere.

    Examples:
        >>> try:
        ...     ocf.distributed.torch.save({"table": shard}, "ckpt")
        ... except ocf.distributed.torch.SaveError as error:
        ...     print(error)  # the same error on every rank
    """


@dataclass(frozen=True)
class Loaded:
    """What :func:`load` read on this rank.

    Examples:
        >>> loaded = ocf.distributed.torch.load("ckpt", {"table": region})
        >>> print(loaded.tensors["table"].shape, loaded.bytes_read / loaded.bytes_needed)
    """

    tensors: dict[str, torch.Tensor]
    bytes_read: int  # stored bytes read (whole chunks, for their checksums)
    bytes_needed: int  # bytes of the regions asked for


def save(tensors: Mapping[str, object], path: str | os.PathLike[str], *,
         metadata: Mapping[str, object] | None = None,
         object_graph: Sequence[Node] | None = None,
         group: dist.ProcessGroup | None = None, **options: object) -> None:
    """Write this rank's ``tensors`` as its part of the checkpoint at ``path``.

    Call on every rank of ``group`` with the same ``path``. Values are
    tensors or arrays (stored whole, owned by this rank alone),
    :class:`ocf.distributed.parts.LocalBox` boxes of tensors partitioned across ranks,
    or DTensors (FSDP2's parameters and optimizer states, tensor parallel
    shards: each rank stores its local shard as a box of the global tensor;
    of replicas, only the rank at coordinate 0 of the replicated mesh
    dimensions stores one; a rank whose shard an uneven split leaves empty
    stores nothing of it).
    Rank 0's ``metadata`` and ``object_graph`` are stored; other ranks' are
    ignored. ``options`` go to the writer (compression, chunk_size, the largest
    chunk, :data:`RESHARD_CHUNK_SIZE` unless given, tile_bytes,
    :data:`RESHARD_TILES` unless given: tensors of rank 2 or more stored in
    strips, each tensor in chunks of its own size, so that loads on another
    partitioning read little more than they need; an int stores a grid of tiles
    of that size in chunks of chunk_size; see
    :class:`ocf.distributed.parts.PartWriter`).
    Raises on every rank if any rank fails to write its part or the merge
    refuses the parts; the checkpoint is then not committed.

    Examples:
        >>> rows = LocalBox(table_rows, start=(4 * rank, 0), shape=(8, 5))
        >>> ocf.distributed.torch.save({"table": rows, "step": step}, "ckpt")  # collective
    """
    check_object_then_path("ocf.distributed.torch.save", tensors, path, first_name="tensors")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    options.setdefault("chunk_size", RESHARD_CHUNK_SIZE)
    options.setdefault("tile_bytes", RESHARD_TILES)
    save_id = _from_rank_0(new_save_id() if rank == 0 else None, group)
    assert isinstance(save_id, str)

    def write() -> bytes:
        arrays = {key: _numpy(key, value) for key, value in tensors.items()}
        return seal_part(path, {key: array for key, array in arrays.items()
                                if array is not None},
                         part=rank, parts=world, save_id=save_id,
                         metadata=metadata if rank == 0 else None,
                         object_graph=object_graph if rank == 0 else None, **options)

    def merge(part_indexes: list[bytes | None]) -> None:
        merge_parts(path, save_id=save_id, parts=world, part_indexes=part_indexes,
                    storage_options=options.get("storage_options"))  # type: ignore[arg-type]

    _collective(write, merge, group)


def save_numbered(tensors: Mapping[str, object], directory: str | os.PathLike[str],
                  number: int, *, max_to_keep: int | None = 5,
                  group: dist.ProcessGroup | None = None, **options: Any) -> str:
    """:func:`save` to ``<directory>/ckpt-<number>``, then record it as the latest.

    Rank 0 records the committed checkpoint in ``<directory>/checkpoint.json``
    and deletes the ones beyond ``max_to_keep`` (:class:`ocf.CheckpointManager`);
    a save that fails leaves the previous latest checkpoint in place.
    ``directory`` may be a URL of an object store (``s3://bucket/run``), with
    ``storage_options`` among ``options``.

    Examples:
        >>> path = ocf.distributed.torch.save_numbered({"table": rows}, "training", step)
    """
    check_object_then_path("ocf.distributed.torch.save_numbered", tensors, directory,
                           first_name="tensors")
    path = join_path(directory, f"ckpt-{number}")
    save(tensors, path, group=group, **options)
    store = options.get("storage_options")

    def record() -> None:
        with warnings.catch_warnings():
            # The first save of a run finds its own checkpoint beside no state file yet:
            # no recovery worth a warning.
            warnings.simplefilter("ignore", RecoveryWarning)
            manager = CheckpointManager(_Committed(path), directory,
                                        max_to_keep=max_to_keep, storage_options=store)
        manager.save(checkpoint_number=number)

    _collective(lambda: None, lambda _: record(), group)
    return path


def load(path: str | os.PathLike[str], wanted: Mapping[str, Region], *,
         verify: bool = True, storage_options: Mapping[str, Any] | None = None) -> Loaded:
    """Read on this rank the region of each key that it owns.

    ``wanted`` maps a key to a region (a slice, or one slice per leading
    dimension) or to None for the whole tensor. Only the stored chunks that
    overlap a region are read, whatever partitioning saved it. ``path`` may
    be a URL of an object store (``storage_options`` go to fsspec).

    Examples:
        >>> region = ocf.distributed.torch.region_of((8, 5), part=rank, parts=world, axis=1)
        >>> loaded = ocf.distributed.torch.load("ckpt", {"table": region})
    """
    out: dict[str, torch.Tensor] = {}
    needed = 0
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        for key, region in wanted.items():
            array = reader.read_tensor(key) if region is None else \
                reader.get_slice(key, tuple(region) if isinstance(region, Sequence) else region)
            needed += array.nbytes
            out[key] = from_numpy(array, key)
        return Loaded(out, reader.bytes_read, needed)


def load_into(state: Mapping[str, torch.Tensor], path: str | os.PathLike[str], *,
              verify: bool = True, storage_options: Mapping[str, Any] | None = None) -> int:
    """Fill each tensor of ``state`` in place from the checkpoint at ``path``: a DTensor
    receives the region of the global tensor its local shard covers, whatever mesh and
    placements saved it; a plain tensor the whole tensor. Shapes and dtypes are checked
    for every key before the first value is copied. Returns the stored bytes read.

    Examples:
        >>> state = {"w": distribute_tensor(torch.empty(8, 4), mesh, [Shard(1)])}
        >>> bytes_read = ocf.distributed.torch.load_into(state, "run/ckpt-3")
    """
    check_object_then_path("ocf.distributed.torch.load_into", state, path)
    with Reader(path, verify=verify, storage_options=storage_options) as reader:
        plan = [(key, target, _target_region(key, target)) for key, target in state.items()]
        for key, target, _ in plan:
            _check_target(reader, key, target)
        for key, target, region in plan:
            local = target.to_local() if isinstance(target, DTensor) else target
            if region is None:  # a DTensor shard that holds no element on this rank
                continue
            read_region_into(reader, key, region, local)
        return reader.bytes_read


def read_region_into(reader: Reader, key: str, region: tuple[slice, ...],
                     target: torch.Tensor) -> None:
    """Fill ``target``, a tensor of the shape of ``region`` of tensor ``key``, from
    ``reader``: straight from the stored bytes into a CPU tensor's memory, without an
    array of the region in between; through one for a tensor on another device or
    of another dtype (converted as ``copy_`` converts)."""
    plain = target.detach()
    stored = reader[key].dtype
    if plain.device.type == "cpu" and not plain.is_conj() and not plain.is_neg() and \
            not stored.is_bytes and torch_dtype(stored, key) == plain.dtype:
        reader.read_slice_into(key, region, to_numpy(plain, key))
    else:
        plain.copy_(from_numpy(reader.get_slice(key, region), key).reshape(plain.shape))


def region_of(shape: Sequence[int], part: int, parts: int, axis: int = 0) -> tuple[slice, ...]:
    """The box of ``shape`` that part ``part`` of ``parts`` owns when ``axis`` is split
    into near-equal runs (the first ``shape[axis] % parts`` runs one longer).

    Examples:
        >>> ocf.distributed.torch.region_of((10, 4), part=1, parts=3)
        (slice(4, 7, None), slice(None, None, None))
    """
    size = shape[axis]
    base, extra = divmod(size, parts)
    start = part * base + min(part, extra)
    stop = start + base + (1 if part < extra else 0)
    return tuple(slice(start, stop) if d == axis else slice(None) for d in range(len(shape)))


# -- collectives -----------------------------------------------------------------------------


def _collective(step: Callable[[], _T], on_rank_0: Callable[[list[_T | None]], None],
                group: dist.ProcessGroup | None) -> None:
    """Run ``step`` on every rank; if all succeed, ``on_rank_0`` on rank 0 with what each
    rank's step returned (ranks in order), gathered to it; then every rank returns, or
    raises the first failure, the same on every rank."""
    rank = dist.get_rank(group)
    status, value = _attempt(step, group)
    received: list[Any] | None = [None] * dist.get_world_size(group) if rank == 0 else None
    try:
        # One collective is the barrier and carries the results: a rank that died breaks it.
        dist.gather_object((status, value), received, group_dst=0, group=group)
        failed: _Status = None
        if received is not None:
            failed = next((s for s, _ in received if s is not None), None)
            if failed is None:
                failed, _ = _attempt(lambda: on_rank_0([v for _, v in received]), group)
        outcome = _from_rank_0(failed, group)
    except RuntimeError as exc:  # a rank died or timed out: the group is broken
        raise SaveError(f"the process group failed during a collective save (a rank crashed "
                        f"or timed out); this rank's part was "
                        f"{'written' if status is None else 'not written'}: {exc}") from exc
    if outcome is not None:
        raise _error(outcome)


def _attempt(step: Callable[[], _T], group: dist.ProcessGroup | None
             ) -> tuple[_Status, _T | None]:
    """Run ``step``; what it returned, or what went wrong, as plain values every rank
    can receive.

    A failure names the rank in ``group``, the numbering its callers use."""
    try:
        return None, step()
    except OCFError as exc:
        return (type(exc).__name__, None if exc.category is None else exc.category.value,
                exc.detail, exc.path, exc.key, exc.requirement), None
    except Exception as exc:  # the rank's environment (disk full, ...): still reported
        rank = dist.get_rank(group)
        return (type(exc).__name__, None, f"rank {rank}: {exc}", None, None, None), None


def _error(status: tuple[str, str | None, str, str | None, str | None, str | None]
           ) -> Exception:
    name, category, detail, path, key, requirement = status
    if category is None:
        return SaveError(f"{name}: {detail}")
    return ERROR_CLASSES[Category(category)](detail, path=path, key=key,
                                             requirement=requirement)


def _from_rank_0(value: object, group: dist.ProcessGroup | None) -> Any:
    """Rank 0's ``value`` on every rank."""
    box = [value]
    dist.broadcast_object_list(box, group_src=0, group=group)
    return box[0]


def _numpy(key: str, value: object) -> object:
    """Torch tensors (whole or as a LocalBox's value) as NumPy arrays, sharing memory; a
    DTensor as the LocalBox of the global tensor this rank holds, or None when another
    rank holds the same replica, or when this rank's shard holds no element (the other
    ranks' shards hold them all). A DTensor without elements is stored whole, once: by
    the rank at coordinate 0 of every mesh dimension."""
    if isinstance(value, DTensor):
        if value.numel() == 0:
            _local_box(key, value)  # refuses what it refuses for any DTensor
            if not _first_in_mesh(value):
                return None
            return np.empty(tuple(value.shape), to_numpy(value.to_local(), key).dtype)
        box = _local_box(key, value)
        if box is None or not _writes_replica(value):
            return None
        start, _ = box
        return LocalBox(to_numpy(value.to_local(), key), start, tuple(value.shape))
    if isinstance(value, LocalBox) and isinstance(value.value, torch.Tensor):
        return LocalBox(to_numpy(value.value, key), value.start, value.shape)
    if isinstance(value, torch.Tensor):
        return to_numpy(value, key)
    if isinstance(value, (LocalBox, np.ndarray)):
        return value
    return np.asarray(value)


def _normalized(path: str) -> str:
    """A local path made absolute; a URL as it is (abspath would make it a local path)."""
    return path if url_scheme(path) is not None else os.path.abspath(path)


class _Committed:
    """A :class:`ocf.objects.manager.Saveable` for a checkpoint that :func:`save` committed."""

    def __init__(self, path: str) -> None:
        self._path = path

    @property
    def save_counter(self) -> int:
        return 0

    def write(self, path: str, storage_options: object = None) -> str:
        # storage_options: the manager passes them on; save() already used them.
        if _normalized(path) != _normalized(self._path):
            raise InvalidError(f"checkpoint {self._path!r} was saved, {path!r} asked for",
                               path=path)
        return path

    def save(self, prefix: str) -> str:
        raise InvalidError("save_numbered gives the number", path=prefix)

    def restore(self, path: str) -> object:
        raise InvalidError("restore with ocf.distributed.torch.load", path=path)


# -- DTensors --------------------------------------------------------------------------------


def _local_box(key: str, value: DTensor) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Where this rank's local shard starts in the global tensor, and its extent; None
    for a shard without elements (an uneven split leaves some ranks none)."""
    if any(p.is_partial() for p in value.placements):
        raise InvalidError("a DTensor with Partial placements holds no values of its own "
                           "until reduced; redistribute it to Shard or Replicate first",
                           key=key)
    chunks = value.__create_chunk_list__()  # type: ignore[no-untyped-call]
    if len(chunks) != 1:
        raise InvalidError(f"a DTensor whose local tensor is {len(chunks)} boxes is not "
                           "supported", key=key)
    start, extent = tuple(chunks[0].offsets), tuple(chunks[0].sizes)
    return None if 0 in extent else (start, extent)


def _writes_replica(value: DTensor) -> bool:
    """Whether this rank stores its shard: every rank holding the same replica has the
    same coordinate on the sharded mesh dimensions; the one at 0 on the replicated ones
    stores it."""
    coordinate = value.device_mesh.get_coordinate()
    if coordinate is None:  # this rank is not in the tensor's mesh
        return False
    return all(c == 0 for c, p in zip(coordinate, value.placements) if p.is_replicate())


def _first_in_mesh(value: DTensor) -> bool:
    """Whether this rank is at coordinate 0 of every dimension of the tensor's mesh."""
    coordinate = value.device_mesh.get_coordinate()
    return coordinate is not None and not any(coordinate)


def _target_region(key: str, target: object) -> tuple[slice, ...] | None:
    """The region of the stored tensor that ``target`` receives (() for all of it)."""
    if isinstance(target, DTensor):
        box = _local_box(key, target)
        if box is None:
            return None
        return tuple(slice(b, b + e) for b, e in zip(*box))
    if isinstance(target, torch.Tensor):
        return ()
    raise InvalidError(f"load_into fills tensors and DTensors, not {type(target).__name__}",
                       key=key)


def _check_target(reader: Reader, key: str, target: torch.Tensor) -> None:
    info = reader[key]
    if tuple(target.shape) != tuple(info.shape):
        raise InvalidError(f"the checkpoint's tensor has shape {list(info.shape)}, the "
                           f"target {list(target.shape)}", path=reader.path, key=key)
    if ocf_dtype(target.dtype, key).name != info.dtype.name:
        raise InvalidError(f"the checkpoint's tensor has dtype {info.dtype.name}, the target "
                           f"{target.dtype}", path=reader.path, key=key)
