"""Local files: the storage backend of paths on this machine's file systems.

Reads go through preads and memory maps; writes go to a temporary name,
are fsynced and renamed, and the directory is fsynced after the rename so
the new name survives a power cut (spec/commit.md) [R-COMMIT-001]
[R-COMMIT-002]. Every file is opened as a hostile reader must open it: a
path may name a FIFO (opening it blocks until a writer appears), a device
(``/dev/zero`` reads forever), a directory or a symbolic link loop, so
files are opened without blocking and anything but a regular file is
refused (:func:`open_regular`).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from io import BufferedReader
from pathlib import Path
from typing import BinaryIO, Literal

from ocf.format.commit import (
    fsync_dir,
    new_write_id,
    publish,
    remove_quietly,
    temp_path,
)
from ocf.format.container import INDEX_FILE_NAME, PREAMBLE, PREAMBLE_SIZE, check_preamble, padding
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, NotFoundError
from ocf.format.storage.directory_lock import DirectoryLock, lock_directory
from ocf.format.storage.location import Location
from ocf.format.storage.writeback import start_writeback

# Writes smaller than this are gathered in memory, and written together
# once the gathered bytes reach it, so that many small tensors do not cost
# a system call each while memory stays bounded.
_SMALL_WRITE = 1 << 20
_ZEROS = bytes(64)
# Writeback to disk is started every this many bytes (see _start_writeback).
_WRITEBACK_STEP = 64 << 20
# Most buffers one os.writev takes (Linux's IOV_MAX; POSIX guarantees at least 16).
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16
# Uncompressed blocks are read in groups of chunks of about this many bytes.
_READ_GROUP = 4 << 20


def _local(path: Location) -> Path:
    if not isinstance(path, Path):
        raise TypeError(f"{path!r} is not a local path")
    return path


def _open_nonblocking(path: str | os.PathLike[str], what: str, requirement: str | None,
                      key: str | None = None, *, follow: bool = True,
                      dir_fd: int | None = None, shown: Path | None = None) -> int:
    """A read-only descriptor of ``path`` (relative to ``dir_fd`` if given; messages
    name ``shown`` then), opened without blocking on a FIFO; unless ``follow``, a
    symbolic link is refused (ELOOP) instead of followed."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(path, flags, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise NotFoundError(f"{what} cannot be opened: {exc.strerror}",
                            path=os.fspath(shown or path), key=key,
                            requirement=requirement) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise  # the environment (permissions, I/O), not the checkpoint
        why = "a symbolic link loop" if follow else \
            "a symbolic link, which is never followed out of the checkpoint's directory"
        raise NotFoundError(f"{what} is {why}", path=os.fspath(shown or path), key=key,
                            requirement=requirement) from None


def _regular_or_close(fd: int, path: str | os.PathLike[str], what: str,
                      requirement: str | None, key: str | None = None) -> os.stat_result:
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise NotFoundError(f"{what} is not a regular file", path=os.fspath(path), key=key,
                            requirement=requirement)
    return status


def open_regular(path: str | os.PathLike[str], what: str, *,
                 key: str | None = None) -> BufferedReader:
    """The regular file ``path`` open for binary reading.

    ``what`` names the file in messages ("the TensorFlow data file"). NotFoundError
    when nothing is there, when it is a link loop, or when it is not a regular
    file. Other failures (permissions, I/O) are the environment's and propagate.
    """
    fd = _open_nonblocking(path, what, None, key)
    _regular_or_close(fd, path, what, None, key)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _checked_shard(local: Path, fd: int, length: int, requirement: str) -> LocalInput:
    """The shard open at ``fd``: a regular file of ``length`` bytes that starts with
    the preamble (NotFoundError, MalformedError) [R-SHARD-002]."""
    status = _regular_or_close(fd, local, "shard named by the index", requirement)
    shard = LocalInput(local, fd, status.st_size)
    try:
        if shard.size != length:
            raise MalformedError(f"shard is {shard.size} bytes, the index says "
                                 f"{length}: truncated or replaced", path=local,
                                 requirement=requirement)
        check_preamble(shard.pread(PREAMBLE_SIZE, 0), local, quote=False)
    except BaseException:
        shard.close()
        raise
    return shard


def _pread_exact(fd: int, length: int, offset: int, path: Path) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise MalformedError(f"file ended after {offset + len(data)} bytes, expected at "
                             f"least {offset + length}: truncated", path=path)
    return data


