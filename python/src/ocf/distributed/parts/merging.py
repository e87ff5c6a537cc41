"""Merging the parts of a multi-writer save into one checkpoint (spec/parts.md).

The merge reads the part indexes it is told to expect, checks that together
they describe one complete checkpoint, and publishes one ``index.ocf`` that
references the parts' shard files where they are: no tensor byte is read,
copied or rewritten [R-PART-006]. Any failed check raises before anything is
published, so a missing, duplicated, overlapping or mismatched part never
becomes a checkpoint, and the previous checkpoint at the path (if any)
stays the committed one [R-PART-004] [R-PART-005].
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ocf._version import __version__
from ocf.distributed.parts.columns import PartTables, block_ranges, fill_blocks, joined, part_tables
from ocf.distributed.parts.naming import check_save, is_part_file_name, part_file_name
from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.commit import is_shard_file_name, leftover_names
from ocf.format.container import (
    INDEX_FILE_NAME,
    PREAMBLE,
    PREAMBLE_SIZE,
    Footer,
    read_index_bytes,
)
from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    OCFError,
)
from ocf.format.index import canonical
from ocf.format.index.decoding import PART_FEATURE, Index, decode_index
from ocf.format.index.encoding import extend_fully
from ocf.format.limits import MAX_INDEX_BYTES, max_slices
from ocf.format.object_graph import decode_graph
from ocf.format.slicing import arrays_disjoint, arrays_tile
from ocf.format.storage.backend import Input, backend_of, each
from ocf.format.storage.location import Location, StorageOptions, locate
from ocf.v1 import index_pb2


@dataclass
class _Part:
    """One checked part index."""

    number: int
    path: Location
    model: Index
    message: index_pb2.Index


def merge_parts(path: str | os.PathLike[str], *, save_id: str, parts: int,
                cleanup: bool = True, storage_options: StorageOptions | None = None,
                part_indexes: Sequence[bytes | None] | None = None) -> None:
    """Merge parts 0 to ``parts - 1`` of save ``save_id`` in directory ``path``.

    On success ``path/index.ocf`` is the merged checkpoint and, with
    ``cleanup``, the part indexes and files no longer referenced are deleted
    [R-PART-007]. On failure an :class:`ocf.OCFError` names the part, the
    tensor key and the requirement, and nothing is published. ``path`` may
    be a URL of an object store (``s3://...``; ``storage_options`` go to
    fsspec), where publishing the index object is the commit.

    ``part_indexes``, when given, are the part indexes themselves, in part order
    (None for a part whose writer did not finish), received in-band from the part
    writers (:func:`ocf.distributed.parts.seal_part`) instead of read from part
    files [R-PART-009]: the same checks in the same order, the same merged index.

    Examples:
        >>> from ocf.distributed.parts import merge_parts
        >>> merge_parts("sharded", save_id=save_id, parts=2)  # commits the checkpoint
    """
    check_save(save_id, parts)
    directory = locate(path, storage_options)
    storage = backend_of(directory)
    # M1, the most useful report first: which parts never finished (asked at once).
    if part_indexes is None:
        present = each(storage, lambda n: storage.exists(directory / part_file_name(save_id, n)),
                       range(parts))
    else:
        present = _received(part_indexes, parts, directory)
    for n in range(parts):
        if not present[n]:
            raise NotFoundError(f"part {n} of {parts} is missing: its writer did not finish",
                                path=directory / part_file_name(save_id, n),
                                requirement="R-PART-004")

    def combined(overlaps_later: bool) -> _Combined:  # M2, M3, M4
        return _Combined([_read_part(directory, save_id, n, parts,
                                     None if part_indexes is None else part_indexes[n],
                                     overlaps_later=overlaps_later)
                          for n in range(parts)], directory)

    try:
        # Each part's boxes are checked to be disjoint by M6, with every other part's:
        # a merge that succeeds checks them once.
        index = combined(overlaps_later=True).merged_index()
        data = canonical.serialize(index)
        if len(data) > MAX_INDEX_BYTES:
            raise LimitExceededError(f"merged index would be {len(data)} bytes, above the "
                                     f"limit of {MAX_INDEX_BYTES}", path=directory,
                                     requirement="R-LIMIT-001")
        merged = _checked_merged_index(data, directory)
    except OCFError:
        # The first failure in the order of checks is reported: M2 in full (each part's
        # boxes disjoint), M3 and M4, then M5, which names the parts, before this one.
        combined(overlaps_later=False).check_slices()
        raise
    _check_shard_files(merged, directory)
    _publish(directory, data)
    if cleanup:
        remove_leftovers(directory, {s.path for s in index.shards})


# -- reading the parts -----------------------------------------------------------------------


def _received(part_indexes: Sequence[bytes | None], parts: int, directory: Location
              ) -> list[bool]:
    """M1 for part indexes received in-band: which parts arrived [R-PART-009]."""
    if len(part_indexes) > parts:
        raise InvalidError(f"{len(part_indexes)} part indexes received for a save of "
                           f"{parts} parts", path=directory, requirement="R-PART-009")
    for n, data in enumerate(part_indexes):
        if data is not None and not isinstance(data, bytes):
            raise InvalidError(f"part {n} was received as a {type(data).__name__}, not as "
                               "the bytes of a part index", path=directory,
                               requirement="R-PART-009")
    return [n < len(part_indexes) and part_indexes[n] is not None for n in range(parts)]


class _ReceivedIndex:
    """A part index received in-band, read as its file would be (spec/format.md)."""

    def __init__(self, path: Location, data: bytes) -> None:
        self.path, self.size, self._data = path, len(data), data

    def pread(self, length: int, offset: int) -> bytes:
        data = self._data[offset : offset + length]
        if len(data) != length:
            raise MalformedError(f"file ended after {offset + len(data)} bytes, expected at "
                                 f"least {offset + length}: truncated", path=self.path)
        return data

    def close(self) -> None:
        """Nothing to close: for the same calls as an open file."""


def _read_part(directory: Location, save_id: str, number: int, count: int,
               received: bytes | None = None, *, overlaps_later: bool = False) -> _Part:
    """Read and check part ``number``: an index file (or its bytes, ``received``
    in-band), then a part of this save [R-PART-004]; with ``overlaps_later``, all
    but the check that its boxes are disjoint (M6 makes it)."""
    path = directory / part_file_name(save_id, number)
    source: _ReceivedIndex | Input
    if received is not None:
        source = _ReceivedIndex(path, received)
    else:
        try:
            # A part index is a file of the directory, never one a link points to
            # [R-PART-004].
            source = backend_of(path).open_index(path, follow=False)
        except NotFoundError:  # gone since M1, a symbolic link, or not a regular file
            raise NotFoundError(f"part {number} of {count} is missing: its writer did not "
                                "finish", path=path, requirement="R-PART-004") from None
    try:
        data, footer = read_index_bytes(source)
    finally:
        source.close()
    model = decode_index(data, str(path), footer.index_offset, part=True,
                         overlaps_later=overlaps_later)
    message = index_pb2.Index()
    message.ParseFromString(data)  # parsed once already by decode_index
    # M2 of spec/parts.md: the rules of R-PART-001, then the identity (R-PART-004).
    identity = model.part
    if PART_FEATURE not in model.required_features or identity is None:
        raise InvalidError(f"part {number} is not a part index (no required feature "
                           f"{PART_FEATURE!r} and Index.part)", path=path,
                           requirement="R-PART-001")
    check_part_shards(path, [shard.path for shard in model.shards])
    check_identity(path, identity, (save_id, number, count))
    if number != 0 and (model.metadata or model.graph_message is not None):
        raise InvalidError(f"part {number} holds metadata or an object graph; only part 0 "
                           "may", path=path, requirement="R-PART-005")
    return _Part(number, path, model, message)


def check_part_shards(path: Location, names: list[str]) -> None:
    """A part's shards are its external shard files, each named as the shards of a write
    are, ``data-<writeid>-<nnnnn>.ocfd`` [R-PART-001]: never the index itself, and
    never a part index, index.ocf or any other file the merge or its cleanup handles."""
    if "" in names:
        raise InvalidError("a part index holds no tensor bytes of its own (shard with the "
                           "empty path)", path=path, requirement="R-PART-001")
    for name in names:
        if not is_shard_file_name(name):
            raise InvalidError(f"shard {name!r} is not named data-<writeid>-<nnnnn>.ocfd, "
                               "as the shard files of a part must be", path=path,
                               requirement="R-PART-001")


def check_identity(path: Location, identity: index_pb2.Part,
                   expected: tuple[str, int, int]) -> None:
    """The part says it is the part its name says, of the save and count asked for."""
    save_id, number, count = expected
    if (identity.save_id, identity.number, identity.count) != expected:
        raise InvalidError(f"file of part {number} of {count} of save {save_id} says it is part "
                           f"{identity.number} of {identity.count} of save "
                           f"{identity.save_id!r}", path=path, requirement="R-PART-004")


# -- combining -------------------------------------------------------------------------------


@dataclass
class _Tensor:
    """One key of the merged checkpoint and the parts that hold it."""

    key: str
    holders: list[tuple[int, int]]  # (place in the list of parts, row in that part's table)
    sliced: bool


class _Combined:
    """The parts after the checks across them that come before M5 (M3, M4), and what
    the merged index is built from.

    The slices of M5 are checked only when the merged index fails a check: M6 decodes
    the merged index as a reader does, and a reader's check of its boxes
    [R-SLICE-002] [R-SLICE-004] passes exactly when M5 passes for every key, since the
    merged index holds every part's boxes unchanged and the same slice counts; and it
    passes only if each part's boxes are disjoint, the one check of M2 that the parts
    are first read without. So a merge that succeeds checks the boxes once, over all
    tensors together, and one that fails reports M2's and M5's verdicts first, as the
    order of checks requires.
    """

    def __init__(self, parts: list[_Part], directory: Location) -> None:
        self.parts, self.directory = parts, directory
        self.index = index_pb2.Index()
        self.bases = _shards(parts, self.index, directory)  # M3
        self.tables = [part_tables(part.message) for part in parts]
        self.tensors = _tensors(parts, self.tables)  # M4

    def check_slices(self) -> None:
        """M5: raise the failure of the first key whose slices do not tile its shape."""
        for tensor in self.tensors:
            if tensor.sliced:
                _check_slices(tensor, self.parts, self.tables, self.directory)

    def merged_index(self) -> index_pb2.Index:
        """The index of the merged checkpoint [R-PART-006]."""
        index = self.index
        index.header.writer = f"ocf-python {__version__}"
        _fill_tables(index, self.tensors, self.tables, self.bases)
        first = self.parts[0].message
        for key in sorted(first.metadata):
            index.metadata[key].CopyFrom(first.metadata[key])
        if first.HasField("object_graph"):
            index.object_graph.CopyFrom(first.object_graph)
        return index


def _shards(parts: list[_Part], index: index_pb2.Index, directory: Location
            ) -> list[int]:
    """List every part's shards in part order; the first shard number of each part."""
    owner: dict[str, int] = {}
    bases = []
    for part in parts:
        bases.append(len(index.shards))
        for shard in part.model.shards:
            if shard.path in owner:
                raise InvalidError(f"shard {shard.path!r} is listed by parts "
                                   f"{owner[shard.path]} and {part.number}", path=directory,
                                   requirement="R-PART-005")
            owner[shard.path] = part.number
            index.shards.add(path=shard.path, length=shard.length)
    return bases


