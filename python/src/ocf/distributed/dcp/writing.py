"""A ``torch.distributed.checkpoint`` storage writer that saves one OCF checkpoint.

``dcp.save(state_dict, storage_writer=StorageWriter(path))`` runs DCP's own
planning (FSDP2 and DTensor state dicts, deduplicated replicas) and hands
each rank the items it owns. Each rank writes them as its part of a
multi-writer OCF save (spec/parts.md): a tensor item stored whole, a shard
item as the box of the global tensor it holds. No part index is written to
a file: each rank makes its shards durable and hands its part index to the
coordinator in its write results, which DCP gathers for ``finish``
(spec/parts.md, [R-PART-009]). The coordinator's part, part 0, carries the
state dict's non-tensor values as metadata (:mod:`ocf.distributed.dcp.values`:
no pickle): it is sealed with the others when the coordinator holds every
such value, else once the other ranks' values arrive. The coordinator then
merges the parts, which commits the checkpoint. A save that fails anywhere
publishes nothing, and the previous checkpoint at the path stays the
committed one.
"""

from __future__ import annotations

import dataclasses
import io
import os
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import StorageWriter as _DCPStorageWriter
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from ocf.distributed.dcp.checkpoint_path import CheckpointPath
from ocf.distributed.dcp.values import METADATA_KEY, from_saved_bytes
from ocf.distributed.parts import PartWriter, merge_parts, new_save_id
from ocf.distributed.parts.writing import TileBytes
from ocf.distributed.resharding import RESHARD_CHUNK_SIZE, RESHARD_TILES
from ocf.format.errors import InvalidError
from ocf.format.storage.location import StorageOptions
from ocf.torch.tensors import to_numpy


@dataclasses.dataclass(frozen=True)
class _Assignment:
    """What the coordinator tells each rank: the save and the part it writes."""

    save_id: str
    part: int
    parts: int
    # For part 0: whether every non-tensor value of the save is one of its items, so
    # that it knows its metadata while it writes and is published with the others.
    holds_values: bool = False


@dataclasses.dataclass(frozen=True)
class _Value:
    """A non-tensor value a rank wrote, on its way to the coordinator's metadata."""

    value: object


@dataclasses.dataclass(frozen=True)
class _PartIndex:
    """A rank's sealed part index, on its way to the coordinator's merge [R-PART-009]."""

    number: int
    data: bytes


# The name of the extra result that carries a part index: not a key of the state dict,
# and never read by DCP, which hands the results to finish() alone.
_PART_INDEX_FQN = "ocf.part-index"


