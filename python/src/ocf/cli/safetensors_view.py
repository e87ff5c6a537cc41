"""``ocf inspect`` and ``ocf verify`` on a safetensors file, read as hostile input.

The header is parsed and checked as the converter does (ocf.formats.safetensors):
lengths, dtypes, shapes and the exact tiling of the data buffer. safetensors
stores no checksums, so ``verify`` can only read every tensor and say so.
"""

from __future__ import annotations

import os

from ocf.cli.textformat import format_size, format_table
from ocf.format.errors import NotFoundError
from ocf.formats.output import open_source
from ocf.formats.safetensors import Header, read_header, read_tensor


def is_safetensors(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).lower().endswith(".safetensors") and os.path.isfile(path)


def inspect_safetensors(path: str, *, tensor: str | None, show_all: bool) -> int:
    """Print what the safetensors file at ``path`` holds; the exit status."""
    with open_source(path) as f:
        size = os.fstat(f.fileno()).st_size
        header = read_header(f, path, size)
        _print(path, f.fileno(), header, size, tensor=tensor, show_all=show_all)
    return 0


def _print(path: str, fd: int, header: Header, size: int, *, tensor: str | None,
           show_all: bool) -> None:
    wanted = [e for e in header.entries if tensor is None or e.name == tensor]
    if tensor is not None and not wanted:
        raise NotFoundError("no tensor with this key", path=path, key=tensor)
    if tensor is None:
        print(f"checkpoint: {path}")
        print(f"safetensors file, {len(header.entries)} tensors, {format_size(size)} "
              "(no checksums: bit flips in tensor data go unnoticed)")
        for key, value in (header.metadata or {}).items():
            print(f"metadata {key} = {value!r}")
        rows = [("KEY", "DTYPE", "SHAPE", "STORED")]
        rows += [(e.name, e.dtype.name, str(list(e.shape)), format_size(e.end - e.begin))
                 for e in header.entries]
        print(format_table(rows))
        if not show_all:
            return
    for entry in wanted:
        print(f"{'' if tensor else chr(10)}tensor_name: {entry.name}")
        print(read_tensor(fd, entry, header, path))


def verify_safetensors(path: str) -> int:
    """Read every tensor of the safetensors file at ``path``; the exit status."""
    with open_source(path) as f:
        size = os.fstat(f.fileno()).st_size
        header = read_header(f, path, size)
        for entry in header.entries:
            read_tensor(f.fileno(), entry, header, path)
    print(f"OK: {path}: {len(header.entries)} tensors read, {format_size(size)}; safetensors "
          "has no checksums, so only the structure was checked")
    return 0
