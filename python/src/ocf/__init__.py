"""OCF, the Open Checkpoint Format: reference reader and writer.

The format is specified in spec/ and proto/ of the OCF repository; this
package is one implementation of it.
"""

from __future__ import annotations

# Register TensorFlow checkpoints, safetensors files and npz archives as formats that
# ocf.open, ocf.load_file, restoring, loading by name and the command line read.
from ocf import tensorflow as _tensorflow  # noqa: F401
from ocf._version import __version__
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
from ocf.format.writer import Writer
from ocf.formats import npz_source as _npz_source  # noqa: F401
from ocf.formats import safetensors_source as _safetensors_source  # noqa: F401
from ocf.numpy import load_file, open, save_file
from ocf.objects.checkpoint import Checkpoint
from ocf.objects.manager import CheckpointManager
from ocf.objects.restoring import RestoreMismatchError, RestoreStatus, restore
from ocf.objects.saver import Saver, list_variables, load_variable
from ocf.objects.saving import write
from ocf.objects.state_file import latest_checkpoint
from ocf.objects.tracking import Module, Variable

__all__ = [
    "Category",
    "IntegrityError",
    "InvalidError",
    "LimitExceededError",
    "MalformedError",
    "NotFoundError",
    "OCFError",
    "OutOfMemoryError",
    "Reader",
    "Saver",
    "UnknownRequiredFeatureError",
    "UnsupportedVersionError",
    "Writer",
    "__version__",
    "list_variables",
    "load_file",
    "load_variable",
    "open",
    "save_file",
]
# Object-based checkpoints (ocf.objects.checkpoint, ocf.objects.tracking, ocf.objects.restoring).
__all__ += ["Checkpoint", "Module", "RestoreMismatchError", "RestoreStatus", "Variable",
            "restore", "write"]
# Checkpoint management (ocf.objects.manager); asynchronous saves (ocf.format.async_save).
__all__ += ["CheckpointManager", "SaveHandle", "latest_checkpoint"]
