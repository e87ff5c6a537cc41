"""OCF, the Open Checkpoint Format: reference reader and writer.

The format is specified in spec/ and proto/ of the OCF repository; this
package is one implementation of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ocf.async_save import SaveHandle
from ocf.checkpoint import Checkpoint
from ocf.errors import (
    Category,
    IntegrityError,
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    OCFError,
    UnknownRequiredFeatureError,
    UnsupportedVersionError,
)
from ocf.files import load_file, open, save_file
from ocf.manager import CheckpointManager, latest_checkpoint
from ocf.reader import Reader
from ocf.restoring import RestoreMismatchError, RestoreStatus, restore
from ocf.saver import Saver, list_variables, load_variable
from ocf.saving import write
from ocf.tracking import Module, Variable
from ocf.writer import Writer

__all__ = [
    "Category",
    "IntegrityError",
    "InvalidError",
    "LimitExceededError",
    "MalformedError",
    "NotFoundError",
    "OCFError",
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
# Object-based checkpoints (ocf.checkpoint, ocf.tracking, ocf.restoring).
__all__ += ["Checkpoint", "Module", "RestoreMismatchError", "RestoreStatus", "Variable",
            "restore", "write"]
# Checkpoint management (ocf.manager); asynchronous saves (ocf.async_save).
__all__ += ["CheckpointManager", "SaveHandle", "latest_checkpoint"]
