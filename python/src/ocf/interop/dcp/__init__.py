"""PyTorch Distributed Checkpoint (DCP) directories: ``.metadata`` and
``__<rank>_<n>.distcp`` files. The index is unpickled with an allowlist and
checked (:mod:`.metadata`), tensors are read by torch's own DCP reader
(:mod:`.reading`), the directory is a Source (:mod:`.source`) and converts
to OCF and back (:mod:`.convert`). Needs torch, imported on first use."""

from __future__ import annotations

import os

from ocf.format.source import AnySource
from ocf.interop.base import LocalFormat
from ocf.interop.dcp import convert
from ocf.interop.dcp.metadata import METADATA_FILE
from ocf.interop.dcp.source import DcpSource
from ocf.interop.pytorch.flatten import UNREAD_KEY, VALUES_KEY
from ocf.interop.text import format_size, format_table, shortened

DATA_SUFFIX = ".distcp"


class DcpFormat(LocalFormat):
    """A directory ``torch.distributed.checkpoint.save`` wrote."""

    name = "dcp"
    title = "DCP"
    checks = "none: DCP stores no checksums"
    checksums = False
    source = DcpSource
    converter = convert

    def detect(self, path: str) -> bool:
        if not os.path.isfile(os.path.join(path, METADATA_FILE)):
            return False
        try:
            return any(name.endswith(DATA_SUFFIX) for name in os.listdir(path))
        except OSError:
            return False

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        return sum(c.item.length for c in _opened(source).entry(key).chunks), None

    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        index = opened.index
        files = {c.item.file for t in index.tensors.values() for c in t.chunks}
        lines = [f"checkpoint: {opened.path}",
                 f"DCP checkpoint (torch.distributed.checkpoint), {len(opened)} tensors in "
                 f"{len(files)} data file(s), {len(index.values)} non-tensor values "
                 "(no checksums)"]
        metadata = opened.metadata
        for name in (VALUES_KEY, UNREAD_KEY):
            found = metadata.get(name)
            if isinstance(found, dict):
                lines += [f"{name} {key} = {shortened(repr(value))}"
                          for key, value in found.items()]
        rows = [("KEY", "DTYPE", "SHAPE", "CHUNKS", "STORED")]
        for key, entry in index.tensors.items():
            stored = sum(c.item.length for c in entry.chunks)
            rows.append((key, entry.dtype.name, str(list(entry.shape)), str(len(entry.chunks)),
                         format_size(stored)))
        return [*lines, format_table(rows)]


def _opened(source: AnySource) -> DcpSource:
    assert isinstance(source, DcpSource), "a DCP directory opens as a DcpSource"
    return source


DCP = DcpFormat()
