"""Cases of checkpoints with pool shards (format 1.2, spec/pool.md): read cases in
both forms, a chain of saves with the bytes of a retired checkpoint still pooled,
and the reject cases of R-POOL-001 to R-POOL-004.

Every case holds a managed root ``run/``: checkpoints directly in it (single
files, or directories holding ``index.ocf``) and the pool ``run/ocf-pool/``.
Pool objects are shard files built byte by byte like any other, or (one
case) the whole file of a single-file checkpoint, as a hard link made by a
later save leaves it; the index lists each with the SHA-256 of its bytes and
the required feature ``pool``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import replace

from ocf.v1 import index_pb2

import semantic
from case_dirs import Suite, error
from ocfbytes import PREAMBLE, Block, Builder, Tensor

ROOT = "run"
POOL = f"{ROOT}/ocf-pool"
FEATURE = "pool"


def _name(save: int) -> str:
    """The pool object a save of write id 000000000000000<save> wrote first."""
    return f"pool-{save:016x}-00000.ocfd"


def _raw(count: int, seed: int) -> bytes:
    """``count`` float32 values, different per seed, as canonical bytes."""
    return struct.pack(f"<{count}f", *(seed + k * 0.25 for k in range(count)))


def chain() -> Builder:
    """The latest checkpoint of three saves: ``frozen`` and band 0 of ``emb`` written by
    save 1 (whose checkpoint is retired; its object also holds bands 1 and 2 as they
    were then, which nothing uses any more), band 1 by save 2, band 2 and ``step`` by
    save 3."""
    builder = Builder([_name(1), _name(2), _name(3)])
    builder.add("frozen", "float32", [4, 8], _raw(32, 1), shard=0)
    emb = _raw(48, 2)
    builder.put(0, _raw(16, 90))  # the old band 1 and 2 of save 1: unused bytes
    builder.put(0, _raw(16, 91))
    builder.add("emb", "float32", [12, 4], emb,
                slices=[([0, 0], [4, 4]), ([4, 0], [4, 4]), ([8, 0], [4, 4])],
                slice_shards=[0, 1, 2])
    builder.add("step", "int64", [], (3).to_bytes(8, "little"), shard=2)
    builder.metadata = {"step": semantic.i(3)}
    return builder


def pooled(builder: Builder, index: index_pb2.Index | None = None, *,
           digests: dict[int, bytes] | None = None) -> tuple[index_pb2.Index, dict[str, bytes]]:
    """The index of ``builder`` with its shards made pool shards (their SHA-256, the
    feature), and the pool objects by their path in the case."""
    index = index if index is not None else builder.index()
    objects = {}
    for number, (name, region) in enumerate(zip(builder.shard_names, builder.regions)):
        if not name:
            continue
        data = PREAMBLE + bytes(region)
        digest = hashlib.sha256(data).digest()
        index.shards[number].pool_sha256 = (digests or {}).get(number, digest)
        objects[f"{POOL}/{name}"] = data
    if FEATURE not in index.header.required_features:
        index.header.required_features.append(FEATURE)
    return index, objects


def single(builder: Builder, index: index_pb2.Index, name: str) -> dict[str, bytes]:
    """The index file of the single-file checkpoint ``run/<name>``."""
    return {f"{ROOT}/{name}": builder.files(index, minor=2)["index.ocf"]}


def directory(builder: Builder, index: index_pb2.Index, name: str) -> dict[str, bytes]:
    """The index file of the checkpoint directory ``run/<name>``."""
    return {f"{ROOT}/{name}/index.ocf": builder.files(index, minor=2)["index.ocf"]}


def reads(suite: Suite) -> None:
    builder = chain()
    index, objects = pooled(builder)
    expect = builder.expect()
    suite.read("read.pool.chain-single-file", requirements=["R-POOL-001", "R-POOL-003",
                                                            "R-POOL-004"],
               description="The single-file checkpoint run/ckpt-3 of a chain of three saves: "
               "its blocks are in three pool objects of run/ocf-pool, one written by the "
               "retired save 1 (which also holds blocks nothing uses), one by save 2, one by "
               "save 3; its index file holds no data.",
               files={**objects, **single(builder, index, "ckpt-3")}, input=f"{ROOT}/ckpt-3",
               expect=expect)
    suite.read("read.pool.chain-directory", requirements=["R-POOL-001", "R-POOL-003"],
               description="The same chain as read.pool.chain-single-file, the latest "
               "checkpoint in the multi-file form run/ckpt-3/index.ocf: its managed root is "
               "run, the parent of its directory, whose pool holds the blocks.",
               files={**objects, **directory(builder, index, "ckpt-3")},
               input=f"{ROOT}/ckpt-3", expect=expect)
    mixed = Builder(["", _name(1)])
    mixed.add("own", "float32", [3], _raw(3, 5), shard=0)
    mixed.add("pooled", "float32", [5], _raw(5, 6), shard=1)
    index, objects = pooled(mixed)
    suite.read("read.pool.own-data-and-pool", requirements=["R-POOL-001", "R-POOL-002"],
               description="A single-file checkpoint with one tensor in its own data region "
               "and one in a pool object.",
               files={**objects, f"{ROOT}/ckpt-1": mixed.files(index, minor=2)["index.ocf"]},
               input=f"{ROOT}/ckpt-1", expect=mixed.expect())


def linked_checkpoint_file(suite: Suite) -> None:
    """A pool object that is the whole file of a single-file checkpoint: save 1 wrote
    its blocks into its own file; save 2 reused ``frozen`` by linking that file into
    the pool ([R-COMMIT-007]) and wrote ``head`` into its own file; save 1 is retired."""
    first = Builder([""])
    first.add("frozen", "float32", [4, 8], _raw(32, 1))
    first.add("head", "float32", [6], _raw(6, 2))
    first_file = first.files(minor=2)["index.ocf"]
    second = Builder(["", _name(2)])
    frozen = first.tensors[0]
    second.tensors.append(replace(frozen, blocks=[replace(frozen.blocks[0], shard=1)]))
    second.expected_tensors["frozen"] = first.expected_tensors["frozen"]
    second.add("head", "float32", [6], _raw(6, 3), shard=0)
    _over_linked_file(suite, "read.pool.linked-checkpoint-file",
                      ["R-POOL-002", "R-POOL-003", "R-POOL-004"],
                      "run/ckpt-2 keeps head in its own data region and frozen in a pool object "
                      "that is the whole file of the retired single-file checkpoint ckpt-1 "
                      "(preamble, data region, index and footer), as a hard link made by a later "
                      "save leaves it: the pool object's data region runs to its end, and its "
                      "SHA-256 covers the index and footer too.", first_file, second)


def _over_linked_file(suite: Suite, case: str, requirements: list[str], description: str,
                      first_file: bytes, second: Builder) -> None:
    """The read case of ``second``, run/ckpt-2, whose shard 1 is the pool object that is
    ``first_file``, the whole file of the retired checkpoint ckpt-1 linked into the pool
    by save 2 ([R-COMMIT-007])."""
    index = second.index()
    index.shards[1].length = len(first_file)
    index.shards[1].pool_sha256 = hashlib.sha256(first_file).digest()
    index.header.required_features.append(FEATURE)
    suite.read(case, requirements=requirements, description=description,
               files={f"{POOL}/{_name(2)}": first_file,
                      f"{ROOT}/ckpt-2": second.files(index, minor=2)["index.ocf"]},
               input=f"{ROOT}/ckpt-2", expect=second.expect())


def bands_of_a_whole_block(suite: Suite) -> None:
    """Bands of rows referenced as runs of chunks of a block stored whole: save 1 wrote
    ``emb`` (22 rows of 1 KiB) whole in chunks of 4096 bytes (4 rows); save 2 wrote
    its rows 4 to 15 anew and referenced the others in save 1's file, linked into the
    pool: rows 0 to 3 as chunk 0 (a block of one chunk), rows 16 to 21 as chunks 4
    and 5 (the second the block's short last chunk); save 1 is retired."""
    chunk, row = 4096, 1024
    old, new = _raw(22 * 256, 7), _raw(22 * 256, 8)
    first = Builder([""])
    whole_tensor = first.add("emb", "float32", [22, 256], old, chunk_size=chunk)
    whole = whole_tensor.blocks[0]
    first_file = first.files(minor=2)["index.ocf"]
    second = Builder(["", _name(2)])
    crcs = whole.chunk_crcs
    middle = second.encode(new[4 * row:16 * row], 4, chunk_size=chunk)
    middle.start, middle.extent = [4, 0], [12, 256]
    second.tensors.append(Tensor("emb", whole_tensor.dtype, [22, 256], [
        Block(1, whole.offset, 4 * row, 4 * row, chunk_crcs=crcs[:1], start=[0, 0],
              extent=[4, 256]),
        middle,
        Block(1, whole.offset + 16 * row, 6 * row, 6 * row, chunk_size=chunk,
              chunk_crcs=crcs[4:], start=[16, 0], extent=[6, 256])], sliced=True))
    second.expected_tensors["emb"] = semantic.tensor(
        "float32", [22, 256], old[:4 * row] + new[4 * row:16 * row] + old[16 * row:])
    _over_linked_file(suite, "read.pool.bands-of-a-whole-block",
                      ["R-POOL-003", "R-POOL-004", "R-SLICE-002", "R-CHUNK-001", "R-CRC-001"],
                      "run/ckpt-2 stores emb (22 x 256 float32) in three slices of whole rows: "
                      "rows 4-15 in its own data region; rows 0-3 and 16-21 in the pool object "
                      "that is the whole file of the retired checkpoint ckpt-1, which stored emb "
                      "whole in chunks of 4096 bytes: each slice is a run of whole chunks of that "
                      "block (bytes [0, 4096) as one chunk, chunk_size 0; bytes [16384, 22528) as "
                      "chunks of 4096, the last one short) with those chunks' CRCs.",
                      first_file, second)


def _reject(suite: Suite, name: str, requirements: list[str], category: str,
            description: str, files: dict[str, bytes], *,
            links: dict[str, str] | None = None) -> None:
    suite.read(f"reject.pool.{name}", requirements=requirements, description=description,
               files=files, input=f"{ROOT}/ckpt-3", expect=error(category), links=links)


def index_rejects(suite: Suite) -> None:
    """Pool shards refused on the index alone (step 12)."""
    builder = chain()
    index, objects = pooled(builder)
    del index.header.required_features[:]
    _reject(suite, "feature-not-listed", ["R-POOL-001"], "INVALID",
            "A pool shard (pool_sha256 set) in an index that does not list the required "
            "feature pool: a reader without the feature would look for it beside the index.",
            {**objects, **single(builder, index, "ckpt-3")})
    index, objects = pooled(builder)
    index.shards[1].pool_sha256 = index.shards[1].pool_sha256[:31]
    _reject(suite, "digest-31-bytes", ["R-POOL-002"], "INVALID",
            "A pool shard whose pool_sha256 holds 31 bytes, not 32.",
            {**objects, **single(builder, index, "ckpt-3")})
    for case, path in (("path-parent", ".."), ("path-separator", "../ocf-pool/x.ocfd"),
                       ("path-empty", "")):
        index, objects = pooled(builder)
        index.shards[2].path = path
        _reject(suite, f"escape-{case}", ["R-POOL-002"], "INVALID",
                f"A pool shard whose path is {path!r}: a pool shard names a plain file "
                "directly in the pool directory, so a reference never leaves the managed "
                "root.", {**objects, **single(builder, index, "ckpt-3")})


def file_rejects(suite: Suite) -> None:
    """Pool objects that are missing, linked, short or not the ones referenced."""
    builder = chain()
    index, objects = pooled(builder)
    checkpoint = single(builder, index, "ckpt-3")
    last = f"{POOL}/{_name(3)}"
    _reject(suite, "missing-object", ["R-POOL-003"], "NOT_FOUND",
            "The pool object written by save 3 is missing from run/ocf-pool.",
            {**{k: v for k, v in objects.items() if k != last}, **checkpoint})
    _reject(suite, "object-beside-index", ["R-POOL-003"], "NOT_FOUND",
            "The pool object of save 3 lies beside the index file in run, not in "
            "run/ocf-pool: a pool shard is never resolved beside the index file.",
            {**{k: v for k, v in objects.items() if k != last},
             f"{ROOT}/{_name(3)}": objects[last], **checkpoint})
    _reject(suite, "no-pool-directory", ["R-POOL-003"], "NOT_FOUND",
            "The managed root run has no directory ocf-pool; the objects lie in run/pool.",
            {**{k.replace("ocf-pool", "pool"): v for k, v in objects.items()}, **checkpoint})
    _reject(suite, "truncated-object", ["R-POOL-003"], "MALFORMED",
            "The pool object of save 3 lost its last byte: its size differs from the "
            "length the index records.", {**objects, last: objects[last][:-1], **checkpoint})
    _reject(suite, "symlink-pool-directory", ["R-POOL-003"], "NOT_FOUND",
            "run/ocf-pool is a symbolic link to a directory outside the root holding the "
            "valid pool objects: no link is followed.",
            {**{k.replace(POOL, "elsewhere/ocf-pool"): v for k, v in objects.items()},
             **checkpoint}, links={POOL: "../elsewhere/ocf-pool"})
    _reject(suite, "symlink-object", ["R-POOL-003"], "NOT_FOUND",
            "The pool object of save 3 is a symbolic link to the same bytes outside the "
            "root.", {**{k: v for k, v in objects.items() if k != last},
                      f"elsewhere/{_name(3)}": objects[last], **checkpoint},
            links={last: f"../../elsewhere/{_name(3)}"})
    changed = bytearray(objects[last])
    changed[20] = 1  # a reserved preamble byte, which readers ignore [R-FILE-003]
    _reject(suite, "object-not-the-referenced-one", ["R-POOL-004"], "INTEGRITY",
            "A byte of the reserved preamble of the pool object of save 3 is 01: every "
            "chunk CRC still matches, but the file's SHA-256 is not the one the index "
            "records.", {**objects, last: bytes(changed), **checkpoint})
    wrong = bytes(32)
    index, objects = pooled(builder, digests={0: wrong})
    _reject(suite, "wrong-sha256", ["R-POOL-004"], "INTEGRITY",
            "The pool_sha256 of the first pool shard is 32 zero bytes, not the SHA-256 of "
            "the object; its blocks' CRCs match.",
            {**objects, **single(builder, index, "ckpt-3")})
    index, objects = pooled(builder, digests={0: wrong})
    suite.read("reject.order.pool-missing-before-identity",
               requirements=["R-POOL-003", "R-POOL-004"],
               description="The first pool object is not the one referenced (wrong "
               "SHA-256) and the third is missing: the files of every shard are checked "
               "(step 16) before any identity (step 16b).",
               files={**{k: v for k, v in objects.items() if k != last},
                      **single(builder, index, "ckpt-3")},
               input=f"{ROOT}/ckpt-3", expect=error("NOT_FOUND"))


def generate(suite: Suite) -> None:
    reads(suite)
    linked_checkpoint_file(suite)
    bands_of_a_whole_block(suite)
    index_rejects(suite)
    file_rejects(suite)
