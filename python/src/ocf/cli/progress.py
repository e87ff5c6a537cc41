"""Progress bars for long commands, on a terminal only.

``verify``, ``diff``, ``inspect --stats`` and ``convert`` go through every
byte of a checkpoint; when that is a lot (:data:`MIN_BYTES`, or the
``OCF_PROGRESS_MIN_BYTES`` environment variable) and stderr is a terminal,
they draw a bar there with tqdm. Piped or redirected, or without tqdm
installed (it is the ``cli`` extra), they print nothing extra.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

MIN_BYTES = 256 << 20
MIN_BYTES_VARIABLE = "OCF_PROGRESS_MIN_BYTES"
DEFAULT_SIZE = (80, 24)  # columns, lines


class Progress(Protocol):
    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


class _Silent:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _threshold() -> int:
    text = os.environ.get(MIN_BYTES_VARIABLE, "")
    return int(text) if text.isdigit() else MIN_BYTES


def progress(total_bytes: int, what: str) -> Progress:
    """A bar counting ``total_bytes`` on stderr, or one that draws nothing."""
    if total_bytes < _threshold() or not sys.stderr.isatty():
        return _Silent()
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
    except ImportError:  # the cli extra is not installed: no bar, same results
        return _Silent()
    bar: Progress = tqdm(total=total_bytes, desc=what, unit="B", unit_scale=True,
                         unit_divisor=1024, file=sys.stderr, leave=False,
                         **_width())
    return bar


def _width() -> dict[str, object]:
    """Follow the terminal's size; a terminal reporting none (a new pseudo-terminal,
    ``script``) gets DEFAULT_SIZE, where tqdm would draw nothing."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except OSError:
        size = os.terminal_size((0, 0))
    if size.columns > 0 and size.lines > 0:
        return {"dynamic_ncols": True}
    return {"ncols": DEFAULT_SIZE[0], "nrows": DEFAULT_SIZE[1]}
