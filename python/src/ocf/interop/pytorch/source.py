"""A ``torch.save`` file (``.pt``, ``.pth``, ``.bin``) as a :class:`ocf.format.source.Source`.

``ocf.open``, ``ocf.load_file`` and every ``ocf`` command read it through
this class (the format's registry entry, ocf.interop.pytorch, opens it). The
file is loaded once, when it opens, by :func:`ocf.interop.pytorch.loading.load`
(``torch.load(weights_only=True)``, memory-mapped, after checking the
archive) and flattened by :mod:`ocf.interop.pytorch.flatten`: its tensors
are this Source's keys, its plain values and what could not be read are its
metadata. Reading a tensor copies it out of the mapped file. torch.save
stores no checksums that torch.load checks, so ``verify`` checks structure only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ocf.format.errors import NotFoundError
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import Source, TensorSummary
from ocf.interop.pytorch.flatten import flatten
from ocf.interop.pytorch.loading import load
from ocf.interop.pytorch.tensors import ocf_dtype, to_numpy


class PyTorchSource(Source[TensorSummary]):
    """A ``torch.save`` file as an :class:`ocf.format.source.Source`.

    Examples:
        >>> with ocf.open("checkpoints/epoch=3-step=400.ckpt") as source:  # Lightning's
        ...     source.metadata["pytorch.values"]["epoch"]  # a plain value of the dict
    """

    format_name = "PyTorch"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        del verify  # nothing to switch off: torch.load checks what it checks
        self.path: str = os.fspath(path)
        self._torch, loaded = load(self.path)
        self.flat = flatten(self._torch, loaded, self.path)
        stat = os.stat(self.path)
        self._identity = (stat.st_size, stat.st_mtime_ns & 0xFFFFFFFF)

    def __iter__(self) -> Iterator[str]:
        return iter(self.flat.tensors)

    def __len__(self) -> int:
        return len(self.flat.tensors)

    def __contains__(self, key: object) -> bool:
        return key in self.flat.tensors

    def tensor(self, key: str) -> Any:
        """The torch tensor ``key`` (a view of the mapped file); NotFoundError if none."""
        found = self.flat.tensors.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self.path, key=key)
        return found

    def __getitem__(self, key: str) -> TensorSummary:
        tensor = self.tensor(key)
        row = ocf_dtype(tensor.dtype)
        assert row is not None, "flatten keeps only tensors of an OCF dtype"
        return TensorSummary(key, row, tuple(tensor.shape))

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        return self.flat.metadata

    def read_tensor(self, key: str) -> np.ndarray:
        return to_numpy(self._torch, self.tensor(key))

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        flat = self.tensor(key).reshape(-1)[piece.begin:piece.end]
        return to_numpy(self._torch, flat).reshape(piece.shape)

    @property
    def identity(self) -> tuple[int, int]:
        return self._identity

    def close(self) -> None:
        # The tensors are views of the mapped file: dropping them unmaps it.
        self.flat.tensors.clear()
