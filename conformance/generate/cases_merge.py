"""Merge cases: the parts of a multi-writer save, and what merging them must give.

spec/parts.md. Each case is a directory holding the part indexes
(``part-<save id>-<nnnnn>.ocfpart``) and shard files of one save, built byte
by byte (ocfbytes.Builder) like every other case, sometimes next to other
files (a previous checkpoint, parts of another save). The implementation
merges a copy of it; the expectation is the meaning of the merged
checkpoint, computed here from the full tensors the parts were cut from, or
the category of the error. Also here: the reject cases of a part index
opened as a checkpoint, and a read case of the form a merge produces.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ocf.v1 import index_pb2

import sample_data as samples
import semantic
from case_dirs import Suite, error
from ocfbytes import CODEC_ZSTD, PREAMBLE, Builder
from semantic import i, s

SAVE = "00112233445566aa"
OTHER_SAVE = "ffeeddccbbaa9988"
DIRECTORY = "checkpoint"
Box = tuple[Sequence[int], Sequence[int]]


def write_id(part: int, save: str = SAVE) -> str:
    """A distinct write id per part (and per save), as each part writer draws one."""
    return f"{save[:8]}{part:04x}{0xbeef:04x}"


@dataclass
class Full:
    """A tensor of the merged checkpoint: its dtype, global shape and canonical bytes."""

    dtype: str
    shape: list[int]
    raw: bytes


@dataclass
class Part:
    """What one part writes: whole tensors and boxes of partitioned ones."""

    number: int
    whole: list[str] = field(default_factory=list)
    boxes: dict[str, list[Box]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    graph: list[dict[str, Any]] | None = None
    zstd: bool = False
    shards: int = 1  # spread its blocks over this many shard files


def part_files(tensors: dict[str, Full], part: Part, count: int, *, save: str = SAVE,
               change: Callable[[index_pb2.Index], None] | None = None) -> dict[str, bytes]:
    """The part index and shard files of ``part``, named as spec/parts.md says."""
    names = [f"data-{write_id(part.number, save)}-{n:05d}.ocfd" for n in range(part.shards)]
    builder = Builder(names if part.whole or part.boxes else [])
    codec = {"codec": CODEC_ZSTD} if part.zstd else {}
    at = 0
    for key in part.whole:
        full = tensors[key]
        builder.add(key, full.dtype, full.shape, full.raw, shard=at % part.shards, **codec)
        at += 1
    for key, boxes in part.boxes.items():
        full = tensors[key]
        spread = [(at + k) % part.shards for k in range(len(boxes))]
        builder.add(key, full.dtype, full.shape, full.raw, slices=boxes, slice_shards=spread,
                    **codec)
        at += len(boxes)
    builder.metadata = part.metadata
    builder.graph = part.graph
    index = builder.index()
    index.header.required_features.append("part")
    index.part.save_id, index.part.number, index.part.count = save, part.number, count
    if change is not None:
        change(index)
    files = builder.files(index, index_name=f"part-{save}-{part.number:05d}.ocfpart")
    return {f"{DIRECTORY}/{name}": data for name, data in files.items()}


def save_files(tensors: dict[str, Full], parts: list[Part], *, save: str = SAVE,
               changes: dict[int, Callable[[index_pb2.Index], None]] | None = None
               ) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for part in parts:
        files.update(part_files(tensors, part, len(parts), save=save,
                                change=(changes or {}).get(part.number)))
    return files


def meaning(tensors: dict[str, Full], metadata: dict[str, Any] | None = None,
            graph: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The merged checkpoint's meaning, from the full tensors (never from the files)."""
    return {"result": "ok",
            "tensors": {k: semantic.tensor(t.dtype, t.shape, t.raw) for k, t in tensors.items()},
            "metadata": metadata or {},
            "object_graph": None if graph is None else semantic.graph(graph)}


def rows(size: int, cuts: Sequence[int], width: int) -> list[Box]:
    """Boxes of whole rows, cut before the given rows."""
    edges = [0, *cuts, size]
    return [([a, 0], [b - a, width]) for a, b in itertools.pairwise(edges)]


# -- the standard save: 4 parts --------------------------------------------------------------