def _tensors(parts: list[_Part], tables: list[PartTables]) -> list[_Tensor]:
    """Every key in order of first appearance, with the parts that hold it; checked key
    by key in that order (M4 of spec/parts.md)."""
    holders: dict[str, list[tuple[int, int]]] = {}
    for n, table in enumerate(tables):
        for row, key in enumerate(table.keys):
            holders.setdefault(key, []).append((n, row))
    tensors = []
    for key, held in holders.items():
        n0, r0 = held[0]
        first = tables[n0]
        if len(held) > 1 and any(tables[n].slice_counts[r] == 0 for n, r in held):
            raise InvalidError(f"written by parts {parts[n0].number} and "
                               f"{parts[held[1][0]].number}, at least once whole: a tensor "
                               "stored whole belongs to one part only",
                               path=parts[held[1][0]].path, key=key, requirement="R-PART-005")
        for n, row in held:
            table = tables[n]
            if (table.dtypes[row], table.shapes[row]) != (first.dtypes[r0], first.shapes[r0]):
                raise InvalidError(f"part {parts[n].number} has dtype "
                                   f"{dtypes.BY_CODE[table.dtypes[row]].name} and global shape "
                                   f"{list(table.shapes[row])}, part {parts[n0].number} "
                                   f"{dtypes.BY_CODE[first.dtypes[r0]].name} and "
                                   f"{list(first.shapes[r0])}", path=parts[n].path, key=key,
                                   requirement="R-PART-005")
        tensors.append(_Tensor(key, held, first.slice_counts[r0] > 0))
    return tensors


