"""Damaged and hostile TensorFlow checkpoints: every failure is an OCFError of the right
category naming the file and key, found without allocating what the file claims.

Files are built by hand (bundle_files.py, tf_support.table) or written by
BundleWriter and then damaged byte by byte. Partitioned tensors have their own
file, test_tf_bundle_partitioned.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tf_support
from bundle_files import (
    FLOATS,
    SUB_BYTE_CODES,
    entry,
    float_entry,
    header,
    one_tensor_files,
    sliced,
    write_files,
)
from memory_support import traced_memory
from tf_support import framed, varint

from ocf.format.errors import (
    IntegrityError,
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    OCFError,
    UnknownRequiredFeatureError,
    UnsupportedVersionError,
)
from ocf.tensorflow import (
    BundleReader,
    BundleWriter,
    read_checkpoint_state,
    write_checkpoint_state,
)
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb


def valid_files(tmp_path: Path) -> Path:
    """A small checkpoint with a numeric, a string and a partitioned tensor."""
    with BundleWriter(tmp_path / "ckpt") as writer:
        writer.add("f", np.array([1.0, 2.0, 3.0], np.float32))
        writer.add("s", np.array([b"ab", b"", b"xyz"], dtype=object))
        writer.add_slice("p", (4,), (0,), np.array([1, 2], np.int16))
        writer.add_slice("p", (4,), (2,), np.array([3, 4], np.int16))
    return tmp_path / "ckpt"


def open_and_read_all(prefix: Path) -> None:
    with BundleReader(prefix) as reader:
        for key in reader:
            reader.read(key)


def test_every_truncation_of_the_index_is_an_ocf_error(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    categories = set()
    for length in range(len(original)):
        index.write_bytes(original[:length])
        with pytest.raises(OCFError) as caught:
            open_and_read_all(prefix)
        categories.add(type(caught.value))
    assert categories == {MalformedError}


def test_every_flipped_index_byte_is_detected(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    for i in range(len(original)):
        index.write_bytes(original[:i] + bytes([original[i] ^ 0x41]) + original[i + 1 :])
        if i >= len(original) - 48 and i < len(original) - 8:
            # Footer handles and padding: no checksum covers them, so a flip
            # may point at other bytes; it must still fail cleanly or be harmless.
            with contextlib.suppress(OCFError):
                open_and_read_all(prefix)
            continue
        with pytest.raises((IntegrityError, MalformedError)):
            open_and_read_all(prefix)


def test_every_flipped_data_byte_is_an_integrity_error_naming_the_key(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    original = data.read_bytes()
    for i in range(len(original)):
        data.write_bytes(original[:i] + bytes([original[i] ^ 0x01]) + original[i + 1 :])
        with pytest.raises(OCFError) as caught:
            open_and_read_all(prefix)
        # A flipped varint length can also make the string sizes inconsistent.
        assert isinstance(caught.value, IntegrityError | InvalidError)
        assert caught.value.key in ("f", "s", "p")


def test_flipped_data_byte_is_read_when_verification_is_off(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    original = data.read_bytes()
    data.write_bytes(bytes([original[0] ^ 0x01]) + original[1:])
    with BundleReader(prefix, verify=False) as reader:
        assert reader.read("f")[0] != 1.0


def test_truncated_data_file_is_malformed_naming_file_and_key(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:5])
    with BundleReader(prefix) as reader, pytest.raises(MalformedError) as caught:
        reader.read("s")
    assert caught.value.key == "s"
    assert caught.value.path == str(data)


def test_missing_data_shard_and_index_and_key_are_not_found(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="no such tensor"):
        reader.entry("nope")
    Path(f"{prefix}.data-00000-of-00001").unlink()
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="data-00000-of"):
        reader.read("f")
    with pytest.raises(NotFoundError):
        BundleReader(tmp_path / "other")


def test_bad_magic_and_short_file_are_malformed(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    index.write_bytes(original[:-1] + b"\x00")
    with pytest.raises(MalformedError, match="bad magic"):
        BundleReader(prefix)
    index.write_bytes(original[-47:])
    with pytest.raises(MalformedError, match="too short"):
        BundleReader(prefix)


def raw_footer(metaindex: bytes, index: bytes) -> bytes:
    return (metaindex + index).ljust(40, b"\0") + tf_support.TABLE_MAGIC


@pytest.mark.parametrize(
    ("handles", "error"),
    [
        (varint(0) + varint(2**60), MalformedError),  # block size 2**60
        (varint(2**62) + varint(10), MalformedError),  # offset far past the end
        (b"\xff" * 11, MalformedError),  # a varint longer than 10 bytes
        (b"\xff" * 9 + b"\x7f", MalformedError),  # a varint above 2**64
    ],
)
def test_absurd_block_handles_are_refused_without_allocating(
    tmp_path: Path, handles: bytes, error: type[OCFError]
) -> None:
    (tmp_path / "ckpt.index").write_bytes(b"\0" * 10 + raw_footer(handles, handles))
    with traced_memory() as memory, pytest.raises(error):
        BundleReader(tmp_path / "ckpt")
    assert memory.peak < 1 << 20


def single_block_file(tmp_path: Path, contents: bytes) -> Path:
    body = framed(contents)
    metaindex_at = len(body)
    body += framed(tf_support.block([]))
    index_contents = tf_support.block([(b"\xff", varint(0) + varint(len(contents)))], 1)
    index_at = len(body)
    body += framed(index_contents)
    footer = raw_footer(
        varint(metaindex_at) + varint(8), varint(index_at) + varint(len(index_contents))
    )
    (tmp_path / "ckpt.index").write_bytes(body + footer)
    (tmp_path / "ckpt.data-00000-of-00001").write_bytes(b"")
    return tmp_path / "ckpt"


@pytest.mark.parametrize(
    ("contents", "match"),
    [
        ((2**31).to_bytes(4, "little"), "restart points"),  # restart count far too large
        (b"\x00\x03\x00" + (99).to_bytes(4, "little") + (1).to_bytes(4, "little"), "restart"),
        (b"\x00\x00\x00" + (0).to_bytes(4, "little") + (0).to_bytes(4, "little"), "restart points"),
        (b"\x05\x00\x00" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), "shares 5"),
        (b"\x00\x7f\x00" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), "runs past"),
        (b"\x00\xff\xff\xff\xff\x7f\x00" + bytes(4) + (1).to_bytes(4, "little"), "32 bits"),
        (b"", "too short"),
    ],
)
def test_corrupt_block_structure_is_malformed(tmp_path: Path, contents: bytes, match: str) -> None:
    with pytest.raises(MalformedError, match=match):
        BundleReader(single_block_file(tmp_path, contents))


def test_unknown_block_type_is_malformed(tmp_path: Path) -> None:
    with pytest.raises(MalformedError, match="compression type 7"):
        BundleReader(write_files(tmp_path, [(b"", header())], block_type=7))


def test_keys_out_of_order_and_missing_header_are_malformed(tmp_path: Path) -> None:
    unordered = tf_support.block([(b"", header()), (b"b", float_entry()), (b"a", float_entry())])
    with pytest.raises(MalformedError, match="out of order"):
        BundleReader(single_block_file(tmp_path, unordered))
    with pytest.raises(MalformedError, match="header"):
        BundleReader(write_files(tmp_path, [(b"a", float_entry())]))


@pytest.mark.parametrize(
    ("header_bytes", "error", "match"),
    [
        (header(min_consumer=2), UnsupportedVersionError, "consumer"),
        (header(bad_consumers=[1]), UnsupportedVersionError, "consumer"),
        (
            pb.BundleHeaderProto(
                num_shards=1, endianness=pb.BundleHeaderProto.ENDIANNESS_BIG
            ).SerializeToString(),
            UnsupportedVersionError,
            "big-endian",
        ),
        (header(num_shards=0), InvalidError, "num_shards"),
        (header(num_shards=2**30), LimitExceededError, "shards"),
        (b"\x0a\xff", MalformedError, "header"),
    ],
)
def test_bad_headers_are_refused(
    tmp_path: Path, header_bytes: bytes, error: type[OCFError], match: str
) -> None:
    with pytest.raises(error, match=match):
        BundleReader(write_files(tmp_path, [(b"", header_bytes)]))


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (float_entry(size=2**61, shape=[2**59]), LimitExceededError, "elements"),
        (float_entry(size=2**56, shape=[2**54]), MalformedError, "past the end"),
        (float_entry(size=8), InvalidError, "needs 12"),
        (float_entry(shape=[-3]), InvalidError, "negative"),
        (float_entry(shard_id=3), InvalidError, "shard_id"),
        (float_entry(offset=-1), InvalidError, "negative"),
        (float_entry(offset=2**62, size=2**62), LimitExceededError, "exceeds"),
        (float_entry(crc32c=1), IntegrityError, "checksum"),
        (float_entry(dtype=0), InvalidError, "DataType 0"),
        (float_entry(dtype=20), UnknownRequiredFeatureError, "resource"),
        (float_entry(dtype=7, shape=[2**50], size=2**55), MalformedError, "past the end"),
        (float_entry(dtype=7, shape=[20]), InvalidError, "cannot fit"),
        (b"\x12\xff\xff", MalformedError, "undecodable"),
        (sliced([3], {"length": 3}), InvalidError, "no entry"),
        (sliced([3], {"start": 1, "length": 3}), InvalidError, "outside"),
        (sliced([3], {"start": 1}), InvalidError, "whole dimension from start 1"),
        (sliced([3, 1], {}), InvalidError, "extents"),
    ],
)
def test_hostile_entries_are_refused_on_read_without_allocating(
    tmp_path: Path, value: bytes, error: type[OCFError], match: str
) -> None:
    prefix = write_files(tmp_path, [(b"", header()), (b"x", value)], FLOATS)
    with (traced_memory() as memory,
          BundleReader(prefix) as reader, pytest.raises(error, match=match) as caught):
        reader.read("x")
    assert caught.value.key == "x"
    assert memory.peak < 1 << 20


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize(
    ("name", "bad"),
    [("int4", 0x10), ("uint4", 0x80), ("int2", 0x04), ("uint2", 0xFF), ("float4_e2m1fn", 0xF0)],
)
def test_sub_byte_element_with_a_high_bit_set_is_invalid_naming_file_key_and_element(
    tmp_path: Path, name: str, bad: int, verify: bool
) -> None:
    prefix = one_tensor_files(tmp_path, SUB_BYTE_CODES[name][0], [3], bytes([0, 1, bad]))
    message = f"element 2 is stored as byte {bad:#04x}, which is no {name} value"
    with BundleReader(prefix, verify=verify) as reader, pytest.raises(InvalidError) as caught:
        reader.read("x")
    assert message in str(caught.value)
    assert caught.value.key == "x"
    assert caught.value.path == f"{prefix}.data-00000-of-00001"


def test_string_length_checksum_mismatch_is_integrity(tmp_path: Path) -> None:
    # ["ab", "", "xyz"] in TensorFlow's layout, lengths checksum zeroed.
    data = b"\x02\x00\x03" + bytes(4) + b"abxyz"
    value = entry(dtype=7, shape=[3], size=len(data), crc32c=0)
    prefix = write_files(tmp_path, [(b"", header()), (b"x", value)], data)
    with BundleReader(prefix) as reader, pytest.raises(IntegrityError, match="length checksum"):
        reader.read("x")


def test_bad_checkpoint_state_files(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        read_checkpoint_state(tmp_path)
    (tmp_path / "checkpoint").write_text("model_checkpoint_path: 3 {")
    with pytest.raises(MalformedError):
        read_checkpoint_state(tmp_path)


# -- file kinds: a reader must never block on, or read forever from, a non-file --


def _small_bundle(tmp_path: Path) -> str:
    prefix = str(tmp_path / "ckpt")
    with BundleWriter(prefix) as writer:
        writer.add("w", np.arange(6, dtype=np.float32))
    return prefix


def _replace_with_fifo(path: str) -> None:
    os.remove(path)
    os.mkfifo(path)


def _run_with_deadline(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child: a reader that blocks is killed and shows as a timeout."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("target", ["index", "data", "state"])
def test_fifo_in_a_tensorflow_checkpoint_is_refused_without_blocking(
    tmp_path: Path, target: str
) -> None:
    prefix = _small_bundle(tmp_path)
    write_checkpoint_state(tmp_path, prefix, [])
    path = {"index": prefix + ".index", "data": prefix + ".data-00000-of-00001",
            "state": str(tmp_path / "checkpoint")}[target]
    _replace_with_fifo(path)
    opener = {"index": f"BundleReader({prefix!r})",
              "data": f"BundleReader({prefix!r}).read('w')",
              "state": f"read_checkpoint_state({str(tmp_path)!r})"}[target]
    result = _run_with_deadline(
        "from ocf.format.errors import NotFoundError\n"
        "from ocf.tensorflow import BundleReader, read_checkpoint_state\n"
        f"try:\n    {opener}\nexcept NotFoundError as exc:\n    print(exc)\n")
    assert result.returncode == 0, result.stderr
    assert "not a regular file" in result.stdout
    assert os.path.basename(path) in result.stdout


def test_data_file_linked_to_a_device_is_refused(tmp_path: Path) -> None:
    prefix = _small_bundle(tmp_path)
    data = prefix + ".data-00000-of-00001"
    os.remove(data)
    os.symlink("/dev/zero", data)
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="not a regular"):
        reader.read("w")