def four_tensors() -> dict[str, Full]:
    return {
        "layer/w": Full("float32", [7, 3], samples.ramp("float32", [7, 3])),
        "layer/b": Full("int16", [4], samples.ramp("int16", [4], step=3)),
        "step": Full("int64", [], struct.pack("<q", 1234)),
        "embed": Full("float16", [2, 5], struct.pack("<10e", *range(10))),
    }


def four_parts() -> list[Part]:
    w = rows(7, [2, 4, 6], 3)
    return [
        Part(0, whole=["step"], boxes={"layer/w": [w[0]]}, metadata={"epoch": i(3)}),
        Part(1, boxes={"layer/w": [w[1]], "embed": [([0, 0], [2, 2])]}, zstd=True),
        Part(2, whole=["layer/b"], boxes={"layer/w": [w[2]]}, shards=2),
        Part(3, boxes={"layer/w": [w[3]], "embed": [([0, 2], [2, 3])]}),
    ]


def successes(suite: Suite) -> None:
    tensors = four_tensors()
    suite.merge("merge.four-parts", requirements=["R-PART-001", "R-PART-004", "R-PART-005",
                                                   "R-PART-006"],
                description="Four parts: a matrix cut into rows across all four, a matrix cut "
                "into columns across two, whole tensors in parts 0 and 2, zstd in part 1, two "
                "shards in part 2, metadata in part 0.",
                files=save_files(tensors, four_parts()), input=DIRECTORY, save_id=SAVE,
                parts=4, expect=meaning(tensors, {"epoch": i(3)}))

    grid = {"k": Full("uint8", [4, 4], bytes(range(16))),
            "v": Full("float64", [3], samples.ramp("float64", [3]))}
    graph = [{"type_name": "Model", "children": [["dense", 1]]},
             {"type_name": "Dense", "attributes": [["kernel", "k"], ["bias", "v"]]}]
    parts = [Part(0, boxes={"k": [([0, 0], [2, 2]), ([2, 2], [2, 2])]}, graph=graph,
                  metadata={"note": s("graph in part 0")}),
             Part(1, boxes={"k": [([0, 2], [2, 2])]}, zstd=True),
             Part(2, whole=["v"], boxes={"k": [([2, 0], [2, 2])]})]
    suite.merge("merge.boxes-and-object-graph", requirements=["R-PART-005", "R-PART-006"],
                description="Three parts holding 2x2 boxes of a 4x4 matrix (two boxes in part "
                "0) and a whole vector; part 0's object graph names tensors of parts 1 and 2.",
                files=save_files(grid, parts), input=DIRECTORY, save_id=SAVE, parts=3,
                expect=meaning(grid, {"note": s("graph in part 0")}, graph))

    many = 2049  # boxes per part: 4098 slices in all, above the 4096 of format 1.1
    wide = {"r": Full("uint8", [2 * many], bytes(k % 251 for k in range(2 * many)))}
    parts = [Part(n, boxes={"r": [([k], [1]) for k in range(n * many, (n + 1) * many)]})
             for n in (0, 1)]
    suite.merge("merge.slices-above-4096", requirements=["R-SLICE-004", "R-PART-005",
                                                         "R-PART-006"],
                description=f"Two parts of {many} one-element boxes each of a uint8 vector: "
                f"{2 * many} slices in all, above the 4096 of formats 1.0 and 1.1 and within "
                "the 65536 that format 1.2 allows up to rank 4.",
                files=save_files(wide, parts), input=DIRECTORY, save_id=SAVE, parts=2,
                expect=meaning(wide))

    one = {"x": Full("int32", [6], samples.ramp("int32", [6])),
           "y": Full("int8", [2], b"\x01\xff")}
    suite.merge("merge.single-part", requirements=["R-PART-004", "R-PART-006"],
                description="A save of one part, whose tensors lie in three shard files.",
                files=save_files(one, [Part(0, whole=["x", "y"], shards=3)]), input=DIRECTORY,
                save_id=SAVE, parts=1, expect=meaning(one))

    files = save_files(one, [Part(0, whole=["x", "y"]), Part(1)])
    stale = {"z": Full("uint8", [1], b"\x07")}
    files.update(save_files(stale, [Part(0, whole=["z"]), Part(1)], save=OTHER_SAVE))
    previous = Builder(["data-0123456789abcdef-00000.ocfd"])
    previous.add("old", "float32", [1], struct.pack("<f", 1.5))
    files.update({f"{DIRECTORY}/{n}": d for n, d in previous.files().items()})
    files[f"{DIRECTORY}/.index.ocf.ocf-tmp-fedcba9876543210"] = PREAMBLE + b"partial"
    suite.merge("merge.among-other-files", requirements=["R-PART-004", "R-PART-006",
                                                         "R-PART-007"],
                description="Two parts, the second holding nothing, next to a previous "
                "checkpoint, the complete parts of another save and a temporary file: only "
                "the named save is merged, and it replaces the previous checkpoint.",
                files=files, input=DIRECTORY, save_id=SAVE, parts=2, expect=meaning(one))


