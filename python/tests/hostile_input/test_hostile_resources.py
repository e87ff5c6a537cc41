"""Hostile input and resources: memory in proportion to the file, every file descriptor
released, and shard names that are no regular file (links, FIFOs, directories)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    INDEX_FILE_NAME,
    TensorSpec,
    build_file,
    make_index,
    pad64,
    plain_block,
    write_file,
)
from hostile import (
    DIR_NAME,
    FILE_NAME,
    READ_OPS,
    Outcome,
    check_memory,
    read_calls,
    written_directory,
)
from memory_support import traced_memory

import ocf
from ocf.v1 import tensor_pb2

# -- resources: memory and file descriptors ----------------------------------------


@pytest.mark.parametrize("op", READ_OPS)
@pytest.mark.parametrize("dtype", [tensor_pb2.DTYPE_FLOAT32, tensor_pb2.DTYPE_COMPLEX128,
                                   tensor_pb2.DTYPE_BYTES])
def test_tensor_without_elements_but_huge_dimensions_reads_empty(
    tmp_path: Path, op: str, dtype: int,
) -> None:
    # The product of the non-zero dimensions is at most 2^58, so these indexes
    # are valid [R-TENSOR-003]; with items of at most 16 bytes (complex128) the
    # shape stays within 2^62 bytes, so NumPy holds it and every read works.
    for shape in [(0, 1 << 58), (1 << 58, 0), (0, 1 << 40, 1 << 18), (1 << 29, 0, 1 << 29)]:
        index = make_index([TensorSpec("z", dtype, shape, plain_block(b"", 64))])
        path = write_file(tmp_path / FILE_NAME, index)
        with ocf.Reader(path) as reader:
            result = read_calls(reader, "z")[op]()
        assert isinstance(result, np.ndarray)
        assert result.shape == shape
        assert result.size == 0


@pytest.mark.parametrize("shape", [(0, (1 << 58) + 1), ((1 << 29) + 1, 0, 1 << 29),
                                   (1 << 31, 0, 1 << 31), (0, 1 << 62)])
def test_tensor_without_elements_over_the_dimension_limit_is_refused(
    tmp_path: Path, shape: tuple[int, ...],
) -> None:
    # Just over 2^58, and the old limit of 2^62: LIMIT_EXCEEDED at open [R-TENSOR-003].
    index = make_index([TensorSpec("z", tensor_pb2.DTYPE_UINT8, shape, plain_block(b"", 64))])
    path = write_file(tmp_path / FILE_NAME, index)
    with pytest.raises(ocf.LimitExceededError) as caught:
        ocf.Reader(path)
    assert caught.value.requirement == "R-TENSOR-003"


def test_many_slices_allocate_memory_in_proportion_to_the_file(tmp_path: Path) -> None:
    # 65536 one-element slices, the most a tensor of rank 1 may have [R-SLICE-004].
    count = 65536
    values = (np.arange(count) % 256).astype(np.uint8)
    data = b"".join(pad64(bytes([v])) for v in values.tolist())
    index = make_index([TensorSpec("t", tensor_pb2.DTYPE_UINT8, (count,), slices=tuple(
        ((k,), (1,), plain_block(bytes([values[k]]), 64 + 64 * k)) for k in range(count)))])
    blob = build_file(index, data)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with traced_memory() as memory, ocf.Reader(path) as reader:
        assert np.array_equal(reader.read_tensor("t"), values)
    check_memory(Outcome(peak=memory.peak), {FILE_NAME: blob}, FILE_NAME)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


@needs_proc
@pytest.mark.parametrize("form", ["file", "directory"])
def test_closing_a_reader_releases_every_file_descriptor(tmp_path: Path, form: str) -> None:
    target = tmp_path / (FILE_NAME if form == "file" else DIR_NAME)
    ocf.save_file({"a": np.arange(600, dtype=np.int64), "b": np.arange(300, dtype=np.int32)},
                  target, layout=form, max_shard_size=4096)
    before = _open_descriptors()
    for _ in range(5):
        with ocf.Reader(target) as reader:
            reader.read_tensor("a")
    assert _open_descriptors() == before


@needs_proc
def test_failing_to_open_a_checkpoint_releases_every_file_descriptor(tmp_path: Path) -> None:
    target, shards = written_directory(tmp_path)
    shards[1].unlink()  # the first shard opens, the second is missing
    before = _open_descriptors()
    for _ in range(5):
        with pytest.raises(ocf.NotFoundError):
            ocf.Reader(target)
    assert _open_descriptors() == before


@pytest.mark.parametrize("kind", ["directory", "symlink_loop", "dangling_symlink"])
def test_shard_name_of_something_other_than_a_regular_file_is_not_found(
    tmp_path: Path, kind: str,
) -> None:
    # A name that passes [R-SHARD-001] but is not a regular file: "a reader
    # MUST report NOT_FOUND when no regular file has that name" [R-SHARD-002].
    # The recorded length is the directory's own st_size, so that a size check
    # alone cannot catch it.
    checkpoint = tmp_path / DIR_NAME
    checkpoint.mkdir()
    shard = checkpoint / "data.ocfd"
    if kind == "directory":
        shard.mkdir()
    elif kind == "symlink_loop":
        shard.symlink_to(shard.name)
    else:
        shard.symlink_to("missing.ocfd")
    length = max(shard.stat().st_size if kind == "directory" else 64, 64)
    index = make_index([TensorSpec("e", tensor_pb2.DTYPE_UINT8, (0,), plain_block(b"", 64))],
                       shards=[(shard.name, length)])
    write_file(checkpoint / INDEX_FILE_NAME, index)
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(checkpoint)


def _two_shard_checkpoint(directory: Path) -> Path:
    """A directory checkpoint whose tensors live in external shard files."""
    ocf.save_file({"a": np.arange(64, dtype=np.float32), "b": np.ones(64, np.float32)},
                  directory, layout="directory", max_shard_size=320)
    shards = sorted(p for p in directory.iterdir() if p.name != INDEX_FILE_NAME)
    assert shards, "the save made no external shard"
    return shards[0]


def test_a_shard_symlinked_to_a_valid_shard_elsewhere_is_not_followed(tmp_path: Path) -> None:
    # [R-SHARD-002]: a name is resolved in the directory, never through a link elsewhere.
    shard = _two_shard_checkpoint(tmp_path / DIR_NAME)
    elsewhere = tmp_path / "elsewhere.ocfd"
    shard.rename(elsewhere)  # the same, valid bytes, outside the checkpoint
    shard.symlink_to(elsewhere)
    with pytest.raises(ocf.NotFoundError, match=r"symbolic link, which is never followed "
                       r".*\[R-SHARD-002\]"):
        ocf.load_file(tmp_path / DIR_NAME)


def test_no_message_quotes_bytes_of_a_file_planted_as_a_shard(tmp_path: Path) -> None:
    secret = b"root:x:0:0:root:/root:/bin/bash\n" * 4
    shard = _two_shard_checkpoint(tmp_path / DIR_NAME)
    length = shard.stat().st_size
    outside = tmp_path / "passwd"
    outside.write_bytes(secret.ljust(length, b"#")[:length])
    shard.unlink()
    shard.symlink_to(outside)
    with pytest.raises(ocf.NotFoundError) as linked:
        ocf.load_file(tmp_path / DIR_NAME)
    shard.unlink()
    shard.write_bytes(outside.read_bytes())  # a regular file of the right size, not a shard
    with pytest.raises(ocf.MalformedError, match="does not start with the preamble") as planted:
        ocf.load_file(tmp_path / DIR_NAME)
    for error in (linked.value, planted.value):
        text = str(error)
        assert "root:x" not in text
        assert secret[:8].hex(" ") not in text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_shard_name_of_a_named_pipe_is_not_found_without_blocking(tmp_path: Path) -> None:
    checkpoint = tmp_path / DIR_NAME
    checkpoint.mkdir()
    fifo = checkpoint / "data.ocfd"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    index = make_index([TensorSpec("e", tensor_pb2.DTYPE_UINT8, (0,), plain_block(b"", 64))],
                       shards=[("data.ocfd", 64)])
    write_file(checkpoint / INDEX_FILE_NAME, index)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            ocf.Reader(checkpoint).close()
            outcome.append(None)
        except BaseException as exc:  # reported by the main thread
            outcome.append(exc)

    thread = threading.Thread(target=open_it, daemon=True)
    thread.start()
    # Generous: an open that blocks on the pipe never returns by itself, and a busy
    # machine must not make a slow open look like a blocked one.
    thread.join(timeout=15)
    blocked = thread.is_alive()
    if blocked:  # unblock the reader's open() by opening the pipe's other end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=3)
    assert not blocked, "opening the checkpoint blocked on a named pipe named as a shard"
    assert outcome
    # "a reader MUST report NOT_FOUND when no regular file has that name" [R-SHARD-002]
    assert isinstance(outcome[0], ocf.NotFoundError), outcome


def test_a_file_truncated_while_open_is_malformed_when_first_mapped(tmp_path: Path) -> None:
    """Another process may shorten a checkpoint file between the open, which checked its
    length, and the first mapped read: that read fails with an OCF error naming the
    file, not with the mapping's own exception."""
    path = tmp_path / "t.ocf"
    ocf.save_file({"w": np.arange(1 << 16, dtype=np.float32)}, path)
    with ocf.Reader(path) as reader:
        os.truncate(path, 4096)
        with pytest.raises(ocf.MalformedError, match="truncated while open") as raised:
            reader.get_slice("w", np.s_[0:16], mapped=True)
    assert "t.ocf" in str(raised.value)
