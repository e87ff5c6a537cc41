"""Hostile input, targeted: each failure built by hand from the byte layout (tests/helpers.py)
and its category pinned down: flipped bits, truncations, versions, features, limits, shard
names, overlapping blocks, missing or wrong shards."""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard
from helpers import (
    FOOTER_SIZE,
    INDEX_FILE_NAME,
    PREAMBLE_SIZE,
    BlockSpec,
    TensorSpec,
    build_file,
    crc,
    flip_bit,
    make_index,
    minimal_checkpoint,
    pad64,
    patch,
    plain_block,
    read_layout,
    set_footer_field,
    shard_file,
    write_file,
)
from hostile import (
    FILE_NAME,
    MAX_INDEX_BYTES,
    materialized,
    read_calls,
    snapshot,
    written_directory,
)
from memory_support import traced_memory

import ocf
from ocf.v1 import index_pb2, tensor_pb2

# -- targeted, deterministic cases -------------------------------------------------


@dataclass(frozen=True)
class HandBuilt:
    """A checkpoint built by hand: files, where each tensor's stored bytes are, the values."""

    form: str
    files: dict[str, bytes]
    blocks: dict[str, tuple[str, int, int]]  # key -> (file, start, end) of its stored bytes
    values: dict[str, np.ndarray]


def _plain_single_file() -> HandBuilt:
    alpha = np.arange(16, dtype="<f4").reshape(4, 4) - 5.5
    beta = np.arange(10, dtype=np.uint8) * 25
    data = pad64(alpha.tobytes()) + pad64(beta.tobytes())
    index = make_index([
        TensorSpec("alpha", tensor_pb2.DTYPE_FLOAT32, (4, 4), plain_block(alpha.tobytes(), 64)),
        TensorSpec("beta", tensor_pb2.DTYPE_UINT8, (10,), plain_block(beta.tobytes(), 128)),
    ])
    return HandBuilt("file", {FILE_NAME: build_file(index, data)},
                     {"alpha": (FILE_NAME, 64, 128), "beta": (FILE_NAME, 128, 138)},
                     {"alpha": alpha, "beta": beta})


def _zstd_single_file() -> HandBuilt:
    gamma = (np.arange(8192) % 7).astype(np.uint8)  # two 4096-byte chunks
    frames = [zstandard.ZstdCompressor(level=3, write_content_size=True).compress(
        gamma[i:i + 4096].tobytes()) for i in (0, 4096)]
    stored = b"".join(frames)
    block = BlockSpec(64, len(stored), gamma.size, tuple(crc(f) for f in frames),
                      codec=tensor_pb2.CODEC_ZSTD, chunk_size=4096,
                      chunk_stored_lengths=tuple(len(f) for f in frames))
    index = make_index([TensorSpec("gamma", tensor_pb2.DTYPE_UINT8, (8192,), block)])
    return HandBuilt("file", {FILE_NAME: build_file(index, pad64(stored))},
                     {"gamma": (FILE_NAME, 64, 64 + len(stored))}, {"gamma": gamma})


def _directory() -> HandBuilt:
    delta = np.arange(32, dtype="<i2") * -77
    shard = shard_file(delta.tobytes())
    index = make_index([TensorSpec("delta", tensor_pb2.DTYPE_INT16, (32,),
                                   plain_block(delta.tobytes(), 64))],
                       shards=[("data-0.ocfd", len(shard))])
    return HandBuilt("directory", {INDEX_FILE_NAME: build_file(index), "data-0.ocfd": shard},
                     {"delta": ("data-0.ocfd", 64, 128)}, {"delta": delta})


HAND_BUILT: dict[str, Callable[[], HandBuilt]] = {
    "uncompressed_file": _plain_single_file,
    "zstd_file": _zstd_single_file,
    "directory": _directory,
}


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_flipping_any_bit_of_stored_tensor_bytes_gives_integrity_error_naming_the_key(
    tmp_path: Path, name: str,
) -> None:
    built = HAND_BUILT[name]()
    with materialized(tmp_path, built.form, built.files) as path, ocf.Reader(path) as reader:
        for key, value in built.values.items():
            assert snapshot(reader.read_tensor(key)) == snapshot(value)
    for key, (file_name, start, end) in built.blocks.items():
        for bit in range(8 * start, 8 * end):
            files = dict(built.files)
            files[file_name] = flip_bit(files[file_name], bit)
            with materialized(tmp_path, built.form, files) as path, ocf.Reader(path) as reader:
                for op, call in read_calls(reader, key).items():
                    with pytest.raises(ocf.IntegrityError) as caught:
                        call()
                    assert caught.value.key == key, (op, bit)
                    assert repr(key) in str(caught.value), (op, bit)


