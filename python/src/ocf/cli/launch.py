"""The ``ocf`` console script's entry point.

``ocf --version`` is answered here, before the commands load: they bring
NumPy, protobuf and every reader (about half a second), and printing the
version needs none of them. Anything else goes to :func:`ocf.cli.main.main`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ocf._version import __version__


def version_line() -> str:
    """What ``ocf --version`` prints."""
    return f"ocf {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ocf`` command with ``argv`` (default: the process's arguments)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == ["--version"]:
        print(version_line())
        return 0
    from ocf.cli.main import main as run_command  # the commands, loaded when one runs

    return run_command(arguments)
