"""Where the test helpers, the Python project and the repository are, for a test
in any folder under tests/.

Computed from this file, which stays at the top of tests/ with conftest.py, the
helper modules and the worker scripts; the test files sit in folders by subsystem
(tests/format, tests/objects, ...), at depths that may change.
"""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent  # helper modules and worker scripts
PYTHON_DIR = TESTS_DIR.parent  # python/: src, tools, benchmarks, examples
REPOSITORY = PYTHON_DIR.parent  # spec, docs, conformance, README.md
