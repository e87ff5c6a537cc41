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
from ocf.cli.safetensors_view import print_safetensors_summary
from ocf.cli.stats import TensorStats, stored_bytes, tensor_stats
from ocf.cli.tensorflow_view import print_tensorflow_summary
from ocf.cli.textformat import format_number, format_size, format_table
from ocf.formats.safetensors_source import SafetensorsSource
from ocf.objects.sources import OCFSource, Source, open_source
from ocf.tensorflow.source import TFSource


def inspect(args: argparse.Namespace) -> int:
    managed = listing(args.path) if is_managed_directory(args.path) else None
    path = args.path if managed is None else managed["latest"]
    if managed is not None and not args.json:
        print_listing(managed)
    with open_source(path, verify=not args.no_verify) as source:
        keys = source.keys() if args.tensor is None else matching(
            source.keys(), args.tensor, source.path)
        stats = _all_stats(source, keys) if args.stats else None
        if args.json:
            emit(_document(source, keys, managed, stats, values=args.all or bool(args.tensor)))
            return 0
        if args.tensor is None:
            _print_summary(source)
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


def _all_stats(source: Source, keys: list[str]) -> dict[str, TensorStats]:
    bar = progress(sum(stored_bytes(source, k) for k in keys), "stats")
    try:
        return {key: tensor_stats(source, key, bar.update) for key in keys}
    finally:
        bar.close()


def _print_summary(source: Source) -> None:
    if isinstance(source, OCFSource):
        _print_ocf_summary(source)
    elif isinstance(source, SafetensorsSource):
        print_safetensors_summary(source)
    elif isinstance(source, TFSource):
        print_tensorflow_summary(source)
    else:
        print(f"checkpoint: {source.path}")
        print(f"{source.format_name} file, {len(source.keys())} tensors")
        rows = [("KEY", "DTYPE", "SHAPE")]
        for key in source:
            summary = source.summary(key)
            rows.append((key, summary.dtype, str(list(summary.shape))))
        print(format_table(rows))


def _print_ocf_summary(source: OCFSource) -> None:
    reader = source.reader
    major, minor = reader.format_version
    print(f"checkpoint: {reader.path}")
    print(f"format {major}.{minor}, written by {reader.index.writer or 'unknown'}, "
          f"{len(reader)} tensors in {len(reader.index.shards)} shard(s)")
    for key, value in reader.metadata.items():
        print(f"metadata {key} = {value!r}")
    rows = [("KEY", "DTYPE", "SHAPE", "STORED", "CODEC")]
    for key, info in reader.items():
        sliced = f" ({len(info.slices)} slices)" if info.slices else ""
        rows.append((key, info.dtype.name, str(list(info.shape)),
                     format_size(info.stored_length), info.codec_name + sliced))
    print(format_table(rows))


STATS_COLUMNS = ("min", "max", "mean", "std", "nan", "inf", "zero")


def _print_stats(source: Source, stats: dict[str, TensorStats]) -> None:
    rows = [("KEY", "DTYPE", "SHAPE", *(c.upper() for c in STATS_COLUMNS))]
    for key, found in stats.items():
        summary = source.summary(key)
        values = found.as_dict()
        rows.append((key, summary.dtype, str(list(summary.shape)),
                     *(format_number(values[c]) for c in STATS_COLUMNS)))
    print(format_table(rows))


def _document(source: Source, keys: list[str], managed: dict[str, Any] | None,
              stats: dict[str, TensorStats] | None, *, values: bool) -> dict[str, Any]:
    tensors = []
    for key in keys:
        summary = source.summary(key)
        stored, codec = _storage(source, key)
        entry: dict[str, Any] = {"key": key, "dtype": summary.dtype,
                                 "shape": list(summary.shape), "stored_bytes": stored,
                                 "codec": codec}
        if stats is not None:
            entry["stats"] = stats[key].as_dict()
        if values:
            entry["value"] = source.get_tensor(key).tolist()
        tensors.append(entry)
    return {"path": source.path, "format": source.format_name, "managed": managed,
            "metadata": source.metadata, "object_graph": source.object_graph is not None,
            "tensors": tensors}


def _storage(source: Source, key: str) -> tuple[int | None, str | None]:
    """Bytes stored and codec of ``key``, where the format says."""
    if isinstance(source, OCFSource):
        info = source.reader[key]
        return info.stored_length, info.codec_name
    if isinstance(source, SafetensorsSource):
        entry = source.entry(key)
        return entry.end - entry.begin, None
    if isinstance(source, TFSource):
        found = source.bundle.entry(key)
        return (found.size if found.slices is None else None), None
    return None, None