# -- refusals --------------------------------------------------------------------------------


def refusals(suite: Suite) -> None:
    tensors = four_tensors()

    def refused(name: str, category: str, requirements: list[str], description: str,
                files: dict[str, bytes], parts: int = 4) -> None:
        suite.merge(f"merge.{name}", requirements=requirements, description=description,
                    files=files, input=DIRECTORY, save_id=SAVE, parts=parts,
                    expect=error(category))

    def damaged(change: Callable[[index_pb2.Index], None], part: int = 1) -> dict[str, bytes]:
        return save_files(tensors, four_parts(), changes={part: change})

    files = save_files(tensors, four_parts())
    del files[f"{DIRECTORY}/part-{SAVE}-00002.ocfpart"]
    refused("missing-part", "NOT_FOUND", ["R-PART-004", "R-PART-006"],
            "Part 2 of 4 was never published (its shards are there): nothing may be merged.",
            files)
    refused("more-parts-than-written", "NOT_FOUND", ["R-PART-004"],
            "Four parts are written and five asked for.", save_files(tensors, four_parts()),
            parts=5)
    refused("fewer-parts-than-written", "INVALID", ["R-PART-004"],
            "Four parts are written and three asked for: each part says it is one of four.",
            save_files(tensors, four_parts()), parts=3)
    refused("part-of-another-save", "INVALID", ["R-PART-004"],
            "Part 1's Index.part names another save id than its file name.",
            damaged(lambda x: setattr(x.part, "save_id", OTHER_SAVE)))
    refused("part-number-differs", "INVALID", ["R-PART-004"],
            "The file of part 3 says it is part 1 (a part file copied under another name).",
            damaged(lambda x: setattr(x.part, "number", 1), part=3))
    refused("not-a-part-index", "INVALID", ["R-PART-001"],
            "Part 1 does not list the required feature 'part'.",
            damaged(lambda x: x.header.ClearField("required_features")))
    refused("no-part-identity", "INVALID", ["R-PART-001"],
            "Part 2 lists the feature 'part' but has no Index.part.",
            damaged(lambda x: x.ClearField("part"), part=2))
    refused("part-identity-present-but-empty", "INVALID", ["R-PART-001", "R-PART-004"],
            "Part 2's Index.part is present as an empty message (field 7 of length 0): it "
            "is set, and its empty save id and part number 0 do not match the file name.",
            damaged(lambda x: (x.ClearField("part"), x.part.SetInParent()), part=2))
    refused("part-with-own-data", "INVALID", ["R-PART-001"],
            "Part 1 lists the shard with the empty path (data in the part index itself).",
            damaged(lambda x: x.shards.add(path="")))
    part_2 = f"part-{SAVE}-00002.ocfpart"
    part_2_length = len(save_files(tensors, four_parts())[f"{DIRECTORY}/{part_2}"])
    refused("shard-named-like-a-part-index", "INVALID", ["R-PART-001", "R-PART-007"],
            "Part 0 lists part 2's index file, with its exact length, as one of its shards: "
            "merged, it would be a shard of the checkpoint that the merge's cleanup deletes.",
            damaged(lambda x: x.shards.add(path=part_2, length=part_2_length), part=0))
    refused("shard-not-named-as-a-shard", "INVALID", ["R-PART-001"],
            "Part 3's only shard file is named 'weights.bin', not data-<writeid>-<nnnnn>.ocfd "
            "(the file is there under that name, with that length).",
            _renamed_shard(tensors, 3, "weights.bin"))
    refused("own-data-and-wrong-identity", "INVALID", ["R-PART-001", "R-PART-004"],
            "Part 1 lists the shard with the empty path and names another save: two faults, "
            "the rules of R-PART-001 are checked before the identity (M2), both INVALID.",
            damaged(lambda x: (x.shards.add(path=""),
                               setattr(x.part, "save_id", OTHER_SAVE))))
    refused("unknown-feature-and-wrong-identity", "UNKNOWN_REQUIRED_FEATURE",
            ["R-PART-004", "R-FEAT-001"],
            "Part 2 requires an unknown feature and names another save: the reader's checks "
            "of the part index come before its identity (M2).",
            damaged(lambda x: (x.header.required_features.append("x-unknown"),
                               setattr(x.part, "save_id", OTHER_SAVE)), part=2))
    refused("unknown-feature-in-part", "UNKNOWN_REQUIRED_FEATURE", ["R-PART-004", "R-FEAT-001"],
            "Part 3 requires a feature no merger implements besides 'part'.",
            damaged(lambda x: x.header.required_features.append("x-unknown"), part=3))
    files = save_files(tensors, four_parts())
    name = f"{DIRECTORY}/part-{SAVE}-00001.ocfpart"
    blob = bytearray(files[name])
    blob[-33] ^= 0x01  # the last index byte
    files[name] = bytes(blob)
    refused("part-index-checksum", "INTEGRITY", ["R-PART-004", "R-FILE-006"],
            "A byte of part 1's index bytes is flipped: its CRC-32C does not match.", files)

    metadata = save_files(tensors, four_parts(), changes={
        2: lambda x: x.metadata["extra"].CopyFrom(index_pb2.Index().metadata["extra"])})
    refused("metadata-in-part-2", "INVALID", ["R-PART-005"],
            "Part 2 carries a metadata entry; only part 0 may.", metadata)

    overlap_inside = four_parts()
    overlap_inside[0].boxes["layer/w"] = [([0, 0], [2, 3]), ([1, 0], [1, 3])]
    refused("boxes-overlap-within-a-part", "INVALID", ["R-PART-001"],
            "Part 0 holds two boxes of one tensor that share a row.",
            save_files(tensors, overlap_inside))

    twice = four_parts()
    twice[3].whole.append("step")
    refused("whole-tensor-in-two-parts", "INVALID", ["R-PART-005"],
            "Parts 0 and 3 both store the scalar 'step' whole.", save_files(tensors, twice))
    mixed = four_parts()
    mixed[0].boxes["layer/b"] = [([0], [2])]
    refused("whole-and-sliced", "INVALID", ["R-PART-005"],
            "'layer/b' is stored whole by part 2 and a slice of it by part 0.",
            save_files(tensors, mixed))
    overlap = four_parts()
    overlap[2].boxes["layer/w"] = [([3, 0], [2, 3])]
    refused("slices-of-two-parts-overlap", "INVALID", ["R-PART-005"],
            "Parts 1 and 2 both hold row 3 of 'layer/w' (and nothing is missing: rows 4..5 "
            "of part 2 became rows 3..4).", save_files(tensors, overlap))
    gap = four_parts()
    gap[2].boxes["layer/w"] = [([4, 0], [1, 3])]
    refused("slices-leave-a-gap", "INVALID", ["R-PART-005"],
            "No part holds row 5 of 'layer/w'.", save_files(tensors, gap))
    refused("slice-dtype-differs", "INVALID", ["R-PART-005"],
            "Part 3's slices of 'layer/w' say int32 where the other parts say float32.",
            save_files(tensors, four_parts(), changes={3: _set_dtype("layer/w", 4)}))
    refused("slice-shape-differs", "INVALID", ["R-PART-005"],
            "Part 1 gives 'layer/w' the global shape [8, 3] where the others say [7, 3].",
            save_files(tensors, four_parts(), changes={1: _set_dims("layer/w", [8, 3])}))

    shard_of_0 = f"data-{write_id(0)}-00000.ocfd"
    length = len(save_files(tensors, four_parts())[f"{DIRECTORY}/{shard_of_0}"])

    def borrow(index: index_pb2.Index) -> None:
        index.shards[0].path, index.shards[0].length = shard_of_0, length

    refused("shard-in-two-parts", "INVALID", ["R-PART-005"],
            "Part 3 lists part 0's shard file (with its length) as its own.",
            save_files(tensors, four_parts(), changes={3: borrow}))

    graph = [{"type_name": "Model", "attributes": [["kernel", "no/such/key"]]}]
    parts = four_parts()
    parts[0].graph = graph
    refused("graph-names-a-missing-key", "INVALID", ["R-PART-005", "R-GRAPH-004"],
            "Part 0's object graph names a tensor that no part holds.",
            save_files(tensors, parts))

    files = save_files(tensors, four_parts())
    del files[f"{DIRECTORY}/data-{write_id(2)}-00001.ocfd"]
    refused("shard-missing", "NOT_FOUND", ["R-PART-005", "R-SHARD-002"],
            "The second shard file of part 2 is gone.", files)

    files = save_files(tensors, four_parts())
    previous = Builder(["data-0123456789abcdef-00000.ocfd"])
    previous.add("old", "float32", [1], struct.pack("<f", 1.5))
    files.update({f"{DIRECTORY}/{n}": d for n, d in previous.files().items()})
    del files[f"{DIRECTORY}/part-{SAVE}-00003.ocfpart"]
    refused("previous-checkpoint-kept", "NOT_FOUND", ["R-PART-006", "R-PART-007"],
            "A committed checkpoint and three of four parts: the merge fails and changes "
            "nothing, so the previous checkpoint stays the committed one.", files)


