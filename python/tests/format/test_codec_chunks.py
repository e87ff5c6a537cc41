"""zstd chunks, shuffled or not, as the writer encodes and the reader decodes them.

The codec shuffles into and decodes out of buffers each thread reuses, and
decodes unshuffled chunks straight into the destination array. These tests
check the results against the arrays written and, byte for byte, the stored
chunks against the layout of spec/format.md [R-CODEC-001] [R-CODEC-002],
decoded here by zstandard and an index formula of the shuffle written apart
from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from samples import assert_bit_exact

import ocf
from ocf.format.codecs.zstd import ZSTD

_DTYPES = [np.uint8, np.int16, np.float16, ml_dtypes.bfloat16, np.float32, np.int64,
           np.float64, np.complex64, np.complex128]


def _spec_unshuffle(shuffled: bytes, itemsize: int) -> bytes:
    """raw[i*s + j] = shuffled[j*m + i], by index arithmetic (spec/format.md, [R-CODEC-002])."""
    stored = np.frombuffer(shuffled, np.uint8)
    m = len(stored) // itemsize
    positions = np.arange(len(stored))
    i, j = positions // itemsize, positions % itemsize
    return stored[j * m + i].tobytes()


def _stored_chunks_decoded_apart(path: Path, key: str) -> bytes:
    """The raw bytes of ``key``'s block, each chunk read from the file and decoded by
    zstandard itself, unshuffled by :func:`_spec_unshuffle`."""
    with ocf.open(path) as reader:
        info = reader[key]
        block = info.block
        assert block is not None
        data = path.read_bytes()
        raw = []
        for chunk in range(block.chunk_count):
            start, end = block.stored_range(chunk)
            a, b = block.raw_range(chunk)
            decoded = zstandard.ZstdDecompressor().decompress(data[start:end],
                                                              max_output_size=b - a)
            raw.append(_spec_unshuffle(decoded, info.dtype.itemsize) if block.byte_shuffle
                       else decoded)
        return b"".join(raw)


@st.composite
def _arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=64))
    count = int(np.prod(shape))
    # Repetitive bytes (compressible) or arbitrary ones (stored nearly as they are).
    if draw(st.booleans()):
        raw = np.frombuffer(draw(st.binary(min_size=count * dtype.itemsize,
                                           max_size=count * dtype.itemsize)), np.uint8)
    else:
        period = draw(st.binary(min_size=1, max_size=64))
        raw = np.resize(np.frombuffer(period, np.uint8), count * dtype.itemsize)
    return raw.view(dtype).reshape(shape)


@settings(max_examples=60, deadline=None)
@given(array=_arrays(), shuffle=st.booleans(), threads=st.integers(1, 3),
       chunk_size=st.sampled_from([4096, 4160, 8192, 65536]), level=st.sampled_from([1, 3]))
def test_compressed_chunks_round_trip_and_follow_the_spec_layout(
        tmp_path_factory: pytest.TempPathFactory, array: np.ndarray, shuffle: bool,
        threads: int, chunk_size: int, level: int) -> None:
    path = tmp_path_factory.mktemp("chunks") / "x.ocf"
    ocf.save_file({"x": array}, path, compression="zstd", byte_shuffle=shuffle,
                  threads=threads, chunk_size=chunk_size, compression_level=level)
    assert _stored_chunks_decoded_apart(path, "x") == array.tobytes()
    assert_bit_exact(ocf.load_file(path)["x"], array)
    with ocf.open(path) as reader:
        assert_bit_exact(reader.get_tensor("x"), array)
        into = np.empty_like(array)
        assert reader.read_into("x", into) is into
        assert_bit_exact(into, array)
        rows = slice(array.shape[0] // 3, array.shape[0] - array.shape[0] // 4)
        assert_bit_exact(reader.get_slice("x", np.s_[rows]), array[rows])


def test_chunks_larger_than_a_threads_kept_buffer_round_trip(tmp_path: Path) -> None:
    # 8 MiB chunks, above the 4 MiB a thread keeps between chunks, shuffled, on 3 threads.
    array = np.random.default_rng(5).standard_normal(5 << 20).astype(np.float32)
    path = tmp_path / "big_chunks.ocf"
    ocf.save_file({"x": array}, path, compression="zstd", byte_shuffle=True, threads=3,
                  chunk_size=8 << 20)
    with ocf.open(path) as reader:
        assert reader["x"].block.chunk_count == 3
    assert_bit_exact(ocf.load_file(path)["x"], array)


def test_many_tensors_shuffled_on_several_threads_each_keep_their_bytes(tmp_path: Path) -> None:
    # Chunks of different tensors and item sizes encoded and decoded at once on
    # several threads: each thread's buffers must never mix two chunks.
    rng = np.random.default_rng(6)
    tensors = {f"t{i}": rng.integers(0, 50, size=20_000 + 977 * i).astype(dtype)
               for i, dtype in enumerate([np.int16, np.float32, np.int64, np.complex128] * 3)}
    path = tmp_path / "many.ocf"
    ocf.save_file(tensors, path, compression="zstd", byte_shuffle=True, threads=4,
                  chunk_size=4096)
    for key, array in tensors.items():
        assert _stored_chunks_decoded_apart(path, key) == array.tobytes()
    loaded = ocf.load_file(path)
    for key, array in tensors.items():
        assert_bit_exact(loaded[key], array)


def _with_content_size(frame: bytes, size: int) -> bytes:
    """``frame`` with its Frame_Content_Size field rewritten to ``size`` (RFC 8878,
    3.1.1.1), which must fit the field's width."""
    descriptor = frame[4]
    single_segment = descriptor & 0x20
    width = [1 if single_segment else 0, 2, 4, 8][descriptor >> 6]
    dictionary_id = [0, 1, 2, 4][descriptor & 3]
    at = 5 + (0 if single_segment else 1) + dictionary_id
    stored = size - 256 if width == 2 else size
    return frame[:at] + stored.to_bytes(width, "little") + frame[at + width:]


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("declared_change", [-4, 4])
def test_a_frame_whose_blocks_disagree_with_its_content_size_is_malformed(
        shuffled: bool, declared_change: int) -> None:
    data = np.random.default_rng(7).integers(0, 4, 70_000, dtype=np.uint8).tobytes()
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(data)
    assert zstandard.frame_content_size(frame) == len(data)
    lying = _with_content_size(frame, len(data) + declared_change)
    assert zstandard.frame_content_size(lying) == len(data) + declared_change
    into = np.full(len(data) + declared_change, 7, np.uint8)
    with pytest.raises(ocf.MalformedError, match="R-CODEC-001"):
        ZSTD.decode_into(lying, into, 4 if shuffled else 1)


