"""Batched writes (``Writer.write_many``, ``Writer.write_slices``): the same files and errors
as one ``write`` / ``write_slice`` per tensor or box.

The reference is the per-tensor path, written with the same write id into another
directory; files are compared byte for byte. Values read back are compared with the
arrays given.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ocf
from ocf.distributed.parts import PartWriter
from ocf.distributed.parts.tiling import tiles_of
from ocf.format import dtypes
from ocf.format.codecs.none import NONE
from ocf.format.codecs.zstd import ZSTD
from ocf.format.errors import InvalidError, LimitExceededError, OCFError
from ocf.format.index.encoding import TableBuilder
from ocf.format.index.model import Block
from ocf.v1 import index_pb2

WRITE_ID = "0123456789abcdef"
DTYPES = ("float32", "float64", "int8", "uint16", ">i4", "bool", "float16", "complex64",
          "bfloat16")


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or ``root`` itself) by its path relative to ``root``."""
    if root.is_file():
        return {"": root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _write_both(tmp: Path, tensors: list[tuple[str, np.ndarray]], **options: Any
                ) -> tuple[Path, Path]:
    one, many = tmp / "one", tmp / "many"
    with ocf.Writer(one, write_id=WRITE_ID, **options) as writer:
        for key, array in tensors:
            writer.write(key, array)
    with ocf.Writer(many, write_id=WRITE_ID, **options) as writer:
        writer.write_many(tensors)
    return one, many


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    kind = draw(st.sampled_from(("plain", "scalar", "empty", "bytes", "strided", "big")))
    if kind == "bytes":
        items = draw(st.lists(st.binary(max_size=9), min_size=0, max_size=4))
        return np.array([*items, b""], dtype=object)[:len(items) or 1]
    dtype = np.dtype(ml_dtypes.bfloat16) if (name := draw(st.sampled_from(DTYPES))) == \
        "bfloat16" else np.dtype(name)
    seed = draw(st.integers(0, 2**16))
    values = np.random.default_rng(seed).integers(0, 2, 4096).astype(dtype)
    if kind == "scalar":
        return values[0].reshape(())
    if kind == "empty":
        return values[:0].reshape(draw(st.sampled_from(((0,), (2, 0), (0, 3, 1)))))
    size = draw(st.integers(1, 300 if kind != "big" else 2000))
    shaped = values[:size]
    if kind == "strided":
        return values[:2 * size:2]
    return shaped.reshape((size,) if size % 2 else (2, size // 2))


LAYOUTS = (
    {"layout": "file"},
    {"layout": "directory"},
    {"layout": "directory", "max_shard_size": 700},  # many shards, splits inside batches
    {"layout": "file", "chunk_size": 4096},  # "big" arrays go the write() way
    {"layout": "directory", "compression": "zstd"},
)
LAYOUT_IDS = ("file", "directory", "shards", "chunks", "zstd")


@pytest.mark.parametrize("options", LAYOUTS, ids=LAYOUT_IDS)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(arrays(), max_size=30))
def test_write_many_writes_the_files_one_write_per_tensor_writes(
    tmp_path_factory: pytest.TempPathFactory, values: list[np.ndarray], options: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("many")
    tensors = [(f"t{i}" if i % 5 else f"t/é{i}", array) for i, array in enumerate(values)]
    one, many = _write_both(tmp, tensors, **options)
    assert _files(many) == _files(one)
    loaded = ocf.load_file(many)
    assert list(loaded) == [key for key, _ in tensors]
    for key, array in tensors:
        assert loaded[key].shape == array.shape
        assert np.array_equal(loaded[key], array)


def test_write_many_takes_a_mapping_and_gathers_more_than_one_batch(tmp_path: Path) -> None:
    # 4 KiB each, 2,000 of them: about 8 MiB, so two batches of 4 MiB and a last one.
    tensors = {f"layer{i}/w": np.full(1024, i, np.float32) for i in range(2000)}
    one, many = _write_both(tmp_path, list(tensors.items()), layout="file")
    assert many.read_bytes() == one.read_bytes()
    with ocf.open(many) as ckpt:
        assert np.array_equal(ckpt.get_tensor("layer1999/w"), np.full(1024, 1999, np.float32))


def _error_of(action: Callable[[], None]) -> tuple[type[BaseException], str]:
    with pytest.raises(OCFError) as caught:
        action()
    return type(caught.value), str(caught.value).replace("many", "one")


BAD_ITEMS = [
    ("", np.ones(3)),  # an empty key
    ("x\0y", np.ones(3)),  # a NUL in the key
    ("k" * 5000, np.ones(3)),  # a key above the limit
    ("\ud800", np.ones(3)),  # a lone surrogate: not UTF-8
    ("t1", np.ones(3)),  # written twice, within one batch
    ("bad", np.array(["text"])),  # a NumPy unicode array: no OCF dtype
    ("rank", np.zeros((1,) * 33)),  # a rank above the limit
]


@pytest.mark.parametrize("bad", BAD_ITEMS, ids=["empty", "nul", "long", "surrogate", "twice",
                                                "unicode", "rank"])
def test_write_many_raises_what_write_raises_and_keeps_the_tensors_before(
    tmp_path: Path, bad: tuple[str, np.ndarray]
) -> None:
    before = [("t0", np.arange(4.0)), ("t1", np.arange(3, dtype=np.int8))]
    one = ocf.Writer(tmp_path / "one", write_id=WRITE_ID)
    for key, array in before:
        one.write(key, array)
    error = _error_of(lambda: one.write(*bad))
    one.commit()  # the error left the writer usable
    many = ocf.Writer(tmp_path / "many", write_id=WRITE_ID)
    assert _error_of(lambda: many.write_many([*before, bad, ("t9", np.ones(1))])) == error
    many.commit()
    assert error[0] in (InvalidError, LimitExceededError)
    assert (tmp_path / "many").read_bytes() == (tmp_path / "one").read_bytes()
    assert list(ocf.load_file(tmp_path / "many")) == ["t0", "t1"]


def test_write_many_refuses_a_key_written_before_by_write(tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "m.ocf") as writer:
        writer.write("a", np.ones(2))
        with pytest.raises(InvalidError, match=r"key written twice.*R-TENSOR-001"):
            writer.write_many({"b": np.ones(2), "a": np.ones(2)})
    assert list(ocf.load_file(tmp_path / "m.ocf")) == ["a", "b"]


# -- write_slices ----------------------------------------------------------------------------


@st.composite
def boxes_of(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...],
                                       list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """A box of a tensor and its tiles: a random grid cut along every dimension."""
    rank = draw(st.integers(1, 3))
    extent = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    start = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    shape = tuple(s + e + draw(st.integers(0, 3)) for s, e in zip(start, extent))
    cuts = [sorted({0, e, *draw(st.lists(st.integers(1, max(1, e - 1)), max_size=3))})
            for e in extent]
    runs = [list(itertools.pairwise(c)) for c in cuts]
    grid = np.stack(np.meshgrid(*[range(len(r)) for r in runs], indexing="ij"), -1)
    boxes = []
    for index in grid.reshape(-1, rank):
        pieces = [runs[d][i] for d, i in enumerate(index)]
        boxes.append((tuple(s + a for s, (a, _) in zip(start, pieces)),
                      tuple(b - a for a, b in pieces)))
    name = draw(st.sampled_from(DTYPES))
    dtype = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
    array = np.random.default_rng(draw(st.integers(0, 99))).integers(0, 2, extent).astype(dtype)
    if draw(st.booleans()):  # a view in another order, as a framework's shard may be
        array = np.asfortranarray(array)
    return array, start, shape, boxes


class _Disjoint(ocf.Writer):
    slices_must_tile = False  # one box of the tensor only, as a part holds


@pytest.mark.parametrize("options", LAYOUTS, ids=LAYOUT_IDS)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=boxes_of())
def test_write_slices_writes_the_files_one_write_slice_per_box_writes(
    tmp_path_factory: pytest.TempPathFactory, case: Any, options: dict[str, Any]
) -> None:
    array, start, shape, boxes = case
    tmp = tmp_path_factory.mktemp("slices")
    with _Disjoint(tmp / "one", write_id=WRITE_ID, **options) as writer:
        writer.write("before", np.arange(3))
        for box_start, extent in boxes:
            window = tuple(slice(b - s, b - s + e) for b, s, e in zip(box_start, start, extent))
            writer.write_slice("t", array[window], box_start, shape)
        writer.write("after", np.arange(5))
    with _Disjoint(tmp / "many", write_id=WRITE_ID, **options) as writer:
        writer.write("before", np.arange(3))
        writer.write_slices("t", array, start, shape, boxes)
        writer.write("after", np.arange(5))
    assert _files(tmp / "many") == _files(tmp / "one")


def test_a_tiled_part_is_the_part_written_tile_by_tile(tmp_path: Path) -> None:
    full = np.random.default_rng(3).standard_normal((300, 700)).astype(">f4")
    rows = full[100:250]
    options = {"part": 0, "parts": 2, "save_id": "00112233445566aa", "write_id": WRITE_ID,
               "chunk_size": 1 << 16}
    with PartWriter(tmp_path / "tiled", tile_bytes=4096, **options) as writer:
        writer.write_slice("w", rows, (100, 0), full.shape)
    with PartWriter(tmp_path / "by-hand", tile_bytes=None, **options) as writer:
        for tile_start, extent in tiles_of(((100, 0), rows.shape), full.shape, 4, 4096):
            window = tuple(slice(t - o, t - o + e) for t, o, e in zip(tile_start, (100, 0),
                                                                       extent))
            writer.write_slice("w", rows[window], tile_start, full.shape)
    tiled = _files(tmp_path / "tiled")
    assert len(tiled) == 2  # the part index and one shard
    assert tiled == _files(tmp_path / "by-hand")


def test_slices_interleaved_with_whole_tensors_read_back(tmp_path: Path) -> None:
    table = np.arange(48.0).reshape(6, 8)
    with ocf.Writer(tmp_path / "t.ocf") as writer:
        writer.write_slice("table", table[:2], (0, 0), table.shape)
        writer.write("a", np.ones(3))
        writer.write_slices("table", table[2:], (2, 0), table.shape,
                            [((2, 0), (2, 8)), ((4, 0), (2, 8))])
        writer.write_many({"b": np.zeros(2)})
    with ocf.open(tmp_path / "t.ocf") as ckpt:
        assert list(ckpt) == ["table", "a", "b"]
        assert np.array_equal(ckpt.get_tensor("table"), table)
        assert np.array_equal(ckpt.get_slice("table", np.s_[3:5, 1:4]), table[3:5, 1:4])


def _slices_error(tmp: Path, name: str, array: np.ndarray, start: tuple[int, ...],
                  shape: tuple[int, ...], boxes: list[Any], many: bool,
                  whole: np.ndarray | None = None) -> tuple[type[BaseException], str]:
    writer = ocf.Writer(tmp / name)
    if whole is not None:
        writer.write("t", whole)

    def act() -> None:
        if many:
            writer.write_slices("t", array, start, shape, boxes)
            return
        for box_start, extent in boxes:
            window = tuple(slice(b - s, b - s + e) for b, s, e in zip(box_start, start, extent))
            writer.write_slice("t", array[window], box_start, shape)

    error = _error_of(act)
    writer.abort()
    return error


@pytest.mark.parametrize("case", [
    ((1, 0), (4, 4), [((1, 0), (2, 4)), ((3, 0), (2, 4))]),  # the box ends past the tensor
    ((0, 0), (4, 4), [((0, 0), (0, 4))]),  # an empty box
    ((0, 0), (4,), [((0, 0), (4, 4))]),  # a global shape of another rank
])
def test_write_slices_raises_what_write_slice_raises(tmp_path: Path, case: Any) -> None:
    start, shape, boxes = case
    array = np.ones((4, 4), np.float32)
    assert _slices_error(tmp_path, "a", array, start, shape, boxes, many=True) == \
        _slices_error(tmp_path, "b", array, start, shape, boxes, many=False)


def test_write_slices_refuses_a_key_stored_whole(tmp_path: Path) -> None:
    args = (np.ones((2, 2)), (0, 0), (2, 2), [((0, 0), (2, 2))])
    many = _slices_error(tmp_path, "a", *args, many=True, whole=np.ones(2))
    assert many == _slices_error(tmp_path, "b", *args, many=False, whole=np.ones(2))
    assert "stored whole" in many[1]
    assert "R-SLICE-001" in many[1]


# -- the tables ------------------------------------------------------------------------------


def _block(offset: int, crcs: list[int], starts: list[int] | None = None) -> Block:
    codec = NONE if starts is None else ZSTD
    return Block(0, offset, 10, 20, codec, False, 0, crcs, starts or [])


def test_blocks_added_out_of_tensor_order_are_encoded_tensor_by_tensor() -> None:
    a0, b, a1 = _block(64, [1, 2], [64, 70, 74]), _block(128, [3]), _block(192, [4, 5, 6])
    f32 = dtypes.BY_NAME["float32"]
    builder = TableBuilder()
    a = builder.add_tensor("a", f32.code, (4, 2), sliced=True)
    builder.add_block(a, a0, ((0, 0), (2, 2)))
    builder.add_block(builder.add_tensor("b", f32.code, (3,)), b, shard_base=2)
    builder.add_block(a, a1, ((2, 0), (2, 2)))
    index = index_pb2.Index()
    builder.fill(index)
    assert list(index.tensors.keys) == ["a", "b"]
    assert list(index.tensors.ranks) == [2, 1]
    assert list(index.tensors.dims) == [4, 2, 3]
    assert list(index.tensors.slice_counts) == [2, 0]
    blocks = index.blocks
    assert list(blocks.offsets) == [64, 192, 128]  # a's two slices, then b
    assert list(blocks.shards) == [0, 0, 2]
    assert list(blocks.codecs) == [ZSTD.value, NONE.value, NONE.value]
    assert list(blocks.chunk_crcs) == [1, 2, 4, 5, 6, 3]
    assert list(blocks.chunk_stored_lengths) == [6, 4]
    assert list(blocks.slice_starts) == [0, 0, 2, 0]
    assert list(blocks.slice_extents) == [2, 2, 2, 2]