def test_flipping_bits_of_padding_and_reserved_bytes_changes_nothing(tmp_path: Path) -> None:
    built = _plain_single_file()
    blob = built.files[FILE_NAME]
    ignorable = [*range(8, PREAMBLE_SIZE), *range(138, read_layout(blob).index_offset)]
    for byte in ignorable:
        files = {FILE_NAME: flip_bit(blob, 8 * byte + byte % 8)}
        with materialized(tmp_path, "file", files) as path, ocf.Reader(path) as reader:
            for key, value in built.values.items():
                assert snapshot(reader.get_tensor(key)) == snapshot(value)
            reader.verify_all()


def test_flipped_bit_in_one_chunk_fails_only_reads_that_need_that_chunk(tmp_path: Path) -> None:
    rows = np.arange(4 * 1024, dtype="<u4").reshape(4, 1024)  # one 4096-byte chunk per row
    index = make_index([TensorSpec("rows", tensor_pb2.DTYPE_UINT32, (4, 1024),
                                   plain_block(rows.tobytes(), 64, chunk_size=4096))])
    blob = flip_bit(build_file(index, rows.tobytes()), 8 * (64 + 2 * 4096 + 100))
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with ocf.Reader(path) as reader:
        assert np.array_equal(reader.get_slice("rows", np.s_[0:2, 5:9]), rows[0:2, 5:9])
        assert np.array_equal(reader.get_slice("rows", 3), rows[3])
        with pytest.raises(ocf.IntegrityError, match="rows"):
            reader.get_slice("rows", np.s_[1:3, 0])


def test_get_slice_of_a_compressed_bool_tensor_checks_only_the_bytes_it_decodes(
    tmp_path: Path,
) -> None:
    # Three zstd chunks of valid bools. A partial read decodes only the first
    # chunk; the bool check must not look at the others, which it did not
    # decode (their buffer holds whatever memory was there before).
    values = np.arange(3 * 4096) % 3 == 0
    path = tmp_path / FILE_NAME
    ocf.save_file({"b": values}, path, compression="zstd", chunk_size=4096)
    with ocf.Reader(path) as reader:
        for _ in range(20):
            stale = np.full(values.size, 0xAB, dtype=np.uint8)  # leave non-0/1 bytes behind
            del stale
            assert np.array_equal(reader.get_slice("b", np.s_[:10]), values[:10])


def _boundaries(blob: bytes) -> dict[str, int]:
    layout = read_layout(blob)
    return {
        "empty": 0,
        "inside_preamble_magic": 4,
        "inside_preamble_reserved": 40,
        "right_after_preamble": PREAMBLE_SIZE,
        "inside_data": PREAMBLE_SIZE + 10,
        "right_before_index": layout.index_offset,
        "inside_index": layout.index_offset + layout.index_length // 2,
        "right_before_footer": layout.footer_offset,
        "inside_footer": layout.footer_offset + 20,
        "one_byte_short": layout.size - 1,
    }


@pytest.mark.parametrize("boundary", sorted(_boundaries(build_file(*minimal_checkpoint()))))
def test_truncation_at_a_structural_boundary_is_malformed(tmp_path: Path, boundary: str) -> None:
    blob = _plain_single_file().files[FILE_NAME]
    length = _boundaries(blob)[boundary]
    path = tmp_path / FILE_NAME
    path.write_bytes(blob[:length])
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(path)


def test_truncation_at_every_length_is_malformed(tmp_path: Path) -> None:
    blob = build_file(*minimal_checkpoint())
    path = tmp_path / FILE_NAME
    for length in range(len(blob)):
        path.write_bytes(blob[:length])
        with pytest.raises(ocf.MalformedError):
            ocf.Reader(path)


@pytest.mark.parametrize("major", [0, 2, 3, 0xFFFF])
def test_footer_major_version_other_than_1_is_unsupported_version(
    tmp_path: Path, major: int,
) -> None:
    blob = set_footer_field(build_file(*minimal_checkpoint()), "format_major", major)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.Reader(path)


def test_major_version_is_checked_before_the_index_is_read(tmp_path: Path) -> None:
    # Unparsable index bytes, a wrong CRC and a wrong index length: still a
    # version error, since the version comes first [R-VER-001].
    blob = build_file(b"\xff" * 40, pad64(b"\x01" * 8), major=2)
    blob = set_footer_field(set_footer_field(blob, "index_crc32c", 0), "index_length", 1 << 40)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.UnsupportedVersionError):
        ocf.Reader(path)


