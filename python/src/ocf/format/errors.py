"""The one exception hierarchy of OCF (spec/errors.md).

Every failure a reader reports belongs to exactly one category of the spec's
closed list [R-ERR-001]. Each category is one subclass of :class:`OCFError`,
which also subclasses the builtin a caller would naturally catch, so
``except FileNotFoundError`` still works for a missing checkpoint.

One subclass has no category: :class:`OutOfMemoryError`, a checkpoint that
needs more memory than the machine gives the reader. That is a failure of
the reader's environment, not of the file, so it is none of the seven
[R-ERR-003].

Messages name what was wrong and where: the file, the tensor key when there
is one, and the id of the violated requirement.
"""

from __future__ import annotations

import enum
import os


class Category(enum.Enum):
    """The closed list of error categories of spec/errors.md.

    Examples:
        >>> try:
        ...     ocf.open("missing.ocf")
        ... except ocf.OCFError as error:
        ...     assert error.category is ocf.Category.NOT_FOUND
    """

    MALFORMED = "MALFORMED"
    INVALID = "INVALID"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    UNKNOWN_REQUIRED_FEATURE = "UNKNOWN_REQUIRED_FEATURE"
    INTEGRITY = "INTEGRITY"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    NOT_FOUND = "NOT_FOUND"


class OCFError(Exception):
    """Base of every error OCF raises about a checkpoint or its use.

    Examples:
        >>> try:
        ...     ocf.load_file("model.ocf")
        ... except ocf.OCFError as error:  # every category below is one
        ...     print(error.category.value, error.path, error.key, error.requirement)
    """

    # None only for OutOfMemoryError, a failure of the environment [R-ERR-003].
    category: Category | None

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
        parts = [f"{self.label}:"]
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

    def located(self, path: str | os.PathLike[str] | None, key: str | None = None, *,
                detail: str | None = None) -> OCFError:
        """This error of the same class, naming ``path``, ``key`` (and ``detail``)
        instead of its own: for a caller who knows the file or tensor an inner
        step did not. Everything else, the requirement id included, is kept."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.path = None if path is None else os.fspath(path)
        clone.key = key
        clone.detail = self.detail if detail is None else detail
        Exception.__init__(clone, clone._render())
        return clone

    @property
    def label(self) -> str:
        """The category's name; OUT_OF_MEMORY for the one error outside the categories."""
        return "OUT_OF_MEMORY" if self.category is None else self.category.value


class MalformedError(OCFError, ValueError):
    """The bytes cannot be decoded: bad magic, truncation, unparsable index.

    Examples:
        >>> open("junk.ocf", "wb").write(b"not a checkpoint")
        >>> try:
        ...     ocf.open("junk.ocf")
        ... except ocf.MalformedError as error:
        ...     print(error)  # MALFORMED: junk.ocf: ... [R-...]
    """

    category = Category.MALFORMED


class InvalidError(OCFError, ValueError):
    """The bytes decode but break a MUST of the spec (or the API was misused).

    Examples:
        >>> try:
        ...     ocf.save_file({"w": np.ones(3)}, "w.ocf", compression="lz4")
        ... except ocf.InvalidError as error:
        ...     print(error)  # INVALID: unknown compression 'lz4'; choose one of: none, zstd
    """

    category = Category.INVALID


class UnsupportedVersionError(OCFError, ValueError):
    """The file's major format version is not one this reader implements.

    Examples:
        >>> try:
        ...     ocf.open("from_the_future.ocf")
        ... except ocf.UnsupportedVersionError:
        ...     print("written by a newer major version of the format")
    """

    category = Category.UNSUPPORTED_VERSION


class UnknownRequiredFeatureError(OCFError, ValueError):
    """The checkpoint requires a feature this reader does not implement.

    Examples:
        >>> try:
        ...     ocf.open("needs_a_newer_reader.ocf")
        ... except ocf.UnknownRequiredFeatureError as error:
        ...     print(error.detail)  # names the feature this reader lacks
    """

    category = Category.UNKNOWN_REQUIRED_FEATURE


class IntegrityError(OCFError, ValueError):
    """A checksum does not match the stored bytes.

    Examples:
        >>> try:
        ...     weights = ocf.load_file("model.ocf")  # every chunk's CRC-32C is checked
        ... except ocf.IntegrityError as error:
        ...     print(f"{error.path}: tensor {error.key!r} is damaged")
    """

    category = Category.INTEGRITY


class LimitExceededError(OCFError, ValueError):
    """A hard limit of the spec is exceeded, or a size computation overflows.

    Examples:
        >>> try:
        ...     ocf.open("hostile.ocf")  # e.g. an index declaring 2**40 tensors
        ... except ocf.LimitExceededError as error:
        ...     print(error.requirement)
    """

    category = Category.LIMIT_EXCEEDED


class NotFoundError(OCFError, FileNotFoundError, KeyError):
    """No checkpoint at the path, a missing shard, or a key not in the checkpoint.

    Examples:
        >>> try:
        ...     ocf.load_file("model.ocf", keys=["no/such/key"])
        ... except ocf.NotFoundError as error:
        ...     print(error.key)  # no/such/key
    """

    category = Category.NOT_FOUND


class OutOfMemoryError(OCFError, MemoryError):
    """The reader could not get the memory a checkpoint needs [R-ERR-003].

    Not a verdict on the file, so it has no category: the same file reads on
    a machine with more memory, or with :meth:`ocf.Reader.read_into` into a
    buffer the caller already holds. ``needed`` is the number of bytes the
    failed step asked for.

    Examples:
        >>> try:
        ...     weights = ocf.load_file("huge.ocf")
        ... except ocf.OutOfMemoryError as error:
        ...     print(error.needed, error.key)  # the bytes and the tensor that did not fit
    """

    category = None

    def __init__(self, message: str, *, needed: int,
                 path: str | os.PathLike[str] | None = None, key: str | None = None) -> None:
        self.needed = needed
        super().__init__(message, path=path, key=key, requirement="R-ERR-003")


ERROR_CLASSES: dict[Category, type[OCFError]] = {
    category: cls
    for cls in (
        MalformedError,
        InvalidError,
        UnsupportedVersionError,
        UnknownRequiredFeatureError,
        IntegrityError,
        LimitExceededError,
        NotFoundError,
    )
    for category in [cls.category] if category is not None
}
