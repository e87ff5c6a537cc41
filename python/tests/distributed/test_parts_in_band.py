"""Part indexes handed to the merger in-band (spec/parts.md, [R-PART-009]).

A part writer that seals its part makes its shards durable and returns the
part index's bytes instead of publishing a part file; the merger given those
bytes runs the same checks in the same order and publishes the same merged
index as from part files. Each test here compares the two transports on the
same input: the file transport is the reference, never the code's own output
for the in-band one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import index_of, replace_index
from samples import assert_all_bit_exact

import ocf
from ocf.distributed.parts import LocalBox, merge_parts, part_file_name, seal_part, write_part
from ocf.v1 import index_pb2

SAVE = "00112233445566aa"
WRITE_IDS = ["a0a0a0a0a0a0a0a0", "b1b1b1b1b1b1b1b1", "c2c2c2c2c2c2c2c2"]


def _state() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {"w": rng.standard_normal((12, 40)).astype(np.float32),
            "b": rng.integers(-5, 5, size=(9, 4)).astype(np.int64),
            "step": np.array(7, dtype=np.int64)}


def _parts(full: dict[str, np.ndarray]) -> list[dict[str, object]]:
    """Three parts: rows of ``w`` (tiled), columns of ``b``, ``step`` whole in part 0."""
    rows = [(0, 5), (5, 9), (9, 12)]
    cols = [(0, 1), (1, 3), (3, 4)]
    return [{"w": LocalBox(full["w"][a:b], (a, 0), full["w"].shape),
             "b": LocalBox(full["b"][:, c:d], (0, c), full["b"].shape),
             **({"step": full["step"]} if part == 0 else {})}
            for part, ((a, b), (c, d)) in enumerate(zip(rows, cols))]


def _options(part: int) -> dict[str, object]:
    return {"part": part, "parts": 3, "save_id": SAVE, "write_id": WRITE_IDS[part],
            "tile_bytes": 256, "chunk_size": 4096,
            "metadata": {"epoch": 3} if part == 0 else None}


def _as_files(directory: Path) -> dict[str, np.ndarray]:
    full = _state()
    for part, tensors in enumerate(_parts(full)):
        write_part(directory, tensors, **_options(part))  # type: ignore[arg-type]
    return full


def _sealed(directory: Path) -> list[bytes | None]:
    return [seal_part(directory, tensors, **_options(part))  # type: ignore[arg-type]
            for part, tensors in enumerate(_parts(_state()))]


def test_a_sealed_part_is_the_bytes_its_part_file_would_hold(tmp_path: Path) -> None:
    _as_files(tmp_path / "files")
    sealed = _sealed(tmp_path / "in-band")
    for part, data in enumerate(sealed):
        assert data == (tmp_path / "files" / part_file_name(SAVE, part)).read_bytes()
    # Nothing but the shards: no part file, no temporary file.
    assert sorted(p.name for p in (tmp_path / "in-band").iterdir()) == sorted(
        p.name for p in (tmp_path / "files").iterdir() if p.name.startswith("data-"))


def test_merging_in_band_publishes_the_same_index_as_merging_the_files(
        tmp_path: Path) -> None:
    full = _as_files(tmp_path / "files")
    merge_parts(tmp_path / "files", save_id=SAVE, parts=3)
    merge_parts(tmp_path / "in-band", save_id=SAVE, parts=3,
                part_indexes=_sealed(tmp_path / "in-band"))
    assert (tmp_path / "in-band" / "index.ocf").read_bytes() == \
        (tmp_path / "files" / "index.ocf").read_bytes()
    assert sorted(p.name for p in (tmp_path / "in-band").iterdir()) == \
        sorted(p.name for p in (tmp_path / "files").iterdir())
    with ocf.open(tmp_path / "in-band") as reader:
        assert_all_bit_exact({key: reader.read_tensor(key) for key in reader}, full)
        assert reader.metadata == {"epoch": 3}


def _flip_index_byte(blob: bytes) -> bytes:
    changed = bytearray(blob)
    changed[-40] ^= 0x01  # a byte of the index, just before the footer
    return bytes(changed)


def _edited(change: Callable[[index_pb2.Index], None]) -> Callable[[bytes], bytes]:
    def edit(blob: bytes) -> bytes:
        index = index_of(blob)
        change(index)
        return replace_index(blob, index)
    return edit


def _last_box_onto_the_one_before(index: index_pb2.Index) -> None:
    """The last tile of a part (of a rank-2 tensor) starts where the tile before it does."""
    starts = index.blocks.slice_starts
    starts[-2], starts[-1] = starts[-4], starts[-3]


GARBLINGS: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "a flipped index byte": (2, _flip_index_byte),
    "truncated": (0, lambda blob: blob[:-5]),
    "empty": (1, lambda blob: b""),
    "not an index file": (1, lambda blob: b"x" * len(blob)),
    "another save": (1, _edited(lambda index: setattr(index.part, "save_id",
                                                      "ffeeddccbbaa9988"))),
    "another part number": (2, _edited(lambda index: setattr(index.part, "number", 1))),
    "not a part": (1, _edited(lambda index: index.header.ClearField("required_features"))),
    "metadata outside part 0": (2, _edited(lambda index: index.metadata["x"].CopyFrom(
        index_pb2.Index().metadata.get_or_create("x")))),
    "a shard named like the index": (1, _edited(lambda index: setattr(
        index.shards[0], "path", "index.ocf"))),
    "overlapping its own boxes": (1, _edited(_last_box_onto_the_one_before)),
}


@pytest.mark.parametrize("garbling", sorted(GARBLINGS))
def test_a_garbled_part_index_received_in_band_is_refused_as_its_file_is(
        tmp_path: Path, garbling: str) -> None:
    part, garble = GARBLINGS[garbling]
    _as_files(tmp_path / "files")
    path = tmp_path / "files" / part_file_name(SAVE, part)
    path.write_bytes(garble(path.read_bytes()))
    with pytest.raises(ocf.OCFError) as from_file:
        merge_parts(tmp_path / "files", save_id=SAVE, parts=3)
    received = _sealed(tmp_path / "in-band")
    received[part] = garble(received[part] or b"")
    with pytest.raises(ocf.OCFError) as in_band:
        merge_parts(tmp_path / "in-band", save_id=SAVE, parts=3, part_indexes=received)
    assert type(in_band.value) is type(from_file.value)
    expected = from_file.value
    assert (in_band.value.detail, in_band.value.key, in_band.value.requirement) == \
        (expected.detail, expected.key, expected.requirement)
    # Named by the part file name it would have had, in its own directory.
    assert in_band.value.path == str(expected.path).replace(str(tmp_path / "files"),
                                                            str(tmp_path / "in-band"))
    assert in_band.value.path == str(tmp_path / "in-band" / part_file_name(SAVE, part))
    assert not (tmp_path / "in-band" / "index.ocf").exists()


def test_a_part_never_received_is_missing_as_a_part_file_never_written(tmp_path: Path) -> None:
    received = _sealed(tmp_path)
    with pytest.raises(ocf.NotFoundError, match=r"part 1 of 3 is missing.*R-PART-004"):
        merge_parts(tmp_path, save_id=SAVE, parts=3,
                    part_indexes=[received[0], None, received[2]])
    with pytest.raises(ocf.NotFoundError, match=r"part 2 of 3 is missing"):
        merge_parts(tmp_path, save_id=SAVE, parts=3, part_indexes=received[:2])
    assert not (tmp_path / "index.ocf").exists()


def test_more_part_indexes_than_parts_or_something_other_than_bytes_is_refused(
        tmp_path: Path) -> None:
    received = _sealed(tmp_path)
    with pytest.raises(ocf.InvalidError, match=r"4 part indexes received for a save of 3 "
                                               r"parts.*R-PART-009"):
        merge_parts(tmp_path, save_id=SAVE, parts=3, part_indexes=[*received, received[0]])
    with pytest.raises(ocf.InvalidError, match=r"part 1 was received as a str"):
        merge_parts(tmp_path, save_id=SAVE, parts=3,
                    part_indexes=[received[0], "part", received[2]])  # type: ignore[list-item]
    assert not (tmp_path / "index.ocf").exists()


def test_a_shard_gone_after_its_part_was_sealed_is_not_found_at_the_merge(
        tmp_path: Path) -> None:
    received = _sealed(tmp_path)
    shard = next(p for p in tmp_path.iterdir() if p.name.startswith(f"data-{WRITE_IDS[2]}"))
    shard.unlink()
    with pytest.raises(ocf.NotFoundError, match=shard.name):
        merge_parts(tmp_path, save_id=SAVE, parts=3, part_indexes=received)
    assert not (tmp_path / "index.ocf").exists()


def test_a_failed_in_band_merge_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    full = _as_files(tmp_path)
    merge_parts(tmp_path, save_id=SAVE, parts=3)
    before = (tmp_path / "index.ocf").read_bytes()
    received: list[bytes | None] = [seal_part(tmp_path, tensors, **{
        **_options(part), "save_id": "0123456789abcdef", "write_id": None})  # type: ignore[arg-type]
        for part, tensors in enumerate(_parts(_state()))]
    received[2] = None
    with pytest.raises(ocf.NotFoundError):
        merge_parts(tmp_path, save_id="0123456789abcdef", parts=3, part_indexes=received)
    assert (tmp_path / "index.ocf").read_bytes() == before
    with ocf.open(tmp_path) as reader:
        assert_all_bit_exact({key: reader.read_tensor(key) for key in reader}, full)


@pytest.mark.parametrize("later", ["metadata in part 2", "a shard of part 1 listed by part 2"])
def test_boxes_of_a_part_overlapping_are_reported_before_any_later_failure(
        tmp_path: Path, later: str) -> None:
    """The merge checks each part's own boxes with every other part's (M6) when it succeeds;
    when anything fails, M2's verdict on them still comes first, from files or in-band."""
    _as_files(tmp_path)
    received = _sealed(tmp_path / "in-band")
    part_1 = tmp_path / part_file_name(SAVE, 1)
    shard_of_1 = index_of(part_1.read_bytes()).shards[0].path

    def later_fault(index: index_pb2.Index) -> None:
        if later == "metadata in part 2":
            index.metadata["x"].CopyFrom(index_pb2.Index().metadata.get_or_create("x"))
        else:
            index.shards.add(path=shard_of_1, length=64)

    for blob_of, put in (
            (lambda n: (tmp_path / part_file_name(SAVE, n)).read_bytes(),
             lambda n, blob: (tmp_path / part_file_name(SAVE, n)).write_bytes(blob)),
            (lambda n: received[n] or b"", received.__setitem__)):
        put(1, _edited(_last_box_onto_the_one_before)(blob_of(1)))
        put(2, _edited(later_fault)(blob_of(2)))
    with pytest.raises(ocf.InvalidError, match=r"part 1|slices of the part overlap") as files:
        merge_parts(tmp_path, save_id=SAVE, parts=3)
    with pytest.raises(ocf.InvalidError) as in_band:
        merge_parts(tmp_path / "in-band", save_id=SAVE, parts=3, part_indexes=received)
    for caught in (files, in_band):
        assert caught.value.requirement == "R-PART-001"
        assert "slices of the part overlap" in str(caught.value)
        assert str(caught.value.path).endswith(part_file_name(SAVE, 1))
