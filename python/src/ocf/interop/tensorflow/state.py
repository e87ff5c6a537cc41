"""TensorFlow's ``checkpoint`` state file: which checkpoints a directory holds.

A text-format CheckpointState proto (ocf.tensorflow.v1.checkpoint_state):
``model_checkpoint_path`` names the latest prefix and
``all_model_checkpoint_paths`` every kept one, oldest first. TensorFlow 2
writes paths relative to the directory, tf.compat.v1 Savers absolute ones.
The file is written to a temporary name and renamed, as TensorFlow does, so
a reader never sees half a state file.

The file is hostile input: a path it names may lead anywhere (``../x``,
``/etc/passwd``). Every path is refused unless it lies inside the directory
[R-TF-001], before any file it names is opened; a caller who trusts the
file passes ``allow_outside=True``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from google.protobuf import text_format

from ocf.format.errors import InvalidError, LimitExceededError, MalformedError
from ocf.format.storage.local import atomic_output, open_regular
from ocf.tensorflow.v1 import checkpoint_state_pb2

STATE_FILENAME = "checkpoint"
MAX_STATE_BYTES = 16 << 20


def read_checkpoint_state(
    directory: str | os.PathLike[str], *, allow_outside: bool = False
) -> tuple[str, list[str]]:
    """(latest prefix, every kept prefix) from ``directory/checkpoint``.

    Relative paths are joined to ``directory`` (as tf.train.get_checkpoint_state
    does), so the results are usable prefixes. A path whose files would lie
    outside ``directory`` (``../other/ckpt``, an absolute path elsewhere, or
    one through a symbolic link leading out) is INVALID, naming the state
    file and the path [R-TF-001], unless ``allow_outside`` is true: only a
    caller that trusts the state file should pass it. Absolute paths inside
    the directory, which TensorFlow writes when given one, are accepted.

    Examples:
        >>> state = ocf.tensorflow.read_checkpoint_state("train")  # train/checkpoint
    """
    path = os.path.join(os.fspath(directory), STATE_FILENAME)
    state = _parse(path)
    return _resolve(directory, state.model_checkpoint_path, path, allow_outside), [
        _resolve(directory, p, path, allow_outside) for p in state.all_model_checkpoint_paths
    ]


def _parse(path: str) -> checkpoint_state_pb2.CheckpointState:
    with open_regular(path, "TensorFlow checkpoint state file") as f:
        data = f.read(MAX_STATE_BYTES + 1)
    if len(data) > MAX_STATE_BYTES:
        raise LimitExceededError(f"state file exceeds {MAX_STATE_BYTES} bytes", path=path)
    state = checkpoint_state_pb2.CheckpointState()
    try:
        text_format.Parse(data.decode("utf-8"), state)
    except (text_format.ParseError, UnicodeDecodeError) as error:
        raise MalformedError(f"unparsable checkpoint state: {error}", path=path) from None
    if not state.model_checkpoint_path:
        raise MalformedError("checkpoint state names no model_checkpoint_path", path=path)
    return state


def _resolve(directory: str | os.PathLike[str], prefix: str, state_path: str,
             allow_outside: bool) -> str:
    """``prefix`` as a usable path; INVALID when it leaves ``directory`` and that is not
    allowed, or holds a NUL no file name can [R-TF-001]."""
    if "\0" in prefix:
        raise InvalidError(f"checkpoint state names a path holding a NUL byte: {prefix!r}",
                           path=state_path, requirement="R-TF-001")
    resolved = prefix if os.path.isabs(prefix) else os.path.join(os.fspath(directory), prefix)
    if not allow_outside and not _inside(directory, resolved):
        raise InvalidError(
            f"checkpoint state names {prefix!r}, outside the directory {os.fspath(directory)!r}"
            "; nothing it names was opened (if it is trusted, open that prefix itself)",
            path=state_path, requirement="R-TF-001")
    return resolved


def _inside(directory: str | os.PathLike[str], prefix: str) -> bool:
    """Whether the files of ``prefix`` (``PREFIX.index``, ``PREFIX.data-*``: names in the
    prefix's parent) lie in ``directory`` or below, with every ``..`` and symbolic link
    of the parent resolved."""
    root = os.path.realpath(directory)
    parent = os.path.realpath(os.path.dirname(prefix) or os.curdir)
    return os.path.commonpath([root, parent]) == root


def write_checkpoint_state(
    directory: str | os.PathLike[str],
    latest_prefix: str | os.PathLike[str],
    all_prefixes: Sequence[str | os.PathLike[str]],
) -> None:
    """Write ``directory/checkpoint`` atomically; prefixes inside it are stored relative.

    ``latest_prefix`` is appended to ``all_prefixes`` if missing, as
    TensorFlow requires the latest to be the last of the list.

    Examples:
        >>> ocf.tensorflow.write_checkpoint_state("exported", "ckpt-1", ["ckpt-1"])
    """
    directory = os.fspath(directory)
    latest = _relative(directory, latest_prefix)
    kept = [_relative(directory, p) for p in all_prefixes if _relative(directory, p) != latest]
    state = checkpoint_state_pb2.CheckpointState(
        model_checkpoint_path=latest, all_model_checkpoint_paths=[*kept, latest]
    )
    target = os.path.join(directory, STATE_FILENAME)
    with atomic_output(target) as f:
        f.write(text_format.MessageToString(state).encode("utf-8"))


def _relative(directory: str, prefix: str | os.PathLike[str]) -> str:
    text = os.fspath(prefix)
    if not os.path.isabs(text):
        return text
    relative = os.path.relpath(text, directory)
    return text if relative.startswith(os.pardir) else relative
