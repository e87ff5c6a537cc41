"""safetensors files: read as a Source (:mod:`.source`), converted to OCF and back
(:mod:`.convert`), without the safetensors package."""

from __future__ import annotations

from ocf.format.source import AnySource
from ocf.interop.file_source import FileFormat
from ocf.interop.safetensors import convert
from ocf.interop.safetensors.source import SafetensorsSource
from ocf.interop.text import format_size, format_table


class SafetensorsFormat(FileFormat):
    """One ``.safetensors`` file: a JSON header, then the tensors' bytes."""

    name = "safetensors"
    title = "safetensors"
    suffixes = (".safetensors",)
    checks = "none: safetensors has no checksums"
    checksums = False
    source = SafetensorsSource
    converter = convert

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        entry = _opened(source).entry(key)
        return entry.end - entry.begin, None

    def checked_bytes(self, source: AnySource, values: int) -> int:
        return _opened(source).size

    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        header = opened.header
        lines = [f"checkpoint: {opened.path}",
                 f"safetensors file, {len(header.entries)} tensors, {format_size(opened.size)} "
                 "(no checksums: bit flips in tensor data go unnoticed)"]
        lines += [f"metadata {key} = {value!r}" for key, value in (header.metadata or {}).items()]
        rows = [("KEY", "DTYPE", "SHAPE", "STORED")]
        rows += [(e.name, e.dtype.name, str(list(e.shape)), format_size(e.end - e.begin))
                 for e in header.entries]
        return [*lines, format_table(rows)]


def _opened(source: AnySource) -> SafetensorsSource:
    assert isinstance(source, SafetensorsSource), "a safetensors file opens as SafetensorsSource"
    return source


SAFETENSORS = SafetensorsFormat()