def test_other_minor_version_of_major_1_is_read(tmp_path: Path) -> None:
    path = write_file(tmp_path / FILE_NAME, *minimal_checkpoint(), minor=7)
    with ocf.Reader(path) as reader:
        assert reader.get_tensor("w").tolist() == [1.0, -2.0]


@pytest.mark.parametrize("feature", ["x-private-extension", "sparse_tensors", "", "ÜNKNOWN"])
def test_unknown_required_feature_is_refused(tmp_path: Path, feature: str) -> None:
    index, data = minimal_checkpoint()
    index.header.required_features.append(feature)
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.UnknownRequiredFeatureError):
        ocf.Reader(path)


def test_unknown_required_feature_is_reported_before_other_index_errors(tmp_path: Path) -> None:
    values = struct.pack("<2f", 1.0, -2.0)
    broken = BlockSpec(65, 8, 8, (crc(values),))  # misaligned offset: INVALID otherwise
    index = make_index([TensorSpec("w", tensor_pb2.DTYPE_FLOAT32, (2,), broken)],
                       required_features=["x-new-layout"])
    path = write_file(tmp_path / FILE_NAME, index, pad64(values))
    with pytest.raises(ocf.UnknownRequiredFeatureError):
        ocf.Reader(path)


def test_index_length_above_the_limit_is_refused_before_anything_is_allocated(
    tmp_path: Path,
) -> None:
    # A sparse file whose footer consistently places a 1 GiB + 1 byte index.
    path = tmp_path / FILE_NAME
    index_length = MAX_INDEX_BYTES + 1
    size = PREAMBLE_SIZE + index_length + FOOTER_SIZE
    with path.open("wb") as out:
        out.write(build_file(*minimal_checkpoint())[:PREAMBLE_SIZE])
        out.seek(size - FOOTER_SIZE)
        out.write(struct.pack("<QQIHH8s", PREAMBLE_SIZE, index_length, 0, 1, 0,
                              b"\x89OCFEND\n"))
    assert path.stat().st_size == size
    with traced_memory() as memory, pytest.raises(ocf.LimitExceededError):
        ocf.Reader(path)
    assert memory.peak < 1 << 20


@pytest.mark.parametrize("index_length", [MAX_INDEX_BYTES + 1, 1 << 63, (1 << 64) - 1])
def test_index_length_above_the_limit_is_limit_exceeded_even_if_inconsistent(
    tmp_path: Path, index_length: int,
) -> None:
    # The limit is checked before the index position [R-LIMIT-001].
    blob = set_footer_field(build_file(*minimal_checkpoint()), "index_length", index_length)
    path = tmp_path / FILE_NAME
    path.write_bytes(blob)
    with pytest.raises(ocf.LimitExceededError):
        ocf.Reader(path)


class _FileAccesses:
    """Records files opened and directories listed, through the audit hooks of PEP 578."""

    hooked = False
    events: list[tuple[str, str]] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.events is not None and event in ("open", "os.listdir", "os.scandir"):
            cls.events.append((event, os.fsdecode(args[0]) if args and args[0] is not None
                               and not isinstance(args[0], int) else repr(args)))

    @classmethod
    @contextlib.contextmanager
    def recording(cls) -> Iterator[list[tuple[str, str]]]:
        if not cls.hooked:
            sys.addaudithook(cls.hook)
            cls.hooked = True
        cls.events = []
        try:
            yield cls.events
        finally:
            cls.events = None


BAD_SHARD_PATHS = ["../x", "a/b", "/tmp/x", "..", ".", ".x", "index.ocf", "x" * 256, "a\\b",
                   "-x", "_x", "é", " x", "x\n", "x/", "./x"]


@pytest.mark.parametrize("shard_path", BAD_SHARD_PATHS)
def test_shard_path_that_is_not_a_plain_name_is_invalid_without_touching_the_filesystem(
    tmp_path: Path, shard_path: str,
) -> None:
    values = struct.pack("<2f", 1.0, -2.0)
    shard = shard_file(values)
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    # Put a valid shard where a reader that followed the path would find it.
    for candidate in (tmp_path / "x", checkpoint / "a" / "b"):
        candidate.parent.mkdir(exist_ok=True)
        candidate.write_bytes(shard)
    index = make_index([TensorSpec("w", tensor_pb2.DTYPE_FLOAT32, (2,),
                                   plain_block(values, 64))], shards=[(shard_path, len(shard))])
    index_file = write_file(checkpoint / INDEX_FILE_NAME, index)
    with _FileAccesses.recording() as accesses, pytest.raises(ocf.InvalidError):
        ocf.Reader(checkpoint)
    touched = {name for _, name in accesses}
    assert str(index_file) in touched  # the recording works: the index file was opened
    assert touched == {str(index_file)}, f"the reader touched {touched}"


