"""Skipping what needs a framework that is not installed, without importing it.

``pytest.importorskip`` imports the module, which is right for a framework the
test process uses itself. TensorFlow, and the Keras backends of the worker
processes, run in processes of their own: here they are only looked up
(``importlib.util.find_spec``), so that the test process does not pay for
importing them.
"""

from __future__ import annotations

import importlib.util

import pytest


def skip_unless_installed(*modules: str) -> None:
    """Skip the calling test (or test module, at its top level) unless every top-level
    module of ``modules`` can be imported."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (not installed)", allow_module_level=True)
