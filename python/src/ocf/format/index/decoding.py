"""Decoding and validating a checkpoint index (spec/format.md).

:func:`decode_index` turns the index bytes of an index file into an
:class:`Index`. Every rule the spec puts on the index alone is checked
before any tensor byte is read: the protobuf parses, required features are
known, shard names are safe file names, and the tensor and block tables
are consistent (:mod:`ocf.format.index.tables`). Checks that need the file system
(shard files exist with the recorded length) belong to the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE_SIZE
from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    UnknownRequiredFeatureError,
)
from ocf.format.index.model import Shard
from ocf.format.index.tables import Tables
from ocf.format.limits import MAX_FILE_OFFSET, MAX_SHARDS
from ocf.format.map_entries import graph_bytes, index_metadata_is_plain, nodes_with_odd_entries
from ocf.format.memory import out_of_memory
from ocf.format.metadata import MetadataValue, decode_map
from ocf.format.pool import DIGEST_SIZE, POOL_FEATURE
from ocf.v1 import index_pb2, object_graph_pb2

# Feature names this implementation understands [R-FEAT-001]: formats 1.0 and 1.1
# define none, 1.2 defines "pool" (spec/pool.md) [R-FEAT-002].
SUPPORTED_FEATURES: frozenset[str] = frozenset({POOL_FEATURE})
# Marks a part index (spec/parts.md): understood only by the merge, so that
# every reader of checkpoints refuses a part index [R-PART-001].
PART_FEATURE = "part"

# How protobuf's parser (upb) ends the message of the DecodeError it raises when its
# arena cannot grow: out of memory, which is not a format error [R-ERR-003].
PARSER_OUT_OF_MEMORY = "Arena alloc failed"

SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# Names Windows reserves for devices, with or without an extension [R-SHARD-005].
_DEVICE_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10)]
)


@dataclass(frozen=True)
class Index:
    """A decoded, validated index."""

    required_features: tuple[str, ...]
    writer: str
    shards: tuple[Shard, ...]
    tensors: Tables
    metadata: dict[str, MetadataValue]
    # The stored object graph, checked only when read (ocf.format.object_graph); None for a
    # name-based checkpoint.
    graph_message: object_graph_pb2.ObjectGraph | None
    # The identity of a part index (spec/parts.md); None in a checkpoint.
    part: index_pb2.Part | None = None
    # The wire bytes of the object graph, kept for the check of its nodes' metadata
    # entries [R-META-001], which the parsed message no longer shows.
    graph_wire: tuple[bytes, ...] = ()

    def odd_metadata_nodes(self) -> frozenset[int]:
        """Ids of the graph's nodes whose metadata holds a map entry with a field other
        than key and value [R-META-001]; decode_graph refuses them in node order (G3d)."""
        return nodes_with_odd_entries(self.graph_wire)


def decode_index(data: bytes, path: str, index_offset: int, *, part: bool = False,
                 overlaps_later: bool = False) -> Index:
    """Parse and validate the index bytes of the index file at ``path``.

    ``part`` decodes a part index (spec/parts.md) for a merge: the feature
    ``part`` is then understood, and the boxes of a sliced tensor need not
    cover its shape, since other parts hold the rest [R-PART-001].
    ``overlaps_later`` (a part only) leaves out the check that those boxes are
    pairwise disjoint, for a merge that checks them later with every other
    part's, and again part by part before it reports any failure.
    """
    message = index_pb2.Index()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        if str(exc).endswith(PARSER_OUT_OF_MEMORY):
            raise out_of_memory(len(data), "parsing the index", path=path) from None
        raise MalformedError(f"index does not parse as ocf.v1.Index: {exc}", path=path,
                             requirement="R-FILE-007") from None
    except (RecursionError, ValueError) as exc:
        raise MalformedError(f"index does not parse as ocf.v1.Index: {exc}", path=path,
                             requirement="R-FILE-007") from None
    known = SUPPORTED_FEATURES | {PART_FEATURE} if part else SUPPORTED_FEATURES
    unknown = [f for f in message.header.required_features if f not in known]
    if PART_FEATURE in unknown:
        raise UnknownRequiredFeatureError(
            "this is the part index of one writer of a save, not a checkpoint: merge the "
            "parts (ocf.distributed.parts.merge_parts) and open the checkpoint", path=path,
            requirement="R-PART-003")
    if unknown:
        raise UnknownRequiredFeatureError(
            f"checkpoint requires features this reader does not implement: {', '.join(unknown)}",
            path=path, requirement="R-FEAT-001")
    shards = check_shards(list(message.shards), path, index_offset,
                          pooled=POOL_FEATURE in message.header.required_features)
    tensors = Tables(message.tensors, message.blocks, shards, path, partial=part,
                     overlaps_later=part and overlaps_later)
    if not index_metadata_is_plain(data):
        raise InvalidError("a map entry of Index.metadata holds a field other than its key "
                           "and value", path=path, requirement="R-META-001")
    try:
        metadata = decode_map(message.metadata)
    except LimitExceededError as exc:
        raise LimitExceededError(exc.detail, path=path, requirement=exc.requirement) from None
    graph = message.object_graph if message.HasField("object_graph") else None
    return Index(tuple(message.header.required_features), message.header.writer, shards,
                      tensors, metadata, graph,
                      message.part if part and message.HasField("part") else None,
                      graph_bytes(data) if graph is not None else ())


def check_shards(shards: list[index_pb2.Shard], path: str, index_offset: int, *,
                 pooled: bool = False) -> tuple[Shard, ...]:
    """Check the shard list on the index alone, without touching the file system;
    pool shards only when ``pooled`` (the index lists the feature "pool")."""
    if len(shards) > MAX_SHARDS:
        raise LimitExceededError(f"{len(shards)} shards, above the limit of {MAX_SHARDS}",
                                 path=path, requirement="R-LIMIT-002")
    seen: set[str] = set()
    result = []
    for shard in shards:
        name = shard.path
        if name in seen:
            raise InvalidError(f"shard path {name!r} is listed twice", path=path,
                               requirement="R-SHARD-003")
        seen.add(name)
        if shard.pool_sha256:
            result.append(_pool_shard(shard, pooled, path))
            continue
        if name == "":
            result.append(Shard("", 0, index_offset))
            continue
        _check_name_and_length(shard, path, "shard", ("R-SHARD-001", "R-SHARD-002"))
        result.append(Shard(name, shard.length, shard.length))
    _check_portable([s.path for s in result if s.path], path)
    return tuple(result)


def _pool_shard(shard: index_pb2.Shard, pooled: bool, path: str) -> Shard:
    """A pool shard, checked in the order of spec/pool.md [R-POOL-001] [R-POOL-002]."""
    name = shard.path
    if not pooled:
        raise InvalidError(f"shard {name!r} is a pool object (pool_sha256 is set), but the "
                           f"index does not list the required feature {POOL_FEATURE!r}",
                           path=path, requirement="R-POOL-001")
    if len(shard.pool_sha256) != DIGEST_SIZE:
        raise InvalidError(f"pool shard {name!r} has a pool_sha256 of "
                           f"{len(shard.pool_sha256)} bytes, not {DIGEST_SIZE}", path=path,
                           requirement="R-POOL-002")
    _check_name_and_length(shard, path, "pool shard", ("R-POOL-002", "R-POOL-002"))
    return Shard(name, shard.length, shard.length, bytes(shard.pool_sha256))


def _check_name_and_length(shard: index_pb2.Shard, path: str, what: str,
                           requirements: tuple[str, str]) -> None:
    """A plain file name [R-SHARD-001] and a length in [64, 2^63) [R-SHARD-002], each
    refused citing its requirement of ``requirements`` (a pool shard's: [R-POOL-002])."""
    name = shard.path
    if not SHARD_NAME.fullmatch(name) or name == INDEX_FILE_NAME:
        raise InvalidError(f"{what} path {name!r} is not a plain file name of [A-Za-z0-9._-] "
                           "starting with a letter or digit", path=path,
                           requirement=requirements[0])
    if not PREAMBLE_SIZE <= shard.length <= MAX_FILE_OFFSET:
        raise InvalidError(f"{what} {name!r} length {shard.length} is outside [64, 2^63)",
                           path=path, requirement=requirements[1])


def _check_portable(names: list[str], path: str) -> None:
    """Refuse names that clash or are special on case-insensitive or Windows file systems."""
    folded: set[str] = set()
    for name in names:
        upper = name.upper()
        if upper in folded or upper == INDEX_FILE_NAME.upper() or name.endswith(".") or \
                upper.split(".", 1)[0] in _DEVICE_NAMES:
            raise InvalidError(f"shard path {name!r} is not portable: it clashes with another "
                               "name or index.ocf ignoring case, is a device name, or ends "
                               "with '.'", path=path, requirement="R-SHARD-005")
        folded.add(upper)
