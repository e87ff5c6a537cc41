"""``ocf diff A B``: print what ocf.cli.diff finds; exit 0 when equal, 1 when not.

Text: one line per difference, then a count. ``--json``: one document
(schemas/diff.schema.json). Errors exit 2, as diff(1) does.
"""

from __future__ import annotations

import argparse
from typing import Any

from ocf.cli.diff import Report, TensorDiff, Tolerance, comparable_bytes, compare
from ocf.cli.jsonout import emit
from ocf.cli.managed import resolved
from ocf.cli.progress import progress
from ocf.format.source import AnySource
from ocf.interop.registry import open_checkpoint
from ocf.interop.text import format_number

EQUAL, DIFFERENT, ERROR = 0, 1, 2
# Characters of a metadata value shown in a text line.
MAX_SHOWN_VALUE = 120


def diff(args: argparse.Namespace) -> int:
    tolerance = Tolerance(rtol=args.rtol, atol=args.atol)
    with open_checkpoint(resolved(args.a)) as a, open_checkpoint(resolved(args.b)) as b:
        common = [k for k in a if k in b]
        bar = progress(sum(comparable_bytes(a, b, k) for k in common), "diff")
        try:
            report = compare(a, b, tolerance, bar.update)
        finally:
            bar.close()
        if args.json:
            emit(_document(a, b, tolerance, report))
        else:
            _print(a, b, report)
    return EQUAL if report.equal else DIFFERENT


def _side(source: AnySource) -> dict[str, str]:
    return {"path": str(source.path), "format": source.format_name}


def _document(a: AnySource, b: AnySource, tolerance: Tolerance, report: Report) -> dict[str, Any]:
    return {"a": _side(a), "b": _side(b), "equal": report.equal,
            "rtol": tolerance.rtol, "atol": tolerance.atol,
            "only_in_a": report.only_in_a, "only_in_b": report.only_in_b,
            "compared": report.compared,
            "tensors": [t.as_dict() for t in report.tensors],
            "metadata": [d.as_dict() for d in report.metadata],
            "objects": [d.as_dict() for d in report.objects]}


def _print(a: AnySource, b: AnySource, report: Report) -> None:
    print(f"--- {a.path} ({a.format_name})")
    print(f"+++ {b.path} ({b.format_name})")
    for key in report.only_in_a:
        print(f"only in A: {key}")
    for key in report.only_in_b:
        print(f"only in B: {key}")
    for found in report.tensors:
        print(_tensor_line(found))
    for difference in report.metadata:
        print(f"metadata {difference.where!r}: {_shown(difference.a)} -> "
              f"{_shown(difference.b)}")
    for difference in report.objects:
        where = difference.where or "(root)"
        print(f"object {where}: {difference.what}: {_shown(difference.a)} -> "
              f"{_shown(difference.b)}")
    differing = len(report.tensors)
    verdict = "equal" if report.equal else "different"
    print(f"{verdict}: {report.compared} tensors in both, {differing} differ, "
          f"{len(report.only_in_a)} only in A, {len(report.only_in_b)} only in B, "
          f"{len(report.metadata)} metadata and {len(report.objects)} object differences")


def _tensor_line(found: TensorDiff) -> str:
    parts = []
    if found.dtypes[0] != found.dtypes[1]:
        parts.append(f"dtype {found.dtypes[0]} -> {found.dtypes[1]}")
    if found.shapes[0] != found.shapes[1]:
        parts.append(f"shape {list(found.shapes[0])} -> {list(found.shapes[1])}")
    elif found.differing is None:
        parts.append("byte strings against numbers")
    else:
        parts.append(f"{found.differing} of {found.elements} elements differ, "
                     f"max abs diff {format_number(found.max_abs)}, "
                     f"max rel diff {format_number(found.max_rel)}")
    return f"tensor {found.key}: " + "; ".join(parts)


def _shown(value: object) -> str:
    text = "(absent)" if value is None else repr(value)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 3] + "..."
