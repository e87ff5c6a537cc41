"""Torch tensors straight from a checkpoint's file mapping (zero-copy loads).

A tensor stored uncompressed becomes a CPU tensor over a private
(copy-on-write, ``MAP_PRIVATE``) mapping of its shard file, made by
``torch.UntypedStorage.from_file``: no byte is copied, the page cache is
shared with every other reader, and writing to the tensor changes only
this process's copy of the touched pages, never the file. The OCF
reader's own mapping is read-only, and a torch tensor over it would crash
the process on the first in-place write; hence a mapping of our own.

Its chunks are checksummed over exactly the bytes the tensor shows (so a
file replaced between opening and mapping cannot slip through), and bool
tensors are checked to hold only 0 and 1 [R-DTYPE-002].

A copy happens instead when a tensor is compressed, stored in slices, or
empty; the bytes are then read into new memory that the tensor owns.
"""

from __future__ import annotations

from pathlib import Path

from ocf.format.checksum import crc32c
from ocf.format.errors import IntegrityError, InvalidError
from ocf.format.index.model import Block, TensorInfo
from ocf.format.reader import Reader
from ocf.torch._framework import torch
from ocf.torch.tensors import from_numpy, torch_dtype


class MappedTensors:
    """The tensors of an open :class:`ocf.Reader` as CPU torch tensors."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._storages: dict[int, torch.UntypedStorage] = {}

    def tensor(self, key: str) -> torch.Tensor:
        """The tensor ``key``: zero-copy when stored whole and uncompressed."""
        info = self.reader[key]
        dtype = torch_dtype(info.dtype, key)
        block = info.block
        if block is None or not block.compression.stores_raw or not self.reader.mappable \
                or block.raw_length == 0 or block.offset % dtype.itemsize:
            return from_numpy(self.reader.read_tensor(key), key)
        storage = self._storage(block)
        if self.reader.verify:
            self._verify(info, block, storage)
        tensor = _view(storage, dtype, block.offset // dtype.itemsize, info.shape)
        if dtype == torch.bool and bool((tensor.view(torch.uint8) > 1).any()):
            raise InvalidError("bool tensor holds bytes other than 0x00 and 0x01",
                               path=self.reader.path, key=key, requirement="R-DTYPE-002")
        return tensor

    def _storage(self, block: Block) -> torch.UntypedStorage:
        storage = self._storages.get(block.shard)
        if storage is None:
            shard = self.reader.index.shards[block.shard]
            path = self.reader.path if shard.path == "" else self.reader.path.parent / shard.path
            size = Path(path).stat().st_size if shard.path == "" else shard.length
            mapped = torch.UntypedStorage.from_file(str(path), shared=False, nbytes=size)
            assert isinstance(mapped, torch.UntypedStorage)
            storage = self._storages[block.shard] = mapped
        return storage

    def _verify(self, info: TensorInfo, block: Block, storage: torch.UntypedStorage) -> None:
        raw = _view(storage, torch.uint8, block.offset, (block.raw_length,)).numpy()
        for chunk in range(block.chunk_count):
            start, end = block.raw_range(chunk)
            crc = crc32c(raw[start:end].data)
            if crc != block.chunk_crcs[chunk]:
                raise IntegrityError(f"chunk {chunk} has CRC-32C {crc:#010x}, the index says "
                                     f"{block.chunk_crcs[chunk]:#010x}", path=self.reader.path,
                                     key=info.key, requirement="R-CRC-001")


def _view(storage: torch.UntypedStorage, dtype: torch.dtype, offset: int,
          shape: tuple[int, ...]) -> torch.Tensor:
    """A C-ordered tensor of ``shape`` over ``storage`` from element ``offset``."""
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, strides)
