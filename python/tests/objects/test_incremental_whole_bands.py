"""A tensor of which every band changed is written whole by an incremental save, in
chunks of one band (ocf.format.writing.banding): one block, as a full save writes
it. Its bands stay reusable: a later save references a band as the run of chunks of
that block holding its rows, with their CRCs, after comparing its bytes; a one-byte
change in any band, the short last one too, is saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from incremental_support import verify_fully

import ocf
from ocf.format.index.model import Block
from ocf.format.writing.banding import BAND_BYTES

COLUMNS = 1024  # float32 rows of 4 KiB: 256 rows a band
BAND_ROWS = BAND_BYTES // (COLUMNS * 4)
ROWS = 16 * BAND_ROWS + 7  # 16 bands of 1 MiB and a short last band of 7 rows


def _save(root: Path, name: str, base: str | None, tensor: np.ndarray,
          **options: int) -> Path:
    path = root / name
    with ocf.Writer(path, incremental=True, base=None if base is None else root / base,
                    **options) as writer:
        writer.write_many({"w": tensor, "step": np.array(1)})
    return path


def _layout(path: Path) -> tuple[Block | None, list[tuple[int, Block, bool]]]:
    """The block of ``w`` stored whole (else None) and its slices: (first row, block,
    whether the block is in the checkpoint's own file rather than the pool)."""
    with ocf.Reader(path) as reader:
        info = reader.index.tensors["w"]
        pooled = [bool(shard.pool_sha256) for shard in reader.index.shards]
        return info.block, sorted(((s.start[0], s.block, not pooled[s.block.shard])
                                   for s in info.slices), key=lambda band: band[0])


def _tensor(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((ROWS, COLUMNS)).astype(np.float32)


def test_a_tensor_changed_in_every_band_is_one_block_in_chunks_of_a_band(tmp_path: Path
                                                                         ) -> None:
    tensor = _tensor(1)
    _save(tmp_path, "ckpt-1", None, tensor)  # no base: every band is new
    tensor += 1.0
    second = _save(tmp_path, "ckpt-2", "ckpt-1", tensor)
    for path in (tmp_path / "ckpt-1", second):
        whole, slices = _layout(path)
        assert whole is not None
        assert not slices
        assert whole.chunk_size == BAND_BYTES
        assert whole.chunk_count == 17
    np.testing.assert_array_equal(verify_fully(second)["w"], tensor)
    assert not (tmp_path / "ocf-pool").exists()  # nothing reused, nothing linked


@pytest.mark.parametrize("band", [0, 1, 9, 15, 16])  # 16: the short last band
def test_a_one_byte_change_in_any_band_of_a_tensor_stored_whole_is_saved(
        tmp_path: Path, band: int) -> None:
    tensor = _tensor(2)
    _save(tmp_path, "ckpt-1", None, tensor)
    whole, _ = _layout(tmp_path / "ckpt-1")
    assert whole is not None
    first = band * BAND_ROWS
    rows = min(BAND_ROWS, ROWS - first)
    flat = tensor[first:first + rows].reshape(-1).view(np.uint8)
    flat[np.random.default_rng(band).integers(0, flat.size)] ^= 0x10
    path = _save(tmp_path, "ckpt-2", "ckpt-1", tensor)
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
    _, slices = _layout(path)
    assert [start for start, _, _ in slices] == list(range(0, ROWS, BAND_ROWS))
    ((changed, own),) = [(block, own) for start, block, own in slices if start == first]
    assert own
    assert changed.raw_length == rows * COLUMNS * 4
    # The unchanged bands after the first MiB of them (which links ckpt-1's file into
    # the pool) are chunks of ckpt-1's block, at their place in it, with its CRCs.
    reused = [(start, block) for start, block, own in slices if not own]
    assert reused, "no band reused"
    for start, block in reused:
        chunk = start // BAND_ROWS
        assert block.offset == whole.offset + start * COLUMNS * 4
        assert block.chunk_crcs == whole.chunk_crcs[chunk:chunk + 1]


def test_bands_reused_from_a_block_of_smaller_chunks_carry_each_chunks_crc(
        tmp_path: Path) -> None:
    tensor = _tensor(3)
    _save(tmp_path, "ckpt-1", None, tensor, chunk_size=256 << 10)
    whole, _ = _layout(tmp_path / "ckpt-1")
    assert whole is not None
    assert whole.chunk_size == 256 << 10
    tensor[-1, -1] += 1.0  # the short last band: 7 rows, one chunk of 28 KiB
    path = _save(tmp_path, "ckpt-2", "ckpt-1", tensor, chunk_size=256 << 10)
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
    _, slices = _layout(path)
    reused = [block for _, block, own in slices if not own]
    assert reused
    assert all(len(block.chunk_crcs) == 4 and block.chunk_size == 256 << 10
                          for block in reused)


def test_a_chunk_size_that_does_not_divide_the_band_keeps_the_bands(tmp_path: Path) -> None:
    """A band must be a run of whole chunks at a 64-byte boundary of the block, or a
    later save could not reference it: otherwise the tensor stays in bands."""
    path = _save(tmp_path, "ckpt-1", None, _tensor(4), chunk_size=768 << 10)
    whole, slices = _layout(path)
    assert whole is None
    assert len(slices) == 17


def test_bands_changed_only_after_their_first_bytes_are_all_rewritten(tmp_path: Path
                                                                       ) -> None:
    """Equal first bytes make the bands stay bands; each is then compared whole, so a
    change further in is saved."""
    tensor = _tensor(5)
    _save(tmp_path, "ckpt-1", None, tensor)
    tensor[1::BAND_ROWS, 5] += 1.0  # byte 4116 of each band: after its first 4 KiB
    path = _save(tmp_path, "ckpt-2", "ckpt-1", tensor)
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
    whole, slices = _layout(path)
    assert whole is None
    assert all(own for _, _, own in slices)


def test_a_tensor_in_bands_changed_everywhere_is_written_whole_again(tmp_path: Path) -> None:
    tensor = _tensor(6)
    _save(tmp_path, "ckpt-1", None, tensor)
    tensor[BAND_ROWS * 3, 5] += 1.0
    _save(tmp_path, "ckpt-2", "ckpt-1", tensor)  # in bands: one written, the others reused
    assert _layout(tmp_path / "ckpt-2")[0] is None
    tensor += 1.0
    third = _save(tmp_path, "ckpt-3", "ckpt-2", tensor)
    whole, _ = _layout(third)
    assert whole is not None
    np.testing.assert_array_equal(verify_fully(third)["w"], tensor)


def test_an_unchanged_tensor_the_base_stores_whole_references_that_block_whole(
        tmp_path: Path) -> None:
    """A frozen weight is one reference, not a reference per band, save after save: a
    reader reads it in one piece, as it reads a full save."""
    tensor = _tensor(7)
    _save(tmp_path, "ckpt-1", None, tensor)
    base, _ = _layout(tmp_path / "ckpt-1")
    assert base is not None
    previous = "ckpt-1"
    for name in ("ckpt-2", "ckpt-3"):
        path = _save(tmp_path, name, previous, tensor)
        whole, slices = _layout(path)
        assert whole is not None
        assert not slices
        with ocf.Reader(path) as reader:
            assert reader.index.shards[whole.shard].pool_sha256  # in the pool
        assert (whole.offset, whole.raw_length, whole.chunk_crcs) == \
            (base.offset, base.raw_length, base.chunk_crcs)
        np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
        previous = name


# Changes its bands' first 4 KiB do not show: each is found by comparing every byte.
@pytest.mark.parametrize(("row", "column"), [(ROWS - 1, COLUMNS - 1), (BAND_ROWS * 9 + 1, 0),
                                         (BAND_ROWS - 1, COLUMNS - 1), (BAND_ROWS * 16 + 3, 77)])
def test_a_change_past_every_bands_first_bytes_is_saved(tmp_path: Path, row: int,
                                                        column: int) -> None:
    tensor = _tensor(8)
    _save(tmp_path, "ckpt-1", None, tensor)
    tensor[row, column] = np.nextafter(tensor[row, column], np.float32(np.inf))
    path = _save(tmp_path, "ckpt-2", "ckpt-1", tensor)
    np.testing.assert_array_equal(verify_fully(path)["w"], tensor)
    whole, slices = _layout(path)
    assert whole is None  # in bands: the changed one written, the others referenced
    assert [start for start, _, own in slices if own] == [row // BAND_ROWS * BAND_ROWS]


def test_equal_bytes_of_another_dtype_are_written_not_referenced(tmp_path: Path) -> None:
    tensor = _tensor(9)
    _save(tmp_path, "ckpt-1", None, tensor)
    as_integers = tensor.view(np.int32)
    path = _save(tmp_path, "ckpt-2", "ckpt-1", as_integers)
    whole, _ = _layout(path)
    assert whole is not None
    with ocf.Reader(path) as reader:
        assert not reader.index.shards[whole.shard].pool_sha256  # in its own file
        assert reader.index.tensors["w"].dtype.name == "int32"
    np.testing.assert_array_equal(verify_fully(path)["w"], as_integers)


def test_a_refused_duplicate_equal_to_the_base_does_not_make_the_first_one_reused(
        tmp_path: Path) -> None:
    """What the layout's comparison found belongs to the item compared: a second array
    under the same key, equal to the base and refused, says nothing of the first."""
    # 2 MiB, two bands: the first array's lookup is still to run when the second is refused.
    base = np.random.default_rng(10).random((1024, 512), dtype=np.float32)
    _save(tmp_path, "ckpt-1", None, base)
    changed = base + np.float32(1)
    writer = ocf.Writer(tmp_path / "ckpt-2", incremental=True, base=tmp_path / "ckpt-1")
    with pytest.raises(ocf.InvalidError, match="key written twice"):
        writer.write_many([("w", changed), ("w", base)])
    writer.commit()  # the tensors before the refused one are written
    np.testing.assert_array_equal(verify_fully(tmp_path / "ckpt-2")["w"], changed)


def test_a_refused_reshape_equal_to_the_base_leaves_nothing_for_a_later_write(
        tmp_path: Path) -> None:
    base = _tensor(11)
    _save(tmp_path, "ckpt-1", None, base)
    writer = ocf.Writer(tmp_path / "ckpt-2", incremental=True, base=tmp_path / "ckpt-1")
    with pytest.raises(ocf.LimitExceededError, match="rank 33"):
        writer.write("w", base.reshape(base.shape + (1,) * 31))
    one_row = (base + np.float32(1)).reshape(1, -1)  # one row: stored whole, never banded
    writer.write("w", one_row)
    writer.commit()
    np.testing.assert_array_equal(verify_fully(tmp_path / "ckpt-2")["w"], one_row)