def _check_slices(tensor: _Tensor, parts: list[_Part], tables: list[PartTables],
                  directory: Location) -> None:
    """The slices of all parts are few enough, disjoint, and tile the shape (M5): one
    check over the boxes of every part at once."""
    numbers = sorted({parts[n].number for n, _ in tensor.holders})
    n0, r0 = tensor.holders[0]
    shape = tables[n0].shapes[r0]
    count = sum(tables[n].slice_counts[row] for n, row in tensor.holders)
    limit = max_slices(len(shape))
    if count > limit:
        raise LimitExceededError(f"parts {numbers} hold {count} slices, above the "
                                 f"limit of {limit}", path=directory,
                                 key=tensor.key, requirement="R-SLICE-004")
    boxes = [tables[n].boxes(row) for n, row in tensor.holders]
    lo = np.concatenate([start for start, _ in boxes])
    extent = np.concatenate([extent for _, extent in boxes])
    # Every box lies inside the shape (M2): disjoint boxes tile it when their volumes
    # add up to its volume, and boxes that add up to it but do not tile it overlap.
    covered = sum(extent.prod(axis=1).tolist())
    if covered == prod(shape) and arrays_tile(lo, extent, shape):
        return
    if covered == prod(shape) or not arrays_disjoint(lo, extent):
        raise InvalidError(f"slices written by parts {numbers} overlap", path=directory,
                           key=tensor.key, requirement="R-PART-005")
    raise InvalidError(f"slices written by parts {numbers} cover {covered} of the "
                       f"{prod(shape)} elements of global shape {list(shape)}: a part is "
                       "missing or incomplete", path=directory, key=tensor.key,
                       requirement="R-PART-005")


