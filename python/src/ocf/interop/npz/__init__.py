"""NumPy ``.npz`` archives: read as a Source (:mod:`.source`), converted to OCF and
back (:mod:`.convert`), never with pickle."""

from __future__ import annotations

from ocf.interop.file_source import FileFormat
from ocf.interop.npz import convert
from ocf.interop.npz.source import NpzSource


class NpzFormat(FileFormat):
    """A ZIP archive of ``.npy`` members, as ``np.savez`` writes it."""

    name = "npz"
    title = "npz"
    suffixes = (".npz",)
    checks = "CRC-32 of every member"
    source = NpzSource
    converter = convert


NPZ = NpzFormat()
