"""Partial reads: get_slice equals NumPy indexing and reads only the chunks it needs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ocf


@st.composite
def index_for(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[object, ...]:
    """A basic NumPy index (ints, slices with positive steps, maybe an Ellipsis)."""
    items: list[object] = []
    for size in shape:
        if size and draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            start = draw(st.none() | st.integers(-size - 2, size + 2))
            stop = draw(st.none() | st.integers(-size - 2, size + 2))
            items.append(slice(start, stop, draw(st.none() | st.integers(1, 4))))
    if items and draw(st.booleans()):
        cut = draw(st.integers(0, len(items)))
        items = [*items[:cut], Ellipsis, *items[cut + draw(st.integers(0, len(items) - cut)):]]
    return tuple(items)


STORAGE = {
    "plain": {"chunk_size": 4096},
    "zstd": {"compression": "zstd", "chunk_size": 4096, "byte_shuffle": True},
}


@settings(max_examples=120, deadline=None)
@given(data=st.data(), storage=st.sampled_from(sorted(STORAGE)), sliced=st.booleans())
def test_get_slice_equals_numpy_basic_indexing(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, storage: str, sliced: bool
) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40))
    full = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    index = data.draw(index_for(shape))
    path = tmp_path_factory.mktemp("slice") / "x.ocf"
    with ocf.Writer(path, **STORAGE[storage]) as writer:  # type: ignore[arg-type]
        if sliced:  # store as two row blocks to exercise the piece assembly
            half = max(1, shape[0] // 2)
            writer.write_slice("t", full[:half], (0,) * len(shape), shape)
            if half < shape[0]:
                writer.write_slice("t", full[half:], (half,) + (0,) * (len(shape) - 1), shape)
        else:
            writer.write("t", full)
    with ocf.open(path) as reader:
        got = reader.get_slice("t", index)
    expected = full[index]
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("storage", sorted(STORAGE))
def test_get_slice_of_one_row_reads_only_the_chunks_holding_it(tmp_path: Path,
                                                               storage: str) -> None:
    rows = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    path = tmp_path / "x.ocf"
    ocf.save_file({"w": rows}, path, **STORAGE[storage])  # type: ignore[arg-type]
    with ocf.open(path) as reader:
        assert np.array_equal(reader.get_slice("w", 100), rows[100])
        # one 4 KiB row lives in exactly one 4096-byte chunk
        block = reader["w"].block
        assert block is not None
        start, end = block.stored_range(100)
        one_chunk = end - start
        assert reader.bytes_read == one_chunk
        reader.bytes_read = 0
        assert np.array_equal(reader.get_slice("w", np.s_[10:20, :8]), rows[10:20, :8])
        assert reader.bytes_read <= 10 * 4096


def test_get_slice_checks_the_checksums_of_the_chunks_it_reads(tmp_path: Path) -> None:
    rows = np.zeros((64, 1024), np.float32)  # 64 chunks of 4 KiB
    path = tmp_path / "x.ocf"
    ocf.save_file({"w": rows}, path, chunk_size=4096)
    with path.open("r+b") as f:  # corrupt row 40
        f.seek(64 + 40 * 4096 + 8)
        f.write(b"\x01")
    with ocf.open(path) as reader:
        assert np.array_equal(reader.get_slice("w", np.s_[:40]), rows[:40])
        with pytest.raises(ocf.IntegrityError, match="chunk 40"):
            reader.get_slice("w", np.s_[39:41])
    with ocf.open(path, verify=False) as reader:
        assert reader.get_slice("w", 40)[2] != 0


def test_bad_indices_are_refused_with_invalid(tmp_path: Path) -> None:
    ocf.save_file({"w": np.zeros((3, 4))}, tmp_path / "x.ocf")
    with ocf.open(tmp_path / "x.ocf") as reader:
        for index in [(0, 0, 0), 3, np.s_[::-1], (Ellipsis, Ellipsis), "a"]:
            with pytest.raises(ocf.InvalidError):
                reader.get_slice("w", index)