@pytest.mark.parametrize("itemsize", [1, 2, 8])
def test_an_empty_frame_decodes_to_an_empty_chunk(itemsize: int) -> None:
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(b"")
    assert len(ZSTD.decode(frame, 0, itemsize)) == 0
    with pytest.raises(ocf.MalformedError, match="declares 0 bytes"):
        ZSTD.decode(frame, 64, itemsize)


def test_decoding_without_a_destination_returns_the_unshuffled_bytes() -> None:
    raw = np.arange(4096, dtype=np.uint32).view(np.uint8)
    shuffled = raw.reshape(-1, 4).T.copy().reshape(-1)  # byte j of each element together
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(shuffled.tobytes())
    decoded = ZSTD.decode(frame, len(raw), 4)
    assert decoded.tobytes() == raw.tobytes()
    assert decoded.flags.writeable
    assert decoded.flags.owndata


def _bf16_rounded_float32(count: int) -> np.ndarray:
    """float32 values whose two low bytes are zero: two of the four shuffled streams."""
    values = np.random.default_rng(8).normal(0, 0.02, count).astype(np.float32)
    rounded: np.ndarray = (values.view(np.uint32) & 0xFFFF0000).view(np.float32)
    return rounded


@pytest.mark.parametrize("into_zeroed", [False, True])
def test_streams_of_zeros_reach_a_destination_that_is_not_zero_filled(into_zeroed: bool) -> None:
    raw = _bf16_rounded_float32(8192).view(np.uint8)
    shuffled = raw.reshape(-1, 4).T.copy().reshape(-1)
    assert not shuffled[: len(shuffled) // 2].any()  # the two low-byte streams
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(shuffled.tobytes())
    into = np.zeros(len(raw), np.uint8) if into_zeroed else np.full(len(raw), 0xA5, np.uint8)
    ZSTD.decode_into(frame, into, 4, zeroed=into_zeroed)
    assert into.tobytes() == raw.tobytes()


def test_weights_rounded_to_bfloat16_read_back_exactly_through_every_read(tmp_path: Path) -> None:
    array = _bf16_rounded_float32(300_000).reshape(600, 500)
    path = tmp_path / "bf16.ocf"
    ocf.save_file({"w": array}, path, compression="zstd", byte_shuffle=True, chunk_size=65536)
    assert _stored_chunks_decoded_apart(path, "w") == array.tobytes()
    assert_bit_exact(ocf.load_file(path)["w"], array)
    with ocf.open(path) as reader:
        into = np.full(array.shape, 0xA5A5A5A5, np.uint32).view(np.float32)  # no zero byte
        assert_bit_exact(reader.read_into("w", into), array)
        assert_bit_exact(reader.get_slice("w", np.s_[100:350, 7:9]), array[100:350, 7:9])
