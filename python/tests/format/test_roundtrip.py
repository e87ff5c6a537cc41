"""Every dtype, shape and storage option round-trips bit-exactly [R-DTYPE-001]."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from samples import assert_bit_exact, every_dtype

import ocf

OPTIONS = {
    "plain": {},
    "zstd": {"compression": "zstd"},
    "zstd-shuffle-small-chunks": {"compression": "zstd", "byte_shuffle": True,
                                  "chunk_size": 4096},
    "plain-small-chunks": {"chunk_size": 4096},
}
LAYOUTS = ["file", "directory"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_every_dtype_round_trips_bit_exactly(tmp_path: Path, layout: str, option: str,
                                             arrays: dict[str, np.ndarray]) -> None:
    arrays["rank0"] = np.array(3.5, np.float32)
    arrays["zero_size"] = np.zeros((0, 4), np.float64)
    arrays["zero_size_bytes"] = np.zeros((2, 0), dtype=object)
    arrays["large"] = np.random.default_rng(0).standard_normal((300, 100)).astype(np.float32)
    path = tmp_path / "ckpt"
    ocf.save_file(arrays, path, layout=layout, max_shard_size=64 << 10, **OPTIONS[option])
    with ocf.open(path) as reader:
        assert list(reader) == list(arrays)
        for key, expected in arrays.items():
            assert_bit_exact(reader.get_tensor(key), expected)
            assert_bit_exact(reader.read_tensor(key), expected)
        reader.verify_all()
    loaded = ocf.load_file(path)
    for key, expected in arrays.items():
        assert_bit_exact(loaded[key], expected)


def test_directory_layout_splits_into_shards_of_bounded_size(tmp_path: Path) -> None:
    tensors = {f"t{i}": np.full(10_000, i, np.float32) for i in range(8)}  # 40 KB each
    ocf.save_file(tensors, tmp_path / "d", layout="directory", max_shard_size=100_000)
    shards = sorted(p for p in (tmp_path / "d").iterdir() if p.suffix == ".ocfd")
    assert len(shards) == 4
    assert all(p.stat().st_size <= 100_000 for p in shards)
    assert {p.name for p in (tmp_path / "d").iterdir()} == {"index.ocf", *(p.name for p in shards)}
    assert all(np.array_equal(v, tensors[k]) for k, v in ocf.load_file(tmp_path / "d").items())


def test_tensor_data_is_64_byte_aligned_and_views_are_zero_copy(tmp_path: Path) -> None:
    tensors = {"a": np.arange(3, dtype=np.int8), "b": np.arange(5, dtype=np.float64)}
    ocf.save_file(tensors, tmp_path / "x.ocf")
    with ocf.open(tmp_path / "x.ocf") as reader:
        for key in tensors:
            assert reader[key].block is not None
            assert reader[key].block.offset % 64 == 0
            view = reader.get_tensor(key)
            assert not view.flags.writeable
            assert not view.flags.owndata  # a view over the memory map
        owned = reader.read_tensor("b")
        assert owned.flags.writeable
        assert owned.flags.c_contiguous


def test_non_contiguous_and_big_endian_arrays_are_stored_as_little_endian_c_order(
    tmp_path: Path,
) -> None:
    base = np.arange(24, dtype=">i4").reshape(4, 6)
    ocf.save_file({"t": base.T[::2]}, tmp_path / "x.ocf")
    loaded = ocf.load_file(tmp_path / "x.ocf")["t"]
    assert loaded.dtype == np.dtype("<i4")
    assert np.array_equal(loaded, base.T[::2])


def test_numpy_fixed_width_bytes_arrays_are_stored_as_byte_strings(tmp_path: Path) -> None:
    ocf.save_file({"s": np.array([b"ab", b"c"])}, tmp_path / "x.ocf")
    assert ocf.load_file(tmp_path / "x.ocf")["s"].tolist() == [b"ab", b"c"]


def test_unsupported_dtypes_and_values_are_refused_with_invalid(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match="no OCF equivalent"):
        ocf.save_file({"d": np.array(["2020-01-01"], "datetime64[D]")}, tmp_path / "x.ocf")
    with pytest.raises(ocf.InvalidError, match="only bytes are storable"):
        ocf.save_file({"s": np.array(["text"], dtype=object)}, tmp_path / "y.ocf")
    assert list(tmp_path.iterdir()) == []  # aborted writes leave no temporary files


def test_duplicate_and_bad_keys_are_refused(tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "x.ocf") as writer:
        writer.write("a", np.zeros(1))
        with pytest.raises(ocf.InvalidError, match="written twice"):
            writer.write("a", np.zeros(1))
        with pytest.raises(ocf.InvalidError, match="R-TENSOR-001"):
            writer.write("", np.zeros(1))
        with pytest.raises(ocf.LimitExceededError):
            writer.write("k" * 5000, np.zeros(1))
    assert list(ocf.open(tmp_path / "x.ocf")) == ["a"]


def test_shapes_beyond_the_tensor_limits_are_refused(tmp_path: Path) -> None:
    # [R-TENSOR-003]: rank at most 32, non-zero dimensions multiplying to at most
    # 2^58, also for empty arrays NumPy itself can hold.
    with ocf.Writer(tmp_path / "x.ocf") as writer:
        writer.write("at-limit", np.empty((0, 1 << 29, 1 << 29), dtype=np.complex128))
        with pytest.raises(ocf.LimitExceededError, match="R-TENSOR-003"):
            writer.write("over", np.empty((1 << 29, 0, (1 << 29) + 1), dtype=np.uint8))
        with pytest.raises(ocf.LimitExceededError, match="R-TENSOR-003"):
            writer.write("rank-33", np.zeros((1,) * 33, dtype=np.uint8))
        with pytest.raises(ocf.LimitExceededError, match="R-TENSOR-003"):
            writer.write_slice("box", np.zeros((1, 1), dtype=np.uint8), (0, 0),
                               (1 << 29, (1 << 29) + 1))
    with ocf.open(tmp_path / "x.ocf") as reader:
        assert list(reader) == ["at-limit"]
        assert reader.get_tensor("at-limit").shape == (0, 1 << 29, 1 << 29)


def test_sliced_tensor_is_assembled_from_its_pieces(tmp_path: Path) -> None:
    full = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)
    with ocf.Writer(tmp_path / "x.ocf", compression="zstd") as writer:
        writer.write_slice("w", full[0:3], (0, 0), full.shape)
        writer.write_slice("w", full[3:7, 0:2], (3, 0), full.shape)
        writer.write_slice("w", full[3:7, 2:5], (3, 2), full.shape)
    with ocf.open(tmp_path / "x.ocf") as reader:
        assert len(reader["w"].slices) == 3
        assert_bit_exact(reader.get_tensor("w"), full)
        assert_bit_exact(reader.get_slice("w", np.s_[2:5, 1:4]), full[2:5, 1:4])


def test_slices_that_overlap_or_leave_gaps_are_refused_at_commit(tmp_path: Path) -> None:
    full = np.zeros((4, 4), np.int32)
    gap = ocf.Writer(tmp_path / "gap.ocf")
    gap.write_slice("w", full[:2], (0, 0), full.shape)
    with pytest.raises(ocf.InvalidError, match="R-SLICE-002"):
        gap.commit()
    overlap = ocf.Writer(tmp_path / "overlap.ocf")
    overlap.write_slice("w", full[:3], (0, 0), full.shape)
    overlap.write_slice("w", full[:2], (2, 0), full.shape)
    with pytest.raises(ocf.InvalidError, match="R-SLICE-002"):
        overlap.commit()
    assert list(tmp_path.iterdir()) == []


def test_metadata_keeps_value_types(tmp_path: Path) -> None:
    metadata = {"int": 7, "float": 7.0, "bool": True, "str": "7", "bytes": b"7", "none": None,
                "list": [1, "a", [2.5, None]], "map": {"lr": 1e-3, "betas": [0.9, 0.999]},
                "neg": -(2**63)}
    ocf.save_file({}, tmp_path / "x.ocf", metadata=metadata)
    with ocf.open(tmp_path / "x.ocf") as reader:
        assert reader.metadata == metadata
        assert {k: type(v) for k, v in reader.metadata.items()} == {
            k: type(v) for k, v in metadata.items()}


def test_unstorable_metadata_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match="not storable"):
        ocf.save_file({}, tmp_path / "x.ocf", metadata={"x": object()})
    with pytest.raises(ocf.InvalidError, match="int64"):
        ocf.save_file({}, tmp_path / "y.ocf", metadata={"x": 2**63})
    deep: list[object] = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ocf.LimitExceededError, match="R-META-002"):
        ocf.save_file({}, tmp_path / "z.ocf", metadata={"x": deep})


def test_overwriting_a_single_file_checkpoint_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "x.ocf"
    ocf.save_file({"a": np.zeros(3)}, path)
    ocf.save_file({"b": np.ones(2)}, path)
    assert list(ocf.load_file(path)) == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["x.ocf"]


def test_overwriting_a_directory_checkpoint_removes_the_old_shards(tmp_path: Path) -> None:
    path = tmp_path / "d"
    ocf.save_file({"a": np.zeros(3)}, path, layout="directory")
    old = {p.name for p in path.iterdir()}
    ocf.save_file({"b": np.ones(2)}, path, layout="directory")
    new = {p.name for p in path.iterdir()}
    assert list(ocf.load_file(path)) == ["b"]
    assert old & new == {"index.ocf"}


_DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
           np.float64, np.complex64, np.complex128, ml_dtypes.bfloat16,
           ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


@st.composite
def any_bits_array(draw: st.DrawFn) -> np.ndarray:
    """An array of any OCF fixed-size dtype holding arbitrary bit patterns."""
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=9))
    count = int(np.prod(shape))
    raw = np.frombuffer(draw(st.binary(min_size=count * dtype.itemsize,
                                       max_size=count * dtype.itemsize)), np.uint8)
    if dtype == np.bool_:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


@settings(max_examples=80, deadline=None)
@given(array=any_bits_array(), option=st.sampled_from(sorted(OPTIONS)),
       layout=st.sampled_from(LAYOUTS))
def test_any_array_round_trips_bit_exactly(tmp_path_factory: pytest.TempPathFactory,
                                           array: np.ndarray, option: str,
                                           layout: str) -> None:
    path = tmp_path_factory.mktemp("rt") / "x"
    ocf.save_file({"x": array}, path, layout=layout, **OPTIONS[option])
    assert_bit_exact(ocf.load_file(path)["x"], array)


def test_every_dtype_fixture_covers_the_whole_dtype_table() -> None:
    from ocf.format.dtypes import TABLE

    assert {row.name for row in TABLE} == set(every_dtype())
