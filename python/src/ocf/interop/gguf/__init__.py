"""GGUF files (llama.cpp's format): read as a Source (:mod:`.source`, parsing
:mod:`.header`), converted to OCF (:mod:`.convert`), without llama.cpp or the
gguf package."""

from __future__ import annotations

from ocf.format.source import AnySource
from ocf.interop.file_source import FileFormat
from ocf.interop.gguf import convert
from ocf.interop.gguf.source import GGUFSource
from ocf.interop.text import format_size, format_table


class GGUFFormat(FileFormat):
    """One ``.gguf`` file: a header of metadata and tensor infos, then aligned data."""

    name = "gguf"
    title = "GGUF"
    suffixes = (".gguf",)
    checks = ("none: GGUF has no checksums (quantized tensors, whose values OCF does not "
              "read, only their place in the file)")
    checksums = False
    source = GGUFSource
    converter = convert

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        info = _opened(source).entry(key)
        return info.nbytes, (info.ggml.name if info.ggml.quantized else None)

    def values_readable(self, source: AnySource, key: str) -> bool:
        return not _opened(source).entry(key).ggml.quantized

    def checked_bytes(self, source: AnySource, values: int) -> int:
        return _opened(source).size

    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        header = opened.header
        quantized = sum(t.ggml.quantized for t in header.tensors)
        lines = [f"checkpoint: {opened.path}",
                 f"GGUF version {header.version} file, {len(header.tensors)} tensors "
                 f"({quantized} quantized), {format_size(opened.size)}, alignment "
                 f"{header.alignment} (no checksums: bit flips in tensor data go unnoticed)",
                 "shapes in NumPy's order (outermost first; GGUF stores them innermost first)"]
        lines += [f"metadata {key} = {_short(value)}" for key, value in header.metadata.items()]
        rows = [("KEY", "TYPE", "SHAPE", "BLOCK", "STORED")]
        rows += [(t.name, t.ggml.name, str(list(t.shape)),
                  (f"{t.ggml.block_elements} in {t.ggml.block_bytes} B" if t.ggml.quantized
                   else "-"),
                  format_size(t.nbytes)) for t in header.tensors]
        return [*lines, format_table(rows)]


def _short(value: object) -> str:
    """A metadata value for one line: long lists say how long they are."""
    if isinstance(value, list) and len(value) > 8:
        return f"[{', '.join(repr(v) for v in value[:4])}, ... ({len(value)} items)]"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _opened(source: AnySource) -> GGUFSource:
    assert isinstance(source, GGUFSource), "a GGUF file opens as GGUFSource"
    return source


GGUF = GGUFFormat()
