"""``ocf inspect``: what a checkpoint of any format OCF reads holds.

Text: a summary in the format's own terms (OCF: version, writer, codecs;
safetensors: header metadata; TensorFlow: bundle header, slices), then
with ``--tensor GLOB`` or ``--all`` the values, with ``--stats`` a table of
statistics (ocf.cli.stats). ``--json``: one document (schemas/inspect.schema.json).
A managed directory is listed first, then its latest checkpoint inspected.
Inspect reads the index, not the tensor bytes, unless it prints values; the
summary's last line says so and names ``ocf verify``, which checks every byte.
"""

from __future__ import annotations

import argparse
from typing import Any

from ocf.cli.jsonout import emit
from ocf.cli.keys import matching
from ocf.cli.managed import is_managed_directory, listing, print_listing
from ocf.cli.progress import progress
from ocf.cli.stats import TensorStats, stored_bytes, tensor_stats
from ocf.format.source import AnySource
from ocf.interop.base import Format
from ocf.interop.registry import format_of
from ocf.interop.text import format_number, format_table


def inspect(args: argparse.Namespace) -> int:
    managed = listing(args.path) if is_managed_directory(args.path) else None
    path = args.path if managed is None else managed["latest"]
    if managed is not None and not args.json:
        print_listing(managed)
    found = format_of(path)
    with found.open(path, verify=not args.no_verify) as source:
        keys = list(source) if args.tensor is None else matching(
            list(source), args.tensor, str(source.path))
        stats = _all_stats(source, keys) if args.stats else None
        if args.json:
            emit(_document(found, source, keys, managed, stats,
                           values=args.all or bool(args.tensor)))
            return 0
        if args.tensor is None:
            print("\n".join(found.overview(source)))
        if stats is not None:
            _print_stats(source, stats)
        elif args.tensor is not None or args.all:
            for key in keys:
                print(f"{'' if args.tensor else chr(10)}tensor_name: {key}")
                print(source.get_tensor(key))
    if stats is None and args.tensor is None and not args.all:
        print(_not_read_note(path))
    return 0


def _not_read_note(path: str) -> str:
    """The summary's last line: inspect reads the index, not the tensor bytes (what
    keeps it instant on any size), so it has not checked them. Printed only then:
    values printed (--tensor, --all, --stats) were read and checked unless
    --no-verify, and stdout is then the data asked for."""
    return (f"data: tensor bytes not read, checksums not checked; `ocf verify {path}` "
            "reads and checks every byte")


def _all_stats(source: AnySource, keys: list[str]) -> dict[str, TensorStats]:
    bar = progress(sum(stored_bytes(source, k) for k in keys), "stats")
    try:
        return {key: tensor_stats(source, key, bar.update) for key in keys}
    finally:
        bar.close()


STATS_COLUMNS = ("min", "max", "mean", "std", "nan", "inf", "zero")


def _print_stats(source: AnySource, stats: dict[str, TensorStats]) -> None:
    rows = [("KEY", "DTYPE", "SHAPE", *(c.upper() for c in STATS_COLUMNS))]
    for key, found in stats.items():
        summary = source.summary(key)
        values = found.as_dict()
        rows.append((key, summary.dtype.name, str(list(summary.shape)),
                     *(format_number(values[c]) for c in STATS_COLUMNS)))
    print(format_table(rows))


def _document(found: Format, source: AnySource, keys: list[str],
              managed: dict[str, Any] | None, stats: dict[str, TensorStats] | None, *,
              values: bool) -> dict[str, Any]:
    tensors = []
    for key in keys:
        summary = source.summary(key)
        stored, codec = found.storage(source, key)
        entry: dict[str, Any] = {"key": key, "dtype": summary.dtype.name,
                                 "shape": list(summary.shape), "stored_bytes": stored,
                                 "codec": codec}
        if stats is not None:
            entry["stats"] = stats[key].as_dict()
        if values:
            entry["value"] = source.get_tensor(key).tolist()
        tensors.append(entry)
    return {"path": str(source.path), "format": source.format_name, "managed": managed,
            "metadata": source.metadata, "object_graph": source.object_graph is not None,
            "tensors": tensors}