class StorageWriter(CheckpointPath, _DCPStorageWriter):
    """Saves a DCP state dict as one OCF checkpoint at ``path`` (a directory or URL).

    Examples:
        >>> import torch.distributed.checkpoint as dcp
        >>> from ocf.distributed.dcp import StorageWriter
        >>> dcp.save({"model": model.state_dict()}, storage_writer=StorageWriter("run/ckpt-100"))

    ``compression``, ``chunk_size`` and ``tile_bytes`` are those of
    :func:`ocf.distributed.torch.save` (small chunks and tiles by default, so
    that a load on another mesh reads little more than it needs);
    ``storage_options`` go to fsspec for a URL.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 compression: str | None = None, chunk_size: int = RESHARD_CHUNK_SIZE,
                 tile_bytes: TileBytes = RESHARD_TILES,
                 storage_options: StorageOptions | None = None) -> None:
        _DCPStorageWriter.__init__(self)
        CheckpointPath.__init__(self, path)
        self._options: dict[str, Any] = {"compression": compression, "chunk_size": chunk_size,
                                          "tile_bytes": tile_bytes,
                                          "storage_options": storage_options}
        self._rank = 0
        self._own_part: PartWriter | None = None
        self._part_0: bytes | None = None
        self._assignment: _Assignment | None = None

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        self.take_checkpoint_id(checkpoint_id)
        self._discard_own_part()
        self._assignment, self._part_0 = None, None

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self._rank = int(kwargs.get("rank", 0))
        single = not dist.is_available() or not dist.is_initialized() or \
            dist.get_world_size() == 1
        if kwargs.get("use_collectives", True) is False and not single:
            raise InvalidError("an OCF checkpoint written by several ranks needs DCP's "
                               "collectives (use_collectives=True): the parts are merged "
                               "into one index", path=self.path)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        """Give every rank the save id and its part number; the coordinator's is 0, since
        part 0 carries the metadata [R-PART-005]."""
        save_id, count = new_save_id(), len(plans)
        numbers = list(range(count))
        numbers[0], numbers[self._rank] = numbers[self._rank], numbers[0]
        values_elsewhere = any(item.type == WriteItemType.BYTE_IO
                               for rank, plan in enumerate(plans) if rank != self._rank
                               for item in plan.items)
        return [dataclasses.replace(plan, storage_data=_Assignment(
                    save_id, number, count, holds_values=not values_elsewhere))
                for plan, number in zip(plans, numbers)]

    def write_data(self, plan: SavePlan, planner: SavePlanner
                   ) -> Future[list[WriteResult]]:
        """Write this rank's items as its part: its shards made durable, its part index
        returned with the results, which DCP gathers to the coordinator [R-PART-009]. The
        coordinator keeps its part for :meth:`finish`."""
        assignment = plan.storage_data
        if not isinstance(assignment, _Assignment) or self.path is None:
            raise InvalidError("the storage writer was not set up by dcp.save (no path or "
                               "part assignment)", path=self.path)
        writer = PartWriter(self.path, part=assignment.part, parts=assignment.parts,
                            save_id=assignment.save_id, **self._options)
        try:
            results = [self._write_item(writer, item, planner) for item in plan.items]
        except BaseException:
            writer.abort()
            raise
        self._assignment = assignment
        if assignment.part != 0:
            results.append(_carrying(writer.seal(), assignment.part))  # aborts if it fails
        elif assignment.holds_values:
            # Part 0 knows all its metadata: sealed now, while the other ranks seal
            # theirs, and finish() only merges.
            self._part_0 = _sealed_part_0(writer, [results])
        else:
            # Its metadata comes with the other ranks' results: its data is made durable
            # now, and finish() adds the metadata and seals it.
            try:
                writer.sync_data()
            except BaseException:
                writer.abort()
                raise
            self._own_part = writer
        done: Future[list[WriteResult]] = Future()
        done.set_result(results)
        return done

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        """On the coordinator, once every rank wrote its part: seal part 0 with the
        non-tensor values of every rank as metadata, unless it is sealed already, then
        merge the part indexes the results carry (the commit)."""
        writer, assignment, part_0 = self._own_part, self._assignment, self._part_0
        if assignment is None or assignment.part != 0 or self.path is None:
            raise InvalidError("finish() ran on a rank that did not write part 0",
                               path=self.path)
        self._own_part, self._part_0 = None, None
        if writer is not None:
            part_0 = _sealed_part_0(writer, results)
        received: list[bytes | None] = [None] * assignment.parts
        received[0] = part_0
        for result in (r for rank_results in results for r in rank_results):
            carried = result.storage_data
            if isinstance(carried, _PartIndex) and 0 < carried.number < assignment.parts:
                received[carried.number] = carried.data
        merge_parts(self.path, save_id=assignment.save_id, parts=assignment.parts,
                    part_indexes=received, storage_options=self._options["storage_options"])

    def _write_item(self, writer: PartWriter, item: WriteItem,
                    planner: SavePlanner) -> WriteResult:
        key = item.index.fqn
        data = planner.resolve_data(item)
        if item.type == WriteItemType.BYTE_IO:
            if not isinstance(data, io.BytesIO):
                raise InvalidError("DCP gave no bytes for a non-tensor value", key=key)
            value = from_saved_bytes(key, data)
            return WriteResult(index=item.index, size_in_bytes=len(data.getbuffer()),
                               storage_data=_Value(value))
        if not isinstance(data, torch.Tensor) or item.tensor_data is None:
            raise InvalidError("DCP gave no tensor for a tensor item", key=key)
        array = to_numpy(data, key)
        chunk, shape = item.tensor_data.chunk, tuple(item.tensor_data.size)
        if tuple(chunk.sizes) == shape and not any(chunk.offsets):
            writer.write(key, array)
        else:
            writer.write_slice(key, array, tuple(chunk.offsets), shape)
        return WriteResult(index=item.index, size_in_bytes=array.nbytes, storage_data=None)

    def _discard_own_part(self) -> None:
        if self._own_part is not None:
            self._own_part.abort()
            self._own_part = None


def _sealed_part_0(writer: PartWriter, results: list[list[WriteResult]]) -> bytes:
    """Seal part 0 with the non-tensor values of every rank's results as its metadata
    (ranks in order), or abort it."""
    values = {result.index.fqn: result.storage_data.value
              for rank_results in results for result in rank_results
              if isinstance(result.storage_data, _Value)}
    try:
        writer.set_metadata({METADATA_KEY: {"values": values}})
    except BaseException:
        writer.abort()
        raise
    return writer.seal()  # aborts if it fails


def _carrying(part_index: bytes, number: int) -> WriteResult:
    """A result that carries a rank's part index to the coordinator, beside its items'
    (an extra one: a rank may have no item to write)."""
    return WriteResult(index=MetadataIndex(_PART_INDEX_FQN), size_in_bytes=len(part_index),
                       storage_data=_PartIndex(number, part_index))
