"""Multi-writer saves (spec/parts.md): parts written separately, merged into one checkpoint.

Every refusal of the merge is pinned down here with the category it raises,
and every failed merge is checked to leave no index.ocf (or the previous one)
behind. Expected arrays are built with NumPy from the inputs, never read
back through the code under test.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import index_bytes_of, index_of, replace_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from samples import assert_all_bit_exact

import ocf
from ocf.distributed.parts import (
    PartWriter,
    Slice,
    merge_parts,
    new_save_id,
    part_file_name,
    write_part,
)
from ocf.format.map_entries import fields
from ocf.format.object_graph import Node
from ocf.v1 import index_pb2

SAVE = "00112233445566aa"
OTHER_SAVE = "ffeeddccbbaa9988"


def _rows(full: np.ndarray, parts: int) -> list[Slice]:
    """``full`` split by rows into ``parts`` slices, with np.array_split's bounds."""
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(full.shape[0]), parts)])
    return [Slice(full[a:b], (int(a),) + (0,) * (full.ndim - 1), full.shape)
            for a, b in itertools.pairwise(bounds)]


def _four_parts(directory: Path, save_id: str = SAVE, **options: object
                ) -> dict[str, np.ndarray]:
    """Write the parts of a 4-writer save: row slices, column slices, whole tensors."""
    rng = np.random.default_rng(7)
    full = {
        "layer/w": rng.standard_normal((10, 6)).astype(np.float32),
        "layer/b": rng.integers(-9, 9, size=(7, 5)).astype(np.int64),
        "step": np.array(42, dtype=np.int64),
        "embed": rng.standard_normal((3, 8)).astype(np.float16),
    }
    rows = _rows(full["layer/w"], 4)
    cols = [Slice(full["layer/b"][:, a:b], (0, a), (7, 5)) for a, b in
            [(0, 2), (2, 3), (3, 4), (4, 5)]]
    for part in range(4):
        tensors: dict[str, object] = {"layer/w": rows[part], "layer/b": cols[part]}
        if part == 0:
            tensors["step"] = full["step"]
        if part == 3:
            tensors["embed"] = full["embed"]
        write_part(directory, tensors, part=part, parts=4, save_id=save_id,
                   metadata={"epoch": 3} if part == 0 else None, **options)
    return full


def _assert_holds(path: Path, expected: dict[str, np.ndarray]) -> None:
    with ocf.open(path) as reader:
        assert_all_bit_exact({key: reader.read_tensor(key) for key in reader}, expected)


def _no_checkpoint(directory: Path) -> None:
    assert not (directory / "index.ocf").exists()
    with pytest.raises(ocf.NotFoundError):
        ocf.open(directory)


# -- merging what parts wrote -----------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"compression": "zstd", "byte_shuffle": True},
                                     {"chunk_size": 4096, "max_shard_size": 256}])
def test_merged_parts_read_back_as_the_full_arrays(tmp_path: Path,
                                                   options: dict[str, object]) -> None:
    full = _four_parts(tmp_path / "ckpt", **options)
    merge_parts(tmp_path / "ckpt", save_id=SAVE, parts=4)
    _assert_holds(tmp_path / "ckpt", full)
    with ocf.open(tmp_path / "ckpt") as reader:
        assert reader.metadata == {"epoch": 3}
        assert reader.object_graph is None


def test_merge_references_the_parts_shards_without_copying_them(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    _four_parts(directory, max_shard_size=128)
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
              for p in directory.glob("data-*.ocfd")}
    assert len({name.split("-")[1] for name in before}) == 4  # one write id per part
    merge_parts(directory, save_id=SAVE, parts=4)
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
             for p in directory.glob("data-*.ocfd")}
    assert after == before
    index = index_of((directory / "index.ocf").read_bytes())
    assert sorted(s.path for s in index.shards) == sorted(before)
    assert index.blocks.offsets  # blocks point into the parts' shards
    assert sorted(os.listdir(directory)) == sorted([*before, "index.ocf"])


def test_merged_index_is_an_ordinary_checkpoint(tmp_path: Path) -> None:
    _four_parts(tmp_path / "ckpt")
    merge_parts(tmp_path / "ckpt", save_id=SAVE, parts=4)
    index = index_of((tmp_path / "ckpt" / "index.ocf").read_bytes())
    assert list(index.header.required_features) == []
    assert not index.HasField("part")
    # Tensors in order of first appearance: part 0's, then the next parts' new keys.
    assert list(index.tensors.keys) == ["layer/w", "layer/b", "step", "embed"]
    assert list(index.tensors.slice_counts) == [4, 4, 0, 0]


