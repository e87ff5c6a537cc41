"""OCF, the Open Checkpoint Format: reference reader and writer.

The format is specified in spec/ and proto/ of the OCF repository; this
package is one implementation of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

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
from ocf.reader import Reader
from ocf.saver import Saver, list_variables, load_variable
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