class LocalInput:
    """An open local file holding an index or tensor bytes; memory-mapped on first use."""

    mappable = True
    read_group = _READ_GROUP

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        self._map: mmap.mmap | None = None

    def mapping(self) -> mmap.mmap:
        if self._map is None:
            try:
                self._map = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ)
            except ValueError as error:  # the file is shorter than when it was opened
                raise MalformedError(
                    f"file shrank below the {self.size} bytes it had when opened: "
                    "truncated while open", path=self.path) from error
        return self._map

    def pread(self, length: int, offset: int) -> bytes:
        return _pread_exact(self.fd, length, offset, self.path)

    def read_into(self, buffer: memoryview, offset: int) -> None:
        while buffer:
            count = os.preadv(self.fd, [buffer], offset)
            if count == 0:
                raise MalformedError("file ended early: truncated", path=self.path)
            buffer, offset = buffer[count:], offset + count

    def close(self) -> None:
        if self._map is not None:
            # Arrays may still view the map; it then closes when they are gone.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        os.close(self.fd)


class LocalOutput:
    """One local file being written: preamble first, then 64-byte aligned blocks.

    Written under :attr:`path` (a temporary name, or the final one for a
    shard, whose name no reader opens before an index names it), published
    under :attr:`final` by renaming.
    """

    def __init__(self, path: Path, final: Path) -> None:
        self.path = path
        self.final = final
        self._file = open(path, "xb", buffering=0)  # noqa: SIM115 - closed in close_durably()
        self._pending = bytearray(PREAMBLE)
        self.position = PREAMBLE_SIZE
        self._in_file = 0  # bytes handed to the operating system so far
        self._writeback_mark = 0  # bytes whose writeback to disk has been started

    def align(self) -> None:
        pad = padding(self.position)
        if pad:
            self._pending += _ZEROS[:pad]
            self.position += pad

    def write(self, data: memoryview | bytes) -> None:
        size = len(data)
        if size < _SMALL_WRITE:
            self._pending += data
            if len(self._pending) >= _SMALL_WRITE:
                self.flush()
        else:
            self.flush()
            self._write_all(memoryview(data))
        self.position += size

    def write_many(self, buffers: Sequence[memoryview]) -> None:
        """Write the byte buffers one after the other, as many write() calls would, but
        handed to the operating system together (os.writev), none of them copied."""
        self.flush()
        for first in range(0, len(buffers), _IOV_MAX):
            group = buffers[first:first + _IOV_MAX]
            size = sum(buffer.nbytes for buffer in group)
            written = os.writev(self._file.fileno(), group)
            self._in_file += written
            self.position += size
            if written < size:  # cut short (rare for a file): the rest, without writev
                self._write_all(memoryview(b"".join(group))[written:])
        if self._in_file - self._writeback_mark >= _WRITEBACK_STEP:
            self._start_writeback()

    def flush(self) -> None:
        if self._pending:
            self._write_all(memoryview(self._pending))
            self._pending = bytearray()

    def _write_all(self, view: memoryview) -> None:
        view = view.cast("B")
        while view:
            written = self._file.write(view)
            view = view[written:]
            self._in_file += written
        if self._in_file - self._writeback_mark >= _WRITEBACK_STEP:
            self._start_writeback()

    def _start_writeback(self) -> None:
        """Have the kernel start writing what we wrote so far to disk, without waiting
        (:mod:`ocf.format.storage.writeback`): disk writes then overlap with the rest
        of the save instead of all waiting for the final fsync."""
        start_writeback(self._file.fileno(), self._writeback_mark,
                        self._in_file - self._writeback_mark)
        self._writeback_mark = self._in_file

    def close_durably(self) -> None:
        self.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def publish(self) -> None:
        if self.path != self.final:
            publish(self.path, self.final)  # rename, then fsync of the directory

    def discard(self) -> None:
        self._file.close()
        remove_quietly(self.path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path``, durably, only if the block completes.

    Written under the temporary name of a new write beside ``path``, fsynced,
    renamed over ``path``, and the directory fsynced [R-COMMIT-001]. Created
    with mode 0o666 less the umask, as any new file.
    """
    target = Path(path)
    temp = temp_path(target, new_write_id())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        publish(temp, target)
    except BaseException:
        remove_quietly(temp)
        raise


class LocalBackend:
    """The :class:`ocf.format.storage.backend.Backend` of local paths."""

    temporary_names = True
    parallel_requests = 1  # a system call each: nothing to overlap

    def resolve_checkpoint(self, where: Location) -> Path:
        target = _local(where)
        if target.is_dir():
            index = target / INDEX_FILE_NAME
            if not index.is_file():
                raise NotFoundError(
                    f"directory holds no committed checkpoint ({INDEX_FILE_NAME} is missing; "
                    "files there may be leftovers of an unfinished write)",
                    path=target, requirement="R-COMMIT-003")
            return index
        if not target.is_file():
            raise NotFoundError("no checkpoint at this path", path=target,
                                requirement="R-FILE-008")
        return target

    def open_index(self, path: Location, *, follow: bool = True) -> LocalInput:
        local = _local(path)
        fd = _open_nonblocking(local, "index file", "R-FILE-008", follow=follow)
        status = _regular_or_close(fd, local, "index file", "R-FILE-008")
        return LocalInput(local, fd, status.st_size)

    def open_shard(self, path: Location, length: int) -> LocalInput:
        local = _local(path)
        # O_NONBLOCK: a FIFO planted under a shard's name must not hang the reader;
        # O_NOFOLLOW: a shard is a file of this directory, never one a link points to.
        fd = _open_nonblocking(local, "shard file named by the index", "R-SHARD-002",
                               follow=False)
        return _checked_shard(local, fd, length, "R-SHARD-002")

    def open_pool_shard(self, pool: Location, name: str, length: int) -> LocalInput:
        directory = _local(pool)
        local = directory / name
        # Neither the pool directory nor the object is ever reached through a link: the
        # object is opened relative to the directory opened without following one.
        try:
            dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                             | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise  # the environment (permissions, I/O), not the checkpoint
            raise NotFoundError("the managed root has no pool directory (nothing there, a "
                                "file, or a symbolic link, which is never followed)",
                                path=directory, requirement="R-POOL-003") from None
        try:
            fd = _open_nonblocking(name, "pool object named by the index", "R-POOL-003",
                                   follow=False, dir_fd=dir_fd, shown=local)
        finally:
            os.close(dir_fd)
        return _checked_shard(local, fd, length, "R-POOL-003")

    def read_small(self, path: Location, limit: int) -> bytes | None:
        local = _local(path)
        try:
            # O_NONBLOCK: a FIFO planted under the name must not hang the reader.
            fd = os.open(local, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise InvalidError(f"expected a regular file, found {kind}", path=local)
        with os.fdopen(fd, "rb") as file:
            data = file.read(limit + 1)  # one byte more tells a file grown past the limit
        if len(data) > limit:
            raise LimitExceededError(f"file is larger than {limit} bytes", path=local)
        return data

    def exists(self, path: Location) -> bool:
        return os.path.exists(_local(path))

    def list_names(self, directory: Location) -> list[str]:
        try:
            return os.listdir(_local(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def entry_name(self, directory: str, path: str) -> str | None:
        name = os.path.basename(path)
        inside = os.path.abspath(path) == os.path.abspath(os.path.join(directory, name))
        return name if inside else None

    def prepare_target(self, target: Location, layout: Literal["file", "directory"]) -> bool:
        local = _local(target)
        if layout == "file":
            if local.is_dir():
                raise InvalidError("target is a directory; use layout='directory' to write "
                                   "the multi-file form", path=local)
            local.parent.mkdir(parents=True, exist_ok=True)
            return False
        if local.exists() and not local.is_dir():
            raise InvalidError("target exists and is not a directory", path=local)
        if local.exists():
            return False
        local.mkdir(parents=True)
        fsync_dir(local.parent)  # the new directory's name is durable
        return True

    def remove_created_directory(self, target: Location) -> None:
        with contextlib.suppress(OSError):  # only if nothing else was put there
            _local(target).rmdir()

    def make_directory(self, directory: Location) -> None:
        """Several processes may run this at once (the writers of one multi-writer
        save), so it never asks "does it exist?" before creating: mkdir with
        exist_ok succeeds whoever wins the race, and only then is the result checked."""
        local = _local(directory)
        with contextlib.suppress(FileExistsError):  # raised when a file has the name
            local.mkdir(parents=True, exist_ok=True)
        if not local.is_dir():
            raise InvalidError("target exists and is not a directory", path=local)
        fsync_dir(local.absolute().parent)  # the directory's name is durable

    def create_output(self, final: Location, write_id: str | None) -> LocalOutput:
        local = _local(final)
        return LocalOutput(local if write_id is None else temp_path(local, write_id), local)

    def sync_directory(self, directory: Location) -> None:
        fsync_dir(_local(directory))

    def write_small(self, path: Location, data: bytes) -> None:
        with atomic_output(_local(path)) as file:
            file.write(data)

    def remove(self, path: Location) -> None:
        remove_quietly(_local(path))

    def remove_names(self, directory: Location, names: Sequence[str]) -> None:
        for name in names:
            remove_quietly(_local(directory) / name)

    def remove_checkpoint(self, path: Location) -> None:
        local = _local(path)
        if local.is_dir() and not local.is_symlink():
            remove_quietly(local / INDEX_FILE_NAME)  # first, so that what remains never opens
            shutil.rmtree(local, ignore_errors=True)
        else:
            remove_quietly(local)


    def lock_writer(self, directory: Location) -> DirectoryLock:
        return lock_directory(_local(directory))


LOCAL = LocalBackend()