def _fill_tables(index: index_pb2.Index, tensors: list[_Tensor], tables: list[PartTables],
                 bases: list[int]) -> None:
    """Each tensor as the merged index holds it: the parts' blocks in merged order (the
    blocks of each holder, parts in order), shard numbers rebased [R-PART-006]."""
    block_bases = np.cumsum([0] + [len(t.blocks.offsets) for t in tables]).tolist()
    keys: list[str] = []
    codes: list[int] = []
    ranks: list[int] = []
    dims: list[int] = []
    counts: list[int] = []
    firsts: list[int] = []
    spans: list[int] = []
    for tensor in tensors:
        n0, r0 = tensor.holders[0]
        shape = tables[n0].shapes[r0]
        keys.append(tensor.key)
        codes.append(tables[n0].dtypes[r0])
        ranks.append(len(shape))
        dims.extend(shape)
        counts.append(sum(tables[n].slice_counts[row] for n, row in tensor.holders))
        for n, row in tensor.holders:
            firsts.append(block_bases[n] + tables[n].first_block[row])
            spans.append(max(1, tables[n].slice_counts[row]))
    t = index.tensors
    for field, values, name in ((t.keys, keys, "tensor keys"), (t.dtypes, codes, "tensor dtypes"),
                                (t.ranks, ranks, "tensor ranks"), (t.dims, dims, "tensor dims"),
                                (t.slice_counts, counts, "slice counts")):
        extend_fully(field, values, name)
    fill_blocks(index.blocks, joined(tables, bases), block_ranges(firsts, spans))


def _checked_merged_index(data: bytes, directory: Location) -> Index:
    """M6: the merged index, checked as any reader will check it."""
    path = directory / INDEX_FILE_NAME
    model = decode_index(data, str(path), PREAMBLE_SIZE)
    if model.graph_message is not None:
        decode_graph(model.graph_message, model.tensors, str(path), model.odd_metadata_nodes())
    return model


def _check_shard_files(merged: Index, directory: Location) -> None:
    """M7: step 16 of the reader's order for each shard of the merged index, as a reader
    opens them (several at once on an object store; errors reported in shard order)."""
    storage = backend_of(directory)
    each(storage, lambda shard: storage.open_shard(directory / shard.path, shard.length).close(),
         merged.shards)


# -- publishing ------------------------------------------------------------------------------


def _publish(directory: Location, data: bytes) -> None:
    """Steps 5, 6 and 8 of [R-COMMIT-002]: the index file replaces any other
    atomically. The shards and their names are durable since their parts were: every
    part writer fsynced them, then the directory, before its part was written
    [R-PART-002] [R-PART-009], so step 7's fsync of the directory is left out
    [R-PART-006]. On an object store, one PUT of the index object under its name commits."""
    footer = Footer(PREAMBLE_SIZE, len(data), crc32c(data)).pack()
    backend_of(directory).write_small(directory / INDEX_FILE_NAME, PREAMBLE + data + footer)


def remove_leftovers(directory: Location, referenced: set[str]) -> None:
    """After a commit, delete what the committed index does not use [R-PART-007]:
    part indexes, shards of earlier or crashed writes, temporary files; never a
    name in ``referenced`` (the committed index's shards), whatever it looks like."""
    storage = backend_of(directory)
    storage.remove_names(directory, leftover_names(storage.list_names(directory), referenced,
                                                   also=is_part_file_name))
