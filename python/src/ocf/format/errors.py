"""The one exception hierarchy of OCF (spec/errors.md).

Every failure a reader reports belongs to exactly one category of the spec's
closed list [R-ERR-001]. Each category is one subclass of :class:`OCFError`,
which also subclasses the builtin a caller would naturally catch, so
``except FileNotFoundError`` still works for a missing checkpoint.

Messages name what was wrong and where: the file, the tensor key when there
is one, and the id of the violated requirement.
"""

from __future__ import annotations

import enum
import os


class Category(enum.Enum):
    """The closed list of error categories of spec/errors.md."""

    MALFORMED = "MALFORMED"
    INVALID = "INVALID"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    UNKNOWN_REQUIRED_FEATURE = "UNKNOWN_REQUIRED_FEATURE"
    INTEGRITY = "INTEGRITY"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    NOT_FOUND = "NOT_FOUND"


class OCFError(Exception):
    """Base of every error OCF raises about a checkpoint or its use."""

    category: Category

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        key: str | None = None,
        requirement: str | None = None,
    ) -> None:
        self.detail = message
        self.path = None if path is None else os.fspath(path)
        self.key = key
        self.requirement = requirement
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [f"{self.category.value}:"]
        if self.path is not None:
            parts.append(f"{self.path}:")
        if self.key is not None:
            parts.append(f"tensor {self.key!r}:")
        parts.append(self.detail)
        if self.requirement is not None:
            parts.append(f"[{self.requirement}]")
        return " ".join(parts)

    def __str__(self) -> str:
        return self._render()


class MalformedError(OCFError, ValueError):
    """The bytes cannot be decoded: bad magic, truncation, unparsable index."""

    category = Category.MALFORMED


class InvalidError(OCFError, ValueError):
    """The bytes decode but break a MUST of the spec (or the API was misused)."""

    category = Category.INVALID


class UnsupportedVersionError(OCFError, ValueError):
    """The file's major format version is not one this reader implements."""

    category = Category.UNSUPPORTED_VERSION


class UnknownRequiredFeatureError(OCFError, ValueError):
    """The checkpoint requires a feature this reader does not implement."""

    category = Category.UNKNOWN_REQUIRED_FEATURE


class IntegrityError(OCFError, ValueError):
    """A checksum does not match the stored bytes."""

    category = Category.INTEGRITY


class LimitExceededError(OCFError, ValueError):
    """A hard limit of the spec is exceeded, or a size computation overflows."""

    category = Category.LIMIT_EXCEEDED


class NotFoundError(OCFError, FileNotFoundError, KeyError):
    """No checkpoint at the path, a missing shard, or a key not in the checkpoint."""

    category = Category.NOT_FOUND


ERROR_CLASSES: dict[Category, type[OCFError]] = {
    cls.category: cls
    for cls in (
        MalformedError,
        InvalidError,
        UnsupportedVersionError,
        UnknownRequiredFeatureError,
        IntegrityError,
        LimitExceededError,
        NotFoundError,
    )
}
