"""``ocf convert SRC DST``: run ocf.interop.registry, with a progress bar on a terminal.

The storage options (``--layout``, ``--compression``, ``--chunk-size``) need
an OCF target; OCF to OCF with them rewrites the checkpoint (ocf.interop.ocf.relayout).
"""

from __future__ import annotations

import argparse
from typing import Any

from ocf.cli.progress import progress
from ocf.cli.stats import stored_bytes
from ocf.format.errors import OCFError
from ocf.interop.converting import convert as run
from ocf.interop.converting import detect_source, target_for
from ocf.interop.ocf import OCF
from ocf.interop.ocf.relayout import export
from ocf.interop.output import reporting_progress
from ocf.interop.registry import by_name, open_checkpoint


def export_command(args: argparse.Namespace) -> int:
    """``ocf export SRC DST``: one checkpoint standalone, every byte in it (ocf.export)."""
    bar = progress(_size(args.src), "export")
    try:
        with reporting_progress(bar.update):
            export(args.src, args.dst, layout=args.layout)
    finally:
        bar.close()
    print(f"exported {args.src} -> {args.dst} (standalone, {args.layout})")
    return 0


def convert(args: argparse.Namespace) -> int:
    options = _writer_options(args)
    source = by_name(args.source_format) if args.source_format else detect_source(args.src)
    target = by_name(args.to) if args.to else target_for(args.dst)
    total = _size(args.src)
    through_ocf = OCF not in (source, target)  # written twice: to OCF and out
    bar = progress(total * (2 if through_ocf else 1), "convert")
    try:
        with reporting_progress(bar.update):
            run(args.src, args.dst, to=target.name, source_format=source.name, **options)
    finally:
        bar.close()
    print(f"converted {args.src} ({source.name}) -> {args.dst} ({target.name})")
    return 0


def _size(path: str) -> int:
    """The bytes of tensor values at ``path``; 0 (no bar) when it does not open as is."""
    try:
        with open_checkpoint(path, verify=False) as opened:  # only sizes are read here
            return sum(stored_bytes(opened, key) for key in opened)
    except OCFError:  # the conversion reports it, or reads it with --from
        return 0


def _writer_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {name: value for name, value in (
        ("layout", args.layout), ("compression", args.compression),
        ("chunk_size", args.chunk_size)) if value is not None}
    if options.get("compression") == "none":
        options["compression"] = None
    return options