def test_object_graph_of_part_0_may_name_tensors_of_other_parts(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    kernel = np.arange(12, dtype=np.float32).reshape(4, 3)
    graph = [Node(children={"dense": 1}), Node(attributes={"kernel": "dense/kernel"},
                                                type_name="Dense")]
    write_part(directory, {"dense/kernel": Slice(kernel[:1], (0, 0), (4, 3))}, part=0,
               parts=2, save_id=SAVE, object_graph=graph)
    write_part(directory, {"dense/kernel": Slice(kernel[1:], (1, 0), (4, 3))}, part=1,
               parts=2, save_id=SAVE)
    merge_parts(directory, save_id=SAVE, parts=2)
    with ocf.open(directory) as reader:
        graph_read = reader.object_graph
        assert graph_read is not None
        assert graph_read.nodes[1].attributes == {"kernel": "dense/kernel"}
        assert reader.read_tensor("dense/kernel").tobytes() == kernel.tobytes()


def test_a_part_may_write_nothing(tmp_path: Path) -> None:
    write_part(tmp_path, {"x": np.ones(3)}, part=0, parts=2, save_id=SAVE)
    write_part(tmp_path, {}, part=1, parts=2, save_id=SAVE)
    merge_parts(tmp_path, save_id=SAVE, parts=2)
    _assert_holds(tmp_path, {"x": np.ones(3)})


@pytest.mark.parametrize("tile_bytes", [None, 64])
def test_an_empty_box_stores_nothing_and_the_other_parts_boxes_tile_the_tensor(
        tmp_path: Path, tile_bytes: int | None) -> None:
    # FSDP2's split of a [1, 33] weight over 3 ranks: rank 0 holds the row, ranks 1 and 2
    # boxes of shape [0, 33] at [1, 0] (issue 27: every rank's save failed).
    weight = np.arange(33, dtype=np.float32).reshape(1, 33)
    for part in range(3):
        box = weight[:1] if part == 0 else weight[1:]
        write_part(tmp_path, {"w": Slice(box, (min(part, 1), 0), (1, 33))}, part=part, parts=3,
                   save_id=SAVE, tile_bytes=tile_bytes)
    merge_parts(tmp_path, save_id=SAVE, parts=3)
    _assert_holds(tmp_path, {"w": weight})
    with ocf.open(tmp_path) as reader:
        assert all(0 not in s.extent for s in reader["w"].slices)


@pytest.mark.parametrize(("shape", "boxes"), [
    ((0, 6), [((0, 0), (0, 6))] * 3),                      # rows split: every box at the origin
    ((4, 0), [((0, 0), (2, 0)), ((2, 0), (2, 0))]),        # 4 rows of nothing
    ((0, 6), [((0, 0), (0, 3)), ((0, 3), (0, 3))]),        # columns of nothing
])
def test_a_tensor_without_elements_is_stored_whole_by_the_part_with_the_origin_box(
        tmp_path: Path, shape: tuple[int, int], boxes: list[tuple[tuple[int, int],
                                                                  tuple[int, int]]]) -> None:
    # With several boxes at the origin (rows split), only the first part writes it: a DCP
    # planner deduplicates the same box, ocf.distributed.torch.save picks one rank.
    seen = set()
    for part, (start, extent) in enumerate(boxes):
        tensors = {} if start in seen else {"e": Slice(np.zeros(extent, np.int16), start,
                                                         shape)}
        seen.add(start)
        write_part(tmp_path, tensors, part=part, parts=len(boxes), save_id=SAVE)
    merge_parts(tmp_path, save_id=SAVE, parts=len(boxes))
    _assert_holds(tmp_path, {"e": np.zeros(shape, np.int16)})
    with ocf.open(tmp_path) as reader:
        assert reader["e"].slices == ()


def test_an_empty_box_outside_its_tensor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match=r"'w'.*\[0, 3\] at \[5, 0\].*R-SLICE-001"):
        write_part(tmp_path, {"w": Slice(np.zeros((0, 3)), (5, 0), (4, 3))}, part=0, parts=2,
                   save_id=SAVE)


