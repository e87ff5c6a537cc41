"""``ocf report PATH -o report.html``: a page of charts of what a checkpoint holds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ocf.cli.managed import is_managed_directory, latest_of
from ocf.cli.report_data import history, snapshot


def report(args: argparse.Namespace) -> int:
    try:
        from ocf.cli.report_page import page  # matplotlib, loaded only for this command
    except ImportError as exc:  # the command's own optional library, not the checkpoint's
        print(f"ocf report: {exc}", file=sys.stderr)
        return 1

    managed = is_managed_directory(args.path)
    taken = snapshot(latest_of(args.path) if managed else args.path, args.histograms)
    steps = history(args.path, args.tensors) if managed else None
    Path(args.output).write_text(page(taken, steps), encoding="utf-8")
    print(f"wrote {args.output}")
    return 0