def _two_tensors(offset_b: int, length_b: int, shard_b: int = 0) -> tuple[index_pb2.Index, bytes]:
    raw_a = np.arange(32, dtype="<f4").tobytes()  # 128 bytes at [64, 192)
    data = pad64(raw_a) + bytes(256)
    raw_b = data[offset_b - 64:offset_b - 64 + length_b]
    return make_index([
        TensorSpec("a", tensor_pb2.DTYPE_FLOAT32, (32,), plain_block(raw_a, 64)),
        TensorSpec("b", tensor_pb2.DTYPE_UINT8, (length_b,),
                   plain_block(raw_b, offset_b, shard=shard_b)),
    ], shards=[("", 0), ("other.ocfd", 64 + len(data))]), data


@pytest.mark.parametrize(("offset_b", "length_b"), [
    (64, 128),  # identical ranges
    (128, 128),  # overlaps the second half of a
    (64, 64),  # inside a, at its start
    (128, 1),  # one byte inside a
])
def test_overlapping_byte_ranges_are_invalid(
    tmp_path: Path, offset_b: int, length_b: int,
) -> None:
    index, data = _two_tensors(offset_b, length_b)
    (tmp_path / "other.ocfd").write_bytes(shard_file(data))
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.InvalidError):
        ocf.Reader(path)


@pytest.mark.parametrize(("offset_b", "length_b", "shard_b"), [
    (192, 64, 0),  # right after a: adjacent, not overlapping
    (64, 128, 1),  # same range, but in another shard
    (128, 0, 0),  # empty block inside a's range
])
def test_adjacent_empty_or_other_shard_byte_ranges_are_not_overlaps(
    tmp_path: Path, offset_b: int, length_b: int, shard_b: int,
) -> None:
    index, data = _two_tensors(offset_b, length_b, shard_b)
    (tmp_path / "other.ocfd").write_bytes(shard_file(data))
    path = write_file(tmp_path / FILE_NAME, index, data)
    with ocf.Reader(path) as reader:
        reader.verify_all()


def test_overlap_between_a_slice_and_a_whole_tensor_is_invalid(tmp_path: Path) -> None:
    raw = np.arange(16, dtype="<i4").tobytes()  # 64 bytes
    data = pad64(raw) + pad64(raw)
    index = make_index([
        TensorSpec("whole", tensor_pb2.DTYPE_INT32, (16,), plain_block(raw, 64)),
        TensorSpec("sliced", tensor_pb2.DTYPE_INT32, (32,), slices=(
            ((0,), (16,), plain_block(raw, 128)),
            ((16,), (16,), plain_block(raw, 64)),  # the bytes of "whole"
        )),
    ])
    path = write_file(tmp_path / FILE_NAME, index, data)
    with pytest.raises(ocf.InvalidError):
        ocf.Reader(path)


@pytest.mark.parametrize("which", [0, 1])
def test_missing_shard_is_not_found(tmp_path: Path, which: int) -> None:
    target, shards = written_directory(tmp_path)
    shards[which].unlink()
    with pytest.raises(ocf.NotFoundError) as caught:
        ocf.Reader(target)
    assert isinstance(caught.value, FileNotFoundError)
    assert shards[which].name in str(caught.value)


@pytest.mark.parametrize("change", ["one_byte_more", "one_byte_less", "empty", "doubled"])
def test_shard_file_of_the_wrong_size_is_malformed(tmp_path: Path, change: str) -> None:
    target, shards = written_directory(tmp_path)
    blob = shards[1].read_bytes()
    shards[1].write_bytes({"one_byte_more": blob + b"\0", "one_byte_less": blob[:-1],
                           "empty": b"", "doubled": blob + blob}[change])
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(target)


def test_shard_file_without_the_preamble_magic_is_malformed(tmp_path: Path) -> None:
    target, shards = written_directory(tmp_path)
    shards[0].write_bytes(patch(shards[0].read_bytes(), 0, b"\x89OCX"))
    with pytest.raises(ocf.MalformedError):
        ocf.Reader(target)


def test_directory_without_index_is_not_found(tmp_path: Path) -> None:
    target, _ = written_directory(tmp_path)
    (target / INDEX_FILE_NAME).unlink()
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(target)
