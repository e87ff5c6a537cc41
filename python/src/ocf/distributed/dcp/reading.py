"""A ``torch.distributed.checkpoint`` storage reader over any OCF checkpoint.

``dcp.load(state_dict, storage_reader=StorageReader(path))`` fills a state
dict of any sharding (FSDP2, DTensor on any mesh, plain tensors) from an OCF
checkpoint, whether :class:`ocf.distributed.dcp.StorageWriter` wrote it or
any other OCF writer did. Every tensor is offered to DCP as one chunk, the
whole tensor: DCP then asks each rank for the regions its shards cover, and
the reader reads only the stored chunks that meet them
(:meth:`ocf.Reader.get_slice`), whatever partitioning saved the tensor.
Non-tensor values come from the checkpoint's metadata
(:mod:`ocf.distributed.dcp.values`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.storage import StorageReader as _DCPStorageReader
from torch.futures import Future

from ocf.distributed.dcp.checkpoint_path import CheckpointPath
from ocf.distributed.dcp.values import METADATA_KEY, to_saved_bytes
from ocf.distributed.torch import read_region_into
from ocf.format.errors import InvalidError, NotFoundError
from ocf.format.index.model import TensorInfo
from ocf.format.reader import Reader
from ocf.format.storage.location import StorageOptions
from ocf.torch.tensors import torch_dtype


class StorageReader(CheckpointPath, _DCPStorageReader):
    """Loads a DCP state dict from the OCF checkpoint at ``path``, reading only the
    bytes each rank's shards need; every chunk read is checked against its CRC-32C
    unless ``verify=False``.

    Examples:
        >>> import torch.distributed.checkpoint as dcp
        >>> from ocf.distributed.dcp import StorageReader
        >>> state = {"model": model.state_dict()}
        >>> dcp.load(state, storage_reader=StorageReader("run/ckpt-100"))

    :attr:`bytes_read` counts the stored bytes this rank read, for comparison
    with the bytes its shards hold.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, verify: bool = True,
                 storage_options: StorageOptions | None = None) -> None:
        _DCPStorageReader.__init__(self)
        CheckpointPath.__init__(self, path)
        self.verify = verify
        self.storage_options = storage_options
        self.bytes_read = 0

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        self.take_checkpoint_id(checkpoint_id)
        self.bytes_read = 0

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        """Every tensor as one whole chunk; every stored non-tensor value as bytes."""
        with self._open() as reader:
            entries: dict[str, TensorStorageMetadata | BytesStorageMetadata] = {
                key: _tensor_metadata(reader[key]) for key in reader}
            for key in _values(reader):
                if key in entries:
                    raise InvalidError("a key names both a tensor and a non-tensor value",
                                       path=self.path, key=key)
                entries[key] = BytesStorageMetadata()
        return Metadata(state_dict_metadata=entries)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any,
                              **kwargs: Any) -> None:
        pass

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        """Read every item of this rank's plan into the tensors the planner resolves."""
        with self._open() as reader:
            values = _values(reader)
            for item in plan.items:
                if item.type == LoadItemType.BYTE_IO:
                    key = item.storage_index.fqn
                    if key not in values:
                        raise NotFoundError("no stored value", path=self.path, key=key)
                    planner.load_bytes(item, to_saved_bytes(values[key]))
                else:
                    self._read_tensor(reader, item, planner)
            self.bytes_read += reader.bytes_read
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _read_tensor(self, reader: Reader, item: ReadItem, planner: LoadPlanner) -> None:
        key = item.storage_index.fqn
        origin = item.storage_index.offset or torch.Size([0] * len(item.lengths))
        region = tuple(slice(o + s, o + s + n)
                       for o, s, n in zip(origin, item.storage_offsets, item.lengths))
        target = planner.resolve_tensor(item).detach()
        shape = reader[key].shape
        stored = tuple(len(range(*s.indices(n))) for s, n in zip(region, shape))
        if len(region) != len(shape) or tuple(target.shape) != stored:
            raise InvalidError(f"DCP asked for a region of shape {list(target.shape)}; the "
                               f"checkpoint's region has shape {list(stored)}",
                               path=self.path, key=key)
        read_region_into(reader, key, region, target)
        planner.commit_tensor(item, target)

    def _open(self) -> Reader:
        if self.path is None:
            raise InvalidError("the storage reader has no checkpoint path (give one, or a "
                               "checkpoint_id to dcp.load)")
        return Reader(self.path, verify=self.verify, storage_options=self.storage_options)


def _tensor_metadata(info: TensorInfo) -> TensorStorageMetadata:
    shape = torch.Size(info.shape)
    return TensorStorageMetadata(
        properties=TensorProperties(dtype=torch_dtype(info.dtype, info.key)),
        size=shape,
        chunks=[ChunkStorageMetadata(offsets=torch.Size([0] * len(shape)), sizes=shape)])


def _values(reader: Reader) -> Mapping[str, object]:
    """The non-tensor values stored by :class:`ocf.distributed.dcp.StorageWriter`."""
    stored = reader.metadata.get(METADATA_KEY)
    if stored is None:
        return {}
    values = stored.get("values") if isinstance(stored, dict) else None
    if not isinstance(values, dict):
        raise InvalidError(f"metadata {METADATA_KEY!r} holds no map 'values'",
                           path=reader.path,
                           requirement="R-META-001")
    return values
