"""A DCP checkpoint directory as a :class:`ocf.format.source.Source`.

``torch.distributed.checkpoint.save`` writes a directory: ``.metadata`` (a
pickle of the index) and ``__<rank>_<n>.distcp`` data files. It opens by
reading and checking the index (:mod:`ocf.interop.dcp.metadata`, never an
unrestricted unpickle); its keys are DCP's own flattened keys
(``model.layer.weight``, ``optim.state.model.layer.weight.exp_avg``), its
tensors are assembled from their chunks by torch's reader
(:mod:`ocf.interop.dcp.reading`), and its non-tensor values (a step count, a
learning rate) are its metadata, as for a ``.pt`` file
(ocf.interop.pytorch.flatten: ``pytorch.values``, and ``pytorch.unread`` for what
is not read). DCP stores no checksums, so ``verify`` checks structure only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from math import prod
from typing import Any

import numpy as np

from ocf.format.errors import NotFoundError
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import Source, TensorSummary
from ocf.interop.dcp.metadata import METADATA_FILE, Tensor, read_index
from ocf.interop.dcp.reading import read_tensors, read_value, torch_metadata
from ocf.interop.pytorch.flatten import UNREAD_KEY, VALUES_KEY, NotAValueError, as_value
from ocf.interop.pytorch.tensors import to_numpy
from ocf.interop.pytorch.torch_needed import import_dcp

# What one dcp.load reads ahead of the tensor asked for (a read holds the tensors
# until one it did not read is asked for).
READ_AHEAD_BYTES = 64 << 20
READ_AHEAD_TENSORS = 1024
WHAT = "a DCP checkpoint (torch.distributed.checkpoint)"


class DcpSource(Source[TensorSummary]):
    """A ``torch.distributed.checkpoint`` directory as an :class:`ocf.format.source.Source`.

    Examples:
        >>> with ocf.open("run/step-100") as source:  # .metadata and __0_0.distcp
        ...     weight = source.read_tensor("model.layer.weight")
    """

    format_name = "DCP"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        del verify  # nothing to switch off: DCP stores no checksums
        self.path: str = os.fspath(path)
        self._torch = import_dcp(self.path, f"reading {WHAT}")
        self.index = read_index(self._torch, self.path)
        self._torch_metadata = torch_metadata(self._torch, self.index)
        self._metadata: dict[str, MetadataValue] | None = None
        self._keys = list(self.index.tensors)
        self._position = {key: i for i, key in enumerate(self._keys)}
        self._ahead: dict[str, Any] = {}  # tensors read ahead, by key
        stat = os.stat(os.path.join(self.path, METADATA_FILE))
        self._identity = (stat.st_size, stat.st_mtime_ns & 0xFFFFFFFF)

    def __iter__(self) -> Iterator[str]:
        return iter(self.index.tensors)

    def __len__(self) -> int:
        return len(self.index.tensors)

    def __contains__(self, key: object) -> bool:
        return key in self.index.tensors

    def entry(self, key: str) -> Tensor:
        """The checked index entry of tensor ``key``; NotFoundError if there is none."""
        found = self.index.tensors.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self.path, key=key)
        return found

    def __getitem__(self, key: str) -> TensorSummary:
        entry = self.entry(key)
        return TensorSummary(key, entry.dtype, entry.shape)

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        """The non-tensor values (read on first use) and what is not read."""
        if self._metadata is None:
            values: dict[str, MetadataValue] = {}
            unread = dict(self.index.unread)
            for key, item in self.index.values.items():
                try:
                    values[key] = as_value(self._torch,
                                           read_value(self._torch, self.path, key, item), 0)
                except NotAValueError as exc:
                    unread[key] = str(exc)
            self._metadata = {}
            if values:
                self._metadata[VALUES_KEY] = values
            if unread:
                self._metadata[UNREAD_KEY] = dict(unread)
        return self._metadata

    def _tensor(self, key: str) -> Any:
        """Tensor ``key``, read with the ones after it up to :data:`READ_AHEAD_BYTES`
        (one dcp.load for many small tensors), and kept until a key not read is asked."""
        found = self._ahead.get(key)
        if found is None:
            self._ahead = {}  # freed before the next ones are read
            self._ahead = read_tensors(self._torch, self.path, self._batch(key),
                                       self._torch_metadata)
            found = self._ahead[key]
        return found

    def _batch(self, key: str) -> dict[str, Tensor]:
        """``key`` and the tensors after it in order, up to READ_AHEAD_BYTES in all."""
        batch = {key: self.entry(key)}
        total = batch[key].dtype.itemsize * prod(batch[key].shape)
        for position in range(self._position[key] + 1, len(self._keys)):
            after = self._keys[position]
            entry = self.index.tensors[after]
            total += entry.dtype.itemsize * prod(entry.shape)
            if total > READ_AHEAD_BYTES or len(batch) >= READ_AHEAD_TENSORS:
                break
            batch[after] = entry
        return batch

    def read_tensor(self, key: str) -> np.ndarray:
        self.entry(key)
        return to_numpy(self._torch, self._tensor(key))

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        # Assembled whole by torch's reader once, then kept for the next pieces.
        flat = self._tensor(key).reshape(-1)[piece.begin:piece.end]
        return to_numpy(self._torch, flat).reshape(piece.shape)

    @property
    def identity(self) -> tuple[int, int]:
        return self._identity

    def close(self) -> None:
        self._ahead = {}
