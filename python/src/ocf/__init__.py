"""OCF, the Open Checkpoint Format: reference reader and writer.

The format is specified in spec/ and proto/ of the OCF repository; this
package is one implementation of it.

``import ocf`` is cheap: the public names below load their modules (and
NumPy, protobuf, crc32c) the first time one of them is used, so a program
or ``ocf --version`` that needs none of them pays nothing for them. Every
format OCF reads (OCF, TensorFlow, safetensors, npz) is found by
ocf.interop.registry, whichever entry point is used first.

Examples:
    >>> import ocf
    >>> ocf.__version__
    '0.4.3'
"""

from __future__ import annotations

import importlib

from ocf._version import __version__

# typing.TYPE_CHECKING without importing typing (with re, enum, ...): what type
# checkers see is under ``if TYPE_CHECKING``, and they read this name as True.
TYPE_CHECKING = False

# Each public name and the module that defines it, loaded on first use (PEP 562).
_PUBLIC_MODULES = {
    "Category": "ocf.format.errors",
    "IntegrityError": "ocf.format.errors",
    "InvalidError": "ocf.format.errors",
    "LimitExceededError": "ocf.format.errors",
    "MalformedError": "ocf.format.errors",
    "NotFoundError": "ocf.format.errors",
    "OCFError": "ocf.format.errors",
    "OutOfMemoryError": "ocf.format.errors",
    "UnknownRequiredFeatureError": "ocf.format.errors",
    "UnsupportedVersionError": "ocf.format.errors",
    "Reader": "ocf.format.reader",
    "Source": "ocf.format.source",
    "Writer": "ocf.format.writer",
    "SaveHandle": "ocf.format.async_save",
    "load_file": "ocf.numpy",
    "open": "ocf.numpy",
    "save_file": "ocf.numpy",
    "export": "ocf.interop.ocf.relayout",
    # Object-based checkpoints.
    "Checkpoint": "ocf.objects.checkpoint",
    "Module": "ocf.objects.tracking",
    "Variable": "ocf.objects.tracking",
    "RestoreMismatchError": "ocf.objects.restore_status",
    "RestoreStatus": "ocf.objects.restore_status",
    "restore": "ocf.objects.restoring",
    "write": "ocf.objects.saving",
    # Name-based checkpoints.
    "Saver": "ocf.objects.name_based",
    "list_variables": "ocf.objects.name_based",
    "load_variable": "ocf.objects.name_based",
    # Checkpoint management.
    "CheckpointManager": "ocf.objects.manager",
    "latest_checkpoint": "ocf.objects.state_file",
}
# Subpackages that ``import ocf`` used to load eagerly, still reachable as attributes.
_SUBPACKAGES = frozenset({"format", "objects", "numpy", "tensorflow", "v1"})

# Spelled out for tools that read it without running the code (linters, mkdocstrings).
__all__ = [
    "Category",
    "Checkpoint",
    "CheckpointManager",
    "IntegrityError",
    "InvalidError",
    "LimitExceededError",
    "MalformedError",
    "Module",
    "NotFoundError",
    "OCFError",
    "OutOfMemoryError",
    "Reader",
    "RestoreMismatchError",
    "RestoreStatus",
    "SaveHandle",
    "Saver",
    "Source",
    "UnknownRequiredFeatureError",
    "UnsupportedVersionError",
    "Variable",
    "Writer",
    "__version__",
    "export",
    "latest_checkpoint",
    "list_variables",
    "load_file",
    "load_variable",
    "open",
    "restore",
    "save_file",
    "write",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ loads these
    from typing import Any

    from ocf.format.async_save import SaveHandle
    from ocf.format.errors import (
        Category,
        IntegrityError,
        InvalidError,
        LimitExceededError,
        MalformedError,
        NotFoundError,
        OCFError,
        OutOfMemoryError,
        UnknownRequiredFeatureError,
        UnsupportedVersionError,
    )
    from ocf.format.reader import Reader
    from ocf.format.source import Source
    from ocf.format.writer import Writer
    from ocf.interop.ocf.relayout import export
    from ocf.numpy import load_file, open, save_file
    from ocf.objects.checkpoint import Checkpoint
    from ocf.objects.manager import CheckpointManager
    from ocf.objects.name_based import Saver, list_variables, load_variable
    from ocf.objects.restore_status import RestoreMismatchError, RestoreStatus
    from ocf.objects.restoring import restore
    from ocf.objects.saving import write
    from ocf.objects.state_file import latest_checkpoint
    from ocf.objects.tracking import Module, Variable


def __getattr__(name: str) -> Any:
    module_name = _PUBLIC_MODULES.get(name)
    if module_name is None and name not in _SUBPACKAGES:
        raise AttributeError(f"module 'ocf' has no attribute {name!r}")
    if module_name is None:
        value: Any = importlib.import_module(f"ocf.{name}")
    else:
        value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBPACKAGES})
