"""Where a checkpoint lives: a local path, or an object on an fsspec filesystem.

A path with a URL scheme (``s3://bucket/ckpt``, ``gs://...``) names an
object store reached through fsspec; anything else, ``file://`` URLs
included, is a local path and keeps the local code path (mmap, pread,
fsync, rename). fsspec is imported only when a URL is used, so ``import
ocf`` never needs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ocf.format.errors import InvalidError, NotFoundError

EXTRA = "pip install 'ocf[s3]'"
# Schemes fsspec serves from the local file system: those keep the local path.
_LOCAL_SCHEMES = frozenset({"file", "local"})

StorageOptions = Mapping[str, Any]


class ObjectPath:
    """An object (or a prefix) on an fsspec filesystem.

    ``key`` is the path as the filesystem names it (``bucket/dir/name`` on
    S3); the URL, as the user wrote its scheme, is what messages show and
    what :func:`os.fspath` returns.
    """

    __slots__ = ("fs", "key", "scheme")

    def __init__(self, fs: Any, key: str, scheme: str) -> None:
        self.fs = fs
        self.key = key.rstrip("/")
        self.scheme = scheme

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.key}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.fs, self.key.rsplit("/", 1)[0], self.scheme)

    def __truediv__(self, name: str) -> ObjectPath:
        return ObjectPath(self.fs, f"{self.key}/{name}", self.scheme)

    def __fspath__(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectPath({self.url!r})"


#: Where a file or checkpoint lives: a local path, or an object (prefix) of a store.
Location = Path | ObjectPath


def url_scheme(path: str | os.PathLike[str]) -> str | None:
    """The scheme of ``path`` if it is a URL of a non-local filesystem, else None."""
    if isinstance(path, ObjectPath):
        return path.scheme
    text = os.fspath(path)
    scheme, sep, _ = text.partition("://")
    # One letter is a Windows drive ("C://x"), not a scheme.
    if not sep or len(scheme) < 2 or not scheme.replace("+", "").replace("-", "").isalnum():
        return None
    return None if scheme in _LOCAL_SCHEMES else scheme


def join_path(directory: str | os.PathLike[str], name: str) -> str:
    """The path of ``name`` in ``directory``: URLs always join with "/", local paths
    with the platform's separator (a URL through os.path.join breaks on Windows)."""
    text = os.fspath(directory)
    if url_scheme(text) is None:
        return os.path.join(text, name)
    return f"{text.rstrip('/')}/{name}"


def locate(path: str | os.PathLike[str], storage_options: StorageOptions | None = None
           ) -> Path | ObjectPath:
    """The local :class:`Path` or the :class:`ObjectPath` that ``path`` names.

    ``storage_options`` go to the fsspec filesystem of a URL (endpoint_url,
    key, secret, ...); for local paths they are ignored. Without them fsspec
    takes its defaults, including ``FSSPEC_<PROTOCOL>`` environment
    variables, so that child processes can be pointed at a store.
    """
    if isinstance(path, ObjectPath):
        return path
    text = os.fspath(path)
    scheme = url_scheme(text)
    if scheme is None:
        head, sep, rest = text.partition("://")
        return Path(rest if sep and head in _LOCAL_SCHEMES else text)
    core = import_fsspec(text).core
    try:
        fs, key = core.url_to_fs(text, **dict(storage_options or {}))
    except ImportError as exc:  # the filesystem's own package (s3fs, gcsfs) is missing
        raise InvalidError(f"{scheme}:// paths need {exc.name or 'their fsspec backend'}, "
                           f"which is not installed ({exc}; {EXTRA})", path=text) from None
    except ValueError as exc:
        raise InvalidError(f"no fsspec filesystem for {scheme}:// ({exc})", path=text) from None
    if not key.strip("/"):
        raise InvalidError("a checkpoint path needs a name below the store's root", path=text)
    return ObjectPath(fs, str(key), scheme)


def import_fsspec(path: str) -> Any:
    """fsspec; without it, InvalidError naming ``path`` (a URL) and the extra to install."""
    try:
        import fsspec
        import fsspec.core
    except ImportError:
        raise InvalidError("checkpoints on object stores need fsspec, which is not "
                           f"installed ({EXTRA})", path=path) from None
    return fsspec


def object_kind(path: ObjectPath) -> str | None:
    """"file" for an object, "directory" for a prefix holding objects, None for neither.

    Asks the store afresh (refresh=True): fsspec's listing cache may hold
    what another process has replaced since.
    """
    try:
        info = path.fs.info(path.key, refresh=True)
    except FileNotFoundError:
        return None
    kind = info.get("type")
    return kind if kind in ("file", "directory") else None


def is_s3(fs: Any) -> bool:
    """Whether ``fs`` is an s3fs filesystem, whose requests OCF makes itself."""
    return callable(getattr(fs, "call_s3", None)) and callable(getattr(fs, "split_path", None))


def head_object(path: ObjectPath) -> int | None:
    """The size of the object named exactly ``path``, None if there is none.

    Never lists [R-COMMIT-006]: on S3 this is one HEAD request, where
    ``fs.info`` would list the prefix ``path/`` when the object is missing.
    Other filesystems answer through ``fs.info`` (asked afresh, refresh=True:
    fsspec's listing cache may hold what another process has replaced
    since); whatever is not an object there counts as none.
    """
    fs = path.fs
    if is_s3(fs):
        bucket, key, version_id = fs.split_path(path.key)
        version = {"VersionId": version_id} if version_id else {}
        try:
            head = fs.call_s3("head_object", fs.kwargs, Bucket=bucket, Key=key, **version)
        except FileNotFoundError:
            return None
        size = head.get("ContentLength")
    else:
        try:
            info = fs.info(path.key, refresh=True)
        except FileNotFoundError:
            return None
        if info.get("type") != "file":
            return None
        size = info.get("size")
    if not isinstance(size, int) or size < 0:
        raise NotFoundError(f"the store reports no valid size ({size!r})", path=path)
    return size


def object_size(path: ObjectPath, requirement: str) -> int:
    """The size of the object at ``path``; NotFoundError if it is not an object."""
    size = head_object(path)
    if size is None:
        raise NotFoundError("no object under this name", path=path, requirement=requirement)
    return size
