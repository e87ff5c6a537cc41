"""NumPy ``.npz`` archives: read as a Source (:mod:`.source`), converted to OCF and
back (:mod:`.convert`), never with pickle."""

from __future__ import annotations

import os
from typing import Any

from ocf.format.storage.location import StorageOptions
from ocf.interop.base import Format
from ocf.interop.file_source import has_suffix
from ocf.interop.npz import convert
from ocf.interop.npz.source import NpzSource


class NpzFormat(Format):
    """A ZIP archive of ``.npy`` members, as ``np.savez`` writes it."""

    name = "npz"
    title = "npz"
    suffixes = (".npz",)
    checks = "CRC-32 of every member"

    def detect(self, path: str) -> bool:
        return has_suffix(path, ".npz")

    def open(self, path: str | os.PathLike[str], *, verify: bool = True,
             storage_options: StorageOptions | None = None) -> NpzSource:
        del storage_options  # a local file
        return NpzSource(path, verify=verify)

    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        convert.to_ocf(src, dst, **options)

    def from_ocf(self, src: str, dst: str) -> None:
        convert.from_ocf(src, dst)


NPZ = NpzFormat()