def test_part_writer_used_directly_as_a_context_manager(tmp_path: Path) -> None:
    grid = np.arange(16, dtype=np.uint8).reshape(4, 4)
    for part in range(2):
        with PartWriter(tmp_path, part=part, parts=2, save_id=SAVE) as writer:
            writer.write_slice("grid", grid[:, 2 * part:2 * part + 2], (0, 2 * part), (4, 4))
    merge_parts(tmp_path, save_id=SAVE, parts=2)
    _assert_holds(tmp_path, {"grid": grid})


def test_part_index_is_refused_by_readers_and_parts_alone_are_no_checkpoint(
        tmp_path: Path) -> None:
    _four_parts(tmp_path)
    with pytest.raises(ocf.UnknownRequiredFeatureError, match=r"R-PART-003"):
        ocf.open(tmp_path / part_file_name(SAVE, 0))
    _no_checkpoint(tmp_path)


def test_parts_of_another_save_are_not_merged_and_are_cleaned_up(tmp_path: Path) -> None:
    write_part(tmp_path, {"x": np.zeros(2)}, part=0, parts=2, save_id=OTHER_SAVE)
    full = _four_parts(tmp_path)
    merge_parts(tmp_path, save_id=SAVE, parts=4)
    _assert_holds(tmp_path, full)
    assert not list(tmp_path.glob("part-*")), "part indexes are removed after the commit"


