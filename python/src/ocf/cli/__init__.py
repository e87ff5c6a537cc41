"""Layer 6, the ``ocf`` command line: inspect, tree, verify, diff, convert, conformance."""

from __future__ import annotations

from ocf.cli.main import main

__all__ = ["main"]
