"""Layer 6, the ``ocf`` command line: inspect, tree, verify, diff, convert, conformance.

The console script enters at :func:`ocf.cli.launch.main`; the commands are in
:mod:`ocf.cli.main`. Nothing is imported here, so that ``ocf --version`` stays cheap.
"""