def test_merge_without_cleanup_keeps_the_part_files(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    merge_parts(tmp_path, save_id=SAVE, parts=4, cleanup=False)
    assert len(list(tmp_path.glob("part-*.ocfpart"))) == 4
    assert (tmp_path / "index.ocf").is_file()


def test_new_save_ids_are_fresh_hex(tmp_path: Path) -> None:
    ids = {new_save_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 16 and int(i, 16) >= 0 and i == i.lower() for i in ids)


# -- refusals -------------------------------------------------------------------------------


def _edit_part(directory: Path, number: int, change: Callable[[index_pb2.Index], None],
               save_id: str = SAVE) -> None:
    """Rewrite the index of a part file (with a matching footer), as a hostile file could."""
    path = directory / part_file_name(save_id, number)
    blob = path.read_bytes()
    index = index_of(blob)
    change(index)
    path.write_bytes(replace_index(blob, index))


def _refused(directory: Path, error: type[ocf.OCFError], match: str, parts: int = 4) -> None:
    with pytest.raises(error, match=match):
        merge_parts(directory, save_id=SAVE, parts=parts)
    _no_checkpoint(directory)


def test_missing_part_is_not_found_and_nothing_is_committed(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    (tmp_path / part_file_name(SAVE, 2)).unlink()
    _refused(tmp_path, ocf.NotFoundError, r"part 2 of 4 is missing.*R-PART-004")


def test_part_index_under_a_symbolic_link_is_not_read(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    kept = tmp_path / "kept"
    kept.mkdir()
    (tmp_path / part_file_name(SAVE, 1)).rename(kept / part_file_name(SAVE, 1))
    (tmp_path / part_file_name(SAVE, 1)).symlink_to(Path("kept") / part_file_name(SAVE, 1))
    _refused(tmp_path, ocf.NotFoundError, r"part 1 of 4 is missing.*R-PART-004")
    assert (tmp_path / part_file_name(SAVE, 1)).is_symlink()


def test_merged_metadata_keys_are_ordered_by_their_bytes(tmp_path: Path) -> None:
    """[R-FILE-007], [R-PART-006]: the merged index is the merger's deterministic
    serialization, entries ordered by key bytes ("" < "a" < "ab"), unlike upb's own mode."""
    write_part(tmp_path, {"x": np.ones(3)}, part=0, parts=1, save_id=SAVE,
               metadata={"ab": 1, "a": 2, "": 3})
    merge_parts(tmp_path, save_id=SAVE, parts=1)
    wire = memoryview(index_bytes_of((tmp_path / "index.ocf").read_bytes()))
    keys = [bytes(next(fields(entry))[2]) for number, _, entry in fields(wire) if number == 5]
    assert keys == [b"", b"a", b"ab"]


def test_fewer_parts_written_than_merged_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _refused(tmp_path, ocf.NotFoundError, r"part 4 of 5 is missing", parts=5)


def test_part_count_differing_from_the_merge_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _refused(tmp_path, ocf.InvalidError, r"part 0 of 3 .* says it is part 0 of 4.*R-PART-004",
             parts=3)


def test_part_file_renamed_to_another_number_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    os.replace(tmp_path / part_file_name(SAVE, 1), tmp_path / part_file_name(SAVE, 2))
    _refused(tmp_path, ocf.NotFoundError, r"part 1 of 4 is missing")
    write_part(tmp_path / "other", {}, part=1, parts=4, save_id=SAVE)
    os.replace(tmp_path / "other" / part_file_name(SAVE, 1), tmp_path / part_file_name(SAVE, 1))
    _refused(tmp_path, ocf.InvalidError, r"part 2 of 4 .* says it is part 1 of 4")


def test_part_of_another_save_under_this_saves_name_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _edit_part(tmp_path, 3, lambda index: setattr(index.part, "save_id", OTHER_SAVE))
    _refused(tmp_path, ocf.InvalidError, r"save 'ffeeddccbbaa9988'")


def test_index_file_that_is_not_a_part_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _edit_part(tmp_path, 1, lambda index: index.header.ClearField("required_features"))
    _refused(tmp_path, ocf.InvalidError, r"not a part index.*R-PART-001")


def test_unknown_feature_in_a_part_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _edit_part(tmp_path, 1, lambda index: index.header.required_features.append("x-new"))
    _refused(tmp_path, ocf.UnknownRequiredFeatureError, r"x-new")


def test_corrupt_part_index_is_an_integrity_error(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    path = tmp_path / part_file_name(SAVE, 2)
    blob = bytearray(path.read_bytes())
    blob[-40] ^= 0x01  # a byte of the index bytes, just before the footer
    path.write_bytes(bytes(blob))
    _refused(tmp_path, ocf.IntegrityError, r"R-FILE-006")


def test_truncated_part_index_is_malformed(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    path = tmp_path / part_file_name(SAVE, 0)
    path.write_bytes(path.read_bytes()[:-5])
    _refused(tmp_path, ocf.MalformedError, r"R-FILE-004")


def test_tensor_written_whole_by_two_parts_is_refused(tmp_path: Path) -> None:
    write_part(tmp_path, {"w": np.ones(3)}, part=0, parts=2, save_id=SAVE)
    write_part(tmp_path, {"w": np.ones(3)}, part=1, parts=2, save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, r"'w'.*parts 0 and 1.*R-PART-005", parts=2)


def test_tensor_whole_in_one_part_and_sliced_in_another_is_refused(tmp_path: Path) -> None:
    write_part(tmp_path, {"w": Slice(np.ones(2), (0,), (4,))}, part=0, parts=2, save_id=SAVE)
    write_part(tmp_path, {"w": np.ones(4)}, part=1, parts=2, save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, r"'w'.*parts 0 and 1.*whole", parts=2)


def test_overlapping_slices_of_two_parts_are_refused(tmp_path: Path) -> None:
    write_part(tmp_path, {"w": Slice(np.ones((3, 2)), (0, 0), (5, 2))}, part=0, parts=2,
               save_id=SAVE)
    write_part(tmp_path, {"w": Slice(np.ones((3, 2)), (2, 0), (5, 2))}, part=1, parts=2,
               save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, r"'w'.*overlap.*R-PART-005", parts=2)


def test_slices_leaving_a_gap_are_refused(tmp_path: Path) -> None:
    write_part(tmp_path, {"w": Slice(np.ones((2, 2)), (0, 0), (5, 2))}, part=0, parts=2,
               save_id=SAVE)
    write_part(tmp_path, {"w": Slice(np.ones((2, 2)), (3, 0), (5, 2))}, part=1, parts=2,
               save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, r"'w'.*cover 8 of the 10 elements", parts=2)


def test_slices_failing_m5_are_reported_before_the_merged_index_fails_m6(
        tmp_path: Path) -> None:
    # The merged index would also fail M6 (its graph names a key no part holds): the
    # order of checks puts M5, which names the parts, first.
    graph = [Node(attributes={"kernel": "missing"})]
    write_part(tmp_path, {"w": Slice(np.ones((3, 2)), (0, 0), (5, 2))}, part=0, parts=2,
               save_id=SAVE, object_graph=graph)
    write_part(tmp_path, {"w": Slice(np.ones((3, 2)), (2, 0), (5, 2))}, part=1, parts=2,
               save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, r"'w'.*slices written by parts \[0, 1\] overlap",
             parts=2)


@pytest.mark.parametrize(("second", "message"), [
    (Slice(np.ones(2, np.float64), (2,), (4,)), r"dtype float64 .* float32"),
    (Slice(np.ones(2, np.float32), (2,), (5,)), r"global shape \[5\].*\[4\]"),
])
def test_slices_with_mismatched_dtype_or_global_shape_are_refused(
        tmp_path: Path, second: Slice, message: str) -> None:
    write_part(tmp_path, {"w": Slice(np.ones(2, np.float32), (0,), (4,))}, part=0, parts=2,
               save_id=SAVE)
    write_part(tmp_path, {"w": second}, part=1, parts=2, save_id=SAVE)
    _refused(tmp_path, ocf.InvalidError, message, parts=2)


def test_metadata_in_a_part_other_than_0_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ocf.InvalidError, match="only part 0"):
        PartWriter(tmp_path, part=1, parts=2, save_id=SAVE, metadata={"a": 1})
    _four_parts(tmp_path)
    _edit_part(tmp_path, 2, lambda index: index.metadata["a"].CopyFrom(
        index_pb2.Index().metadata.get_or_create("a")))
    _refused(tmp_path, ocf.InvalidError, r"part 2 holds metadata.*R-PART-005")


def test_object_graph_in_a_part_other_than_0_is_refused(tmp_path: Path) -> None:
    with PartWriter(tmp_path, part=1, parts=2, save_id=SAVE) as writer, \
            pytest.raises(ocf.InvalidError, match="only part 0"):
        writer.set_object_graph([Node()])


def test_object_graph_naming_a_tensor_no_part_wrote_is_refused(tmp_path: Path) -> None:
    graph = [Node(attributes={"kernel": "missing"})]
    write_part(tmp_path, {"x": np.ones(1)}, part=0, parts=1, save_id=SAVE, object_graph=graph)
    _refused(tmp_path, ocf.InvalidError, r"R-GRAPH-004", parts=1)


def test_shard_listed_by_two_parts_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    shard_of_0 = index_of((tmp_path / part_file_name(SAVE, 0)).read_bytes()).shards[0]

    def share(index: index_pb2.Index) -> None:
        index.shards[0].CopyFrom(shard_of_0)

    _edit_part(tmp_path, 1, share)
    _refused(tmp_path, ocf.InvalidError, r"listed by parts 0 and 1.*R-PART-005")


def test_part_naming_its_own_data_region_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    _edit_part(tmp_path, 1, lambda index: index.shards.add(path=""))
    _refused(tmp_path, ocf.InvalidError, r"empty path.*R-PART-001")


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_part_listing_another_parts_index_as_a_shard_is_refused(tmp_path: Path) -> None:
    # A faulty part names part 2's index file, with its exact length, as a shard: merged,
    # the file would be a shard of the checkpoint that the cleanup deletes.
    _four_parts(tmp_path)
    other = part_file_name(SAVE, 2)
    length = (tmp_path / other).stat().st_size
    _edit_part(tmp_path, 0, lambda index: index.shards.add(path=other, length=length))
    before = _files(tmp_path)
    _refused(tmp_path, ocf.InvalidError, r"'part-.*-00002.ocfpart' is not named "
             r"data-<writeid>-<nnnnn>.ocfd.*R-PART-001")
    assert _files(tmp_path) == before, "a failed merge changes nothing"


@pytest.mark.parametrize(("name", "requirement"), [
    ("weights.bin", "R-PART-001"), ("data-0123456789abcdef-0.ocfd", "R-PART-001"),
    ("data-0123456789ABCDEF-00000.ocfd", "R-PART-001"), (part_file_name(OTHER_SAVE, 0),
                                                         "R-PART-001"),
    # Refused earlier, by the reader's checks of a part index (step 2 to 15).
    ("index.ocf", "R-SHARD-001"), (".index.ocf.ocf-tmp-0123456789abcdef", "R-SHARD-001")])
def test_shard_of_a_part_not_named_as_a_shard_is_refused(tmp_path: Path, name: str,
                                                         requirement: str) -> None:
    _four_parts(tmp_path)
    shard = index_of((tmp_path / part_file_name(SAVE, 3)).read_bytes()).shards[0].path
    (tmp_path / shard).rename(tmp_path / name)

    def rename(index: index_pb2.Index) -> None:
        index.shards[0].path = name

    _edit_part(tmp_path, 3, rename)
    with pytest.raises(ocf.InvalidError, match=requirement):
        merge_parts(tmp_path, save_id=SAVE, parts=4)
    assert (tmp_path / name).exists()


def test_rules_of_part_files_are_checked_before_the_identity(tmp_path: Path) -> None:
    # M2 of spec/parts.md: R-PART-001 (here the shard with the empty path), then R-PART-004.
    _four_parts(tmp_path)

    def two_faults(index: index_pb2.Index) -> None:
        index.shards.add(path="")
        index.part.save_id = OTHER_SAVE

    _edit_part(tmp_path, 1, two_faults)
    _refused(tmp_path, ocf.InvalidError, r"empty path.*R-PART-001")


def test_cleanup_never_deletes_a_name_the_committed_index_references(tmp_path: Path) -> None:
    from ocf.distributed.parts.merging import remove_leftovers
    from ocf.format.commit import leftover_names

    names = [part_file_name(SAVE, 0), part_file_name(SAVE, 1), ".x.ocf-tmp-1", ".y.ocf-tmp-2",
             "data-0123456789abcdef-00000.ocfd", "data-0123456789abcdef-00001.ocfd",
             "index.ocf", "notes.txt"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    referenced = {part_file_name(SAVE, 1), ".y.ocf-tmp-2", "data-0123456789abcdef-00001.ocfd"}
    assert leftover_names(names, referenced) == [".x.ocf-tmp-1",
                                                 "data-0123456789abcdef-00000.ocfd"]
    remove_leftovers(tmp_path, referenced)
    assert sorted(os.listdir(tmp_path)) == sorted([*referenced, "index.ocf", "notes.txt"])


def test_parts_use_only_public_names_of_other_modules() -> None:
    # ocf.distributed.parts builds on ocf.Writer's documented extension points, not its internals.
    import ast

    import ocf.distributed.parts

    for source in Path(ocf.distributed.parts.__file__).parent.glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.ctx, ast.Store)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ocf"):
                assert not [a.name for a in node.names if a.name.startswith("_")
                            and not a.name.startswith("__")], source
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                    not node.attr.startswith("__"):
                assert node.attr in own, f"{source.name}: {node.attr}"


def test_missing_or_truncated_shard_of_a_part_is_refused(tmp_path: Path) -> None:
    _four_parts(tmp_path)
    shard = tmp_path / index_of((tmp_path / part_file_name(SAVE, 3)).read_bytes()).shards[0].path
    data = shard.read_bytes()
    shard.write_bytes(data[:-1])
    _refused(tmp_path, ocf.MalformedError, r"R-SHARD-002")
    shard.unlink()
    _refused(tmp_path, ocf.NotFoundError, r"R-SHARD-002")


def test_part_writer_refuses_bad_identities(tmp_path: Path) -> None:
    for kwargs, message in [({"part": 2, "parts": 2, "save_id": SAVE}, "part number 2"),
                            ({"part": 0, "parts": 0, "save_id": SAVE}, "part count 0"),
                            ({"part": 0, "parts": 1, "save_id": "XYZ"}, "save id 'XYZ'")]:
        with pytest.raises(ocf.InvalidError, match=message):
            PartWriter(tmp_path, **kwargs)  # type: ignore[arg-type]


def test_overlapping_slices_within_one_part_are_refused_at_write(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path, part=0, parts=2, save_id=SAVE)
    writer.write_slice("w", np.ones(2), (0,), (6,))
    writer.write_slice("w", np.ones(2), (1,), (6,))
    with pytest.raises(ocf.InvalidError, match="overlap"):
        writer.commit()
    assert not list(tmp_path.iterdir()), "an aborted part leaves no files"


def test_failed_merge_keeps_the_previous_checkpoint_and_a_retry_commits(tmp_path: Path) -> None:
    previous = {"old": np.arange(4)}
    ocf.save_file(previous, tmp_path, layout="directory")
    full = _four_parts(tmp_path)
    missing = tmp_path / part_file_name(SAVE, 1)
    kept = missing.read_bytes()
    missing.unlink()
    with pytest.raises(ocf.NotFoundError):
        merge_parts(tmp_path, save_id=SAVE, parts=4)
    _assert_holds(tmp_path, previous)
    missing.write_bytes(kept)
    merge_parts(tmp_path, save_id=SAVE, parts=4)
    _assert_holds(tmp_path, full)
    assert not list(tmp_path.glob("part-*"))
    assert not list(tmp_path.glob(".*"))


# -- random partitionings --------------------------------------------------------------------


@st.composite
def _partitioned(draw: st.DrawFn) -> tuple[np.ndarray, list[list[tuple[tuple[int, ...],
                                                                     tuple[int, ...]]]]]:
    """A random array, a grid of boxes tiling it, and the boxes dealt to random parts."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    cuts = [sorted(set(draw(st.lists(st.integers(1, d - 1), max_size=3)))) if d > 1 else []
            for d in shape]
    edges = [[0, *c, d] for c, d in zip(cuts, shape)]
    boxes = [((),())]
    for e in edges:
        boxes = [((*s, a), (*x, b - a)) for s, x in boxes for a, b in itertools.pairwise(e)]
    parts = draw(st.integers(1, 5))
    owners = draw(st.lists(st.integers(0, parts - 1), min_size=len(boxes), max_size=len(boxes)))
    dealt: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = [[] for _ in range(parts)]
    for box, owner in zip(boxes, owners):
        dealt[owner].append(box)
    seed = draw(st.integers(0, 2**32 - 1))
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return array, dealt


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_partitioned(), compress=st.booleans(), data=st.data())
def test_random_partitionings_merge_and_read_back_equal(
        tmp_path_factory: pytest.TempPathFactory, case: tuple[np.ndarray, list[list[
            tuple[tuple[int, ...], tuple[int, ...]]]]], compress: bool,
        data: st.DataObject) -> None:
    array, dealt = case
    directory = tmp_path_factory.mktemp("random")
    save_id = new_save_id()
    for part, boxes in enumerate(dealt):
        writer = PartWriter(directory, part=part, parts=len(dealt), save_id=save_id,
                            compression="zstd" if compress else None)
        with writer:
            for start, extent in boxes:
                window = tuple(slice(s, s + e) for s, e in zip(start, extent))
                writer.write_slice("t", array[window], start, array.shape)
    merge_parts(directory, save_id=save_id, parts=len(dealt))
    with ocf.open(directory) as reader:
        assert reader.read_tensor("t").tobytes() == array.tobytes()
        region = tuple(slice(*sorted(data.draw(st.tuples(st.integers(0, d), st.integers(0, d)))))
                       for d in array.shape)
        assert reader.get_slice("t", region).tobytes() == array[region].tobytes()


# -- resharded reads -------------------------------------------------------------------------


def test_reading_a_region_of_other_parts_reads_only_the_overlapping_chunks(
        tmp_path: Path) -> None:
    # 64 rows of 4096 bytes, chunks of one row: a region of rows reads exactly its rows.
    full = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    for part, piece in enumerate(_rows(full, 4)):
        write_part(tmp_path, {"w": piece}, part=part, parts=4, save_id=SAVE, chunk_size=4096)
    merge_parts(tmp_path, save_id=SAVE, parts=4)
    with ocf.open(tmp_path) as reader:
        got = reader.get_slice("w", np.s_[10:30])  # spans parts 0 and 1
        assert got.tobytes() == full[10:30].tobytes()
        assert reader.bytes_read == 20 * 4096


# -- object stores ---------------------------------------------------------------------------


def test_parts_merge_on_an_object_store(s3_bucket: str, s3_server: Any) -> None:
    url, options = f"{s3_bucket}/ckpt", s3_server.storage_options
    full = np.arange(40, dtype=np.int32).reshape(10, 4)
    for part, piece in enumerate(_rows(full, 3)):
        write_part(url, {"w": piece}, part=part, parts=3, save_id=SAVE,
                   storage_options=options)
    with pytest.raises(ocf.NotFoundError):
        ocf.Reader(url, storage_options=options)  # parts alone are no checkpoint
    with pytest.raises(ocf.NotFoundError, match="part 3 of 4 is missing"):
        merge_parts(url, save_id=SAVE, parts=4, storage_options=options)
    merge_parts(url, save_id=SAVE, parts=3, storage_options=options)
    names = [n.rsplit("/", 1)[-1] for n in s3_server.fs.ls(url.removeprefix("s3://"),
                                                            refresh=True)]
    assert "index.ocf" in names
    assert not [n for n in names if n.startswith("part-")]
    with ocf.Reader(url, storage_options=options) as reader:
        assert reader.read_tensor("w").tobytes() == full.tobytes()
