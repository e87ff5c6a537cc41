"""What ``ocf inspect`` prints of a safetensors file before its tensors' values.

The header was parsed and checked as the converter does (ocf.formats.safetensors)
when the file was opened: lengths, dtypes, shapes and the exact tiling of the
data buffer. safetensors stores no checksums, which the summary says.
"""

from __future__ import annotations

from ocf.cli.textformat import format_size, format_table
from ocf.formats.safetensors_source import SafetensorsSource


def print_safetensors_summary(source: SafetensorsSource) -> None:
    header = source.header
    print(f"checkpoint: {source.path}")
    print(f"safetensors file, {len(header.entries)} tensors, {format_size(source.size)} "
          "(no checksums: bit flips in tensor data go unnoticed)")
    for key, value in (header.metadata or {}).items():
        print(f"metadata {key} = {value!r}")
    rows = [("KEY", "DTYPE", "SHAPE", "STORED")]
    rows += [(e.name, e.dtype.name, str(list(e.shape)), format_size(e.end - e.begin))
             for e in header.entries]
    print(format_table(rows))
