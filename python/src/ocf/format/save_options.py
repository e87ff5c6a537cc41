"""The options every ``save_file`` and ``save`` takes, and their signature, typed once.

:class:`WriteOptions` names the keyword arguments that go on to
:class:`ocf.Writer`; every adapter's ``save_file`` and ``save`` take them
as ``**options: Unpack[WriteOptions]``. :class:`SaveFile` is the signature
of every ``save_file`` (``blocking=False`` returns a :class:`SaveHandle`,
a blocking save None), given to each adapter's function by
:func:`save_file_signature` rather than written out again in each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import (
    TYPE_CHECKING,
    Concatenate,
    Literal,
    ParamSpec,
    Protocol,
    TypedDict,
    TypeVar,
    cast,
    overload,
)

from ocf.format.async_save import SaveHandle
from ocf.format.storage.backend import Layout
from ocf.format.storage.location import StorageOptions

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack

__all__ = ["SaveFile", "WriteOptions", "save_file_signature"]


class WriteOptions(TypedDict, total=False):
    """The options of a save, as :class:`ocf.Writer` takes them (its defaults apply).

    ``layout`` is ``"file"`` or ``"directory"`` (an index and shard files);
    ``compression`` None or ``"zstd"``; ``storage_options`` go to fsspec for a
    URL such as ``s3://bucket/ckpt``; ``incremental`` and ``base`` write
    format 1.2's pooled checkpoints. A name not listed here is a TypeError at
    the call, before anything is written.
    """

    layout: Layout
    compression: str | None
    compression_level: int
    byte_shuffle: bool
    chunk_size: int
    max_shard_size: int
    threads: int | None
    write_id: str | None
    storage_options: StorageOptions | None
    incremental: bool
    base: str | os.PathLike[str] | None


# What a save_file writes: a mapping of key to the framework's tensors, or
# (ocf.torch.state_trees.save_tree) a nested state dict.
Saved_contra = TypeVar("Saved_contra", contravariant=True)
Saved = TypeVar("Saved")
Options = ParamSpec("Options")


class SaveFile(Protocol[Saved_contra]):
    """``save_file(tensors, path, metadata=None, *, blocking=True, **options)``: write
    a mapping of key to tensor as one checkpoint; a SaveHandle when not ``blocking``
    (either, to type checkers, when ``blocking`` is only known to be a bool)."""

    @overload
    def __call__(self, tensors: Saved_contra, path: str | os.PathLike[str],
                 metadata: Mapping[str, object] | None = None, *,
                 blocking: Literal[True] = True, **options: Unpack[WriteOptions]) -> None: ...

    @overload
    def __call__(self, tensors: Saved_contra, path: str | os.PathLike[str],
                 metadata: Mapping[str, object] | None = None, *,
                 blocking: Literal[False], **options: Unpack[WriteOptions]) -> SaveHandle: ...

    @overload
    def __call__(self, tensors: Saved_contra, path: str | os.PathLike[str],
                 metadata: Mapping[str, object] | None = None, *,
                 blocking: bool, **options: Unpack[WriteOptions]) -> SaveHandle | None: ...


def save_file_signature(
        function: Callable[Concatenate[Saved, str | os.PathLike[str], Options],
                           SaveHandle | None]) -> SaveFile[Saved]:
    """``function`` itself, typed with :class:`SaveFile`'s overloads (so that a
    blocking call's result is None to type checkers, and a background one's a
    SaveHandle). ``function`` takes what it saves, the path, then the
    arguments of :class:`SaveFile`: ``metadata``, ``blocking`` and the
    :class:`WriteOptions`, which the tests of every adapter pin down."""
    return cast("SaveFile[Saved]", function)