def arguments(suite: Suite) -> None:
    """M0 of spec/parts.md: a save id or part count out of range is refused before any
    file is touched."""
    tensors = four_tensors()
    for name, save_id, parts, why in [
            ("save-id-escapes-the-directory", "../0123456789abc", 4,
             "a save id that is not 16 lowercase hexadecimal digits ('../0123456789abc', "
             "which would name files outside the directory)"),
            ("save-id-in-upper-case", SAVE.upper(), 4,
             "a save id in upper-case hexadecimal digits"),
            ("part-count-zero", SAVE, 0, "a part count of 0"),
            ("part-count-above-limit", SAVE, 65537, "a part count of 65537")]:
        suite.merge(f"merge.arguments.{name}", requirements=["R-PART-004"],
                    description=f"The four parts of a save, merged with {why}: INVALID before "
                    "any file is read (M0).", files=save_files(tensors, four_parts()),
                    input=DIRECTORY, save_id=save_id, parts=parts, expect=error("INVALID"))


def order(suite: Suite) -> None:
    """Two faults that a merger checking in another order than M2 and M5 of spec/parts.md
    (part by part, key by key) reports differently."""
    tensors = four_tensors()

    def refused(name: str, category: str, requirements: list[str], description: str,
                files: dict[str, bytes], parts: int = 4) -> None:
        suite.merge(f"merge.order.{name}", requirements=[*requirements, "R-ERR-002"],
                    description=description, files=files, input=DIRECTORY, save_id=SAVE,
                    parts=parts, expect=error(category))

    def damaged_checksum(files: dict[str, bytes], part: int) -> dict[str, bytes]:
        name = f"{DIRECTORY}/part-{SAVE}-{part:05d}.ocfpart"
        blob = bytearray(files[name])
        blob[-33] ^= 0x01  # the last index byte: the index CRC-32C no longer matches
        files[name] = bytes(blob)
        return files

    files = save_files(tensors, four_parts(),
                       changes={0: lambda x: setattr(x.part, "save_id", OTHER_SAVE)})
    refused("identity-of-part-0-before-checksum-of-part-1", "INVALID", ["R-PART-004"],
            "Part 0's Index.part names another save and part 1's index checksum is wrong: "
            "every check of part 0 comes before part 1 is read (M2).",
            damaged_checksum(files, 1))
    files = save_files(tensors, four_parts(), changes={
        1: lambda x: x.metadata["extra"].CopyFrom(index_pb2.Index().metadata["extra"])})
    refused("metadata-of-part-1-before-checksum-of-part-2", "INVALID",
            ["R-PART-004", "R-PART-005"],
            "Part 1 carries a metadata entry and part 2's index checksum is wrong: the "
            "metadata rule is part of M2 for part 1, before part 2 is read.",
            damaged_checksum(files, 2))

    # Slices per part: two parts hold 4098 slices of a rank-5 tensor, above the 4096 that
    # R-SLICE-004 allows above rank 4.
    many = 2049
    gapped = {"a": Full("int32", [4], samples.ramp("int32", [4])),
              "b": Full("uint8", [2 * many, 1, 1, 1, 1], bytes(range(256)) * (2 * many // 256)
                        + bytes(2 * many % 256))}
    parts = [Part(0, boxes={"a": [([0], [2])], "b": cells_of_rank_5(range(many))}),
             Part(1, boxes={"a": [([2], [1])], "b": cells_of_rank_5(range(many, 2 * many))})]
    refused("gap-before-later-slice-limit", "INVALID", ["R-PART-005", "R-SLICE-004"],
            f"Key 'a' (first in merged order) leaves element 3 uncovered, and key 'b', of "
            f"rank 5, has {2 * many} slices in all, above the 4096 allowed above rank 4: M5 "
            "runs key by key, all its checks for 'a' before 'b'.", save_files(gapped, parts),
            parts=2)


def cells_of_rank_5(rows: range) -> list[Box]:
    """One box per row of a [n, 1, 1, 1, 1] tensor."""
    return [([k, 0, 0, 0, 0], [1] * 5) for k in rows]


def _renamed_shard(tensors: dict[str, Full], part: int, name: str) -> dict[str, bytes]:
    """The standard save, with the one shard file of ``part`` under ``name`` in the
    directory and in the part's index."""
    old = f"data-{write_id(part)}-00000.ocfd"

    def rename(index: index_pb2.Index) -> None:
        assert [shard.path for shard in index.shards] == [old]
        index.shards[0].path = name

    files = save_files(tensors, four_parts(), changes={part: rename})
    files[f"{DIRECTORY}/{name}"] = files.pop(f"{DIRECTORY}/{old}")
    return files


def _set_dtype(key: str, dtype: int) -> Callable[[index_pb2.Index], None]:
    def change(index: index_pb2.Index) -> None:
        index.tensors.dtypes[list(index.tensors.keys).index(key)] = dtype
    return change


def _set_dims(key: str, dims: list[int]) -> Callable[[index_pb2.Index], None]:
    def change(index: index_pb2.Index) -> None:
        row = list(index.tensors.keys).index(key)
        at = sum(index.tensors.ranks[:row])
        for d, value in enumerate(dims):
            index.tensors.dims[at + d] = value
    return change


# -- parts seen by readers, and the merged form ----------------------------------------------


def readers(suite: Suite) -> None:
    tensors = four_tensors()
    files = save_files(tensors, four_parts())
    name = f"part-{SAVE}-00000.ocfpart"
    part0 = {key: data for key, data in files.items()
             if key.endswith((name, f"data-{write_id(0)}-00000.ocfd"))}
    suite.read("reject.part.part-index-opened", requirements=["R-PART-003", "R-FEAT-001"],
               description="A part index opened as a checkpoint: it requires the feature "
               "'part', which readers of checkpoints do not implement.",
               files=part0, input=f"{DIRECTORY}/{name}", expect=error("UNKNOWN_REQUIRED_FEATURE"))
    suite.read("reject.part.unmerged-directory", requirements=["R-PART-003", "R-COMMIT-003"],
               description="A directory holding all four parts of a save but no index.ocf: "
               "there is no checkpoint until the parts are merged.",
               files=files, input=DIRECTORY, expect=error("NOT_FOUND"))

    # What a merge of four parts publishes: slices of one tensor in shards of four writes.
    merged = Builder([f"data-{write_id(p)}-00000.ocfd" for p in range(4)])
    merged.add("layer/w", "float32", [7, 3], samples.ramp("float32", [7, 3]),
               slices=rows(7, [2, 4, 6], 3), slice_shards=[0, 1, 2, 3])
    merged.add("step", "int64", [], struct.pack("<q", 1234), shard=0)
    merged.add("layer/b", "int16", [4], samples.ramp("int16", [4], step=3), shard=2,
               codec=CODEC_ZSTD)
    suite.read("read.layout.slices-of-several-writes", requirements=["R-SLICE-003",
                                                                     "R-SHARD-004"],
               description="A directory checkpoint as a merge leaves it: the slices of one "
               "tensor lie in the shards of four writes (four write ids), no data in index.ocf.",
               files={f"{DIRECTORY}/{n}": d for n, d in merged.files().items()},
               input=DIRECTORY, expect=merged.expect())


def generate(suite: Suite) -> None:
    successes(suite)
    refusals(suite)
    arguments(suite)
    order(suite)
    readers(suite)
