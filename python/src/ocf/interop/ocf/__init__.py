"""OCF itself as a :class:`~ocf.interop.base.Format`: the format every other converts to.

An OCF checkpoint is a file starting with OCF's magic bytes or a directory
holding ``index.ocf`` (spec/format.md), opened by :class:`ocf.Reader`, which
is its Source; a URL (``s3://...``) is always OCF. Converting OCF to OCF
rewrites a checkpoint with other storage options (:mod:`.relayout`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE_MAGIC
from ocf.format.reader import Reader
from ocf.format.source import AnySource
from ocf.format.storage.location import StorageOptions
from ocf.interop.base import Format
from ocf.interop.ocf.relayout import relayout
from ocf.interop.text import format_size, format_table


def is_ocf_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an OCF file (by its magic bytes) or checkpoint directory."""
    target = Path(path)
    if target.is_dir():
        return (target / INDEX_FILE_NAME).is_file()
    if not target.is_file():  # opening a FIFO to peek at it would block
        return False
    try:
        with target.open("rb") as f:
            return f.read(len(PREAMBLE_MAGIC)) == PREAMBLE_MAGIC
    except OSError:
        return False


class OCFFormat(Format):
    """The Open Checkpoint Format."""

    name = "ocf"
    title = "OCF"
    suffixes = (".ocf",)
    checks = "CRC-32C of every chunk"

    def detect(self, path: str) -> bool:
        return is_ocf_checkpoint(path)

    def open(self, path: str | os.PathLike[str], *, verify: bool = True,
             storage_options: StorageOptions | None = None) -> Reader:
        return Reader(path, verify=verify, storage_options=storage_options)

    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        relayout(src, dst, **options)

    def from_ocf(self, src: str, dst: str) -> None:
        relayout(src, dst)

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        info = _reader(source)[key]
        return info.stored_length, info.codec_name

    def checked_bytes(self, source: AnySource, values: int) -> int:
        return sum(info.stored_length for info in _reader(source).values())

    def overview(self, source: AnySource) -> list[str]:
        reader = _reader(source)
        major, minor = reader.format_version
        lines = [f"checkpoint: {reader.path}",
                 f"format {major}.{minor}, written by {reader.index.writer or 'unknown'}, "
                 f"{len(reader)} tensors in {len(reader.index.shards)} shard(s)"]
        lines += [f"metadata {key} = {value!r}" for key, value in reader.metadata.items()]
        rows = [("KEY", "DTYPE", "SHAPE", "STORED", "CODEC")]
        for key, info in reader.items():
            sliced = f" ({len(info.slices)} slices)" if info.slices else ""
            rows.append((key, info.dtype.name, str(list(info.shape)),
                         format_size(info.stored_length), info.codec_name + sliced))
        return [*lines, format_table(rows)]


def _reader(source: AnySource) -> Reader:
    assert isinstance(source, Reader), "an OCF checkpoint opens as a Reader"
    return source


OCF = OCFFormat()
