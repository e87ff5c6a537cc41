"""Deliberately broken variants of the reference adapter, to test the suite.

A conformance suite is only as good as the bugs it catches. Each entry of
:data:`BUGS` breaks the reference implementation in one way (for example by
patching a function of ``ocf``); the reference adapter applies the one named
by the environment variable ``OCF_CONFORMANCE_BUG`` before it serves
requests, and the suite's own tests check that the harness then reports the
cases that should catch that bug.
"""

from __future__ import annotations

from collections.abc import Callable

BUGS: dict[str, Callable[[], None]] = {}


def inject_bug(name: str) -> None:
    """Apply the bug ``name`` to this process; exit for an unknown name."""
    bug = BUGS.get(name)
    if bug is None:
        known = ", ".join(sorted(BUGS)) or "none"
        raise SystemExit(f"OCF_CONFORMANCE_BUG={name!r} names no bug; known: {known}")
    bug()
