"""Deliberately broken variants of the reference adapter, to test the suite.

A conformance suite is only as good as the bugs it catches. Each entry of
:data:`BUGS` breaks the reference implementation in one way, by patching a
function or constant of ``ocf`` in the adapter's own process; the reference
adapter applies the one named by the environment variable
``OCF_CONFORMANCE_BUG`` before it serves requests. The suite's own tests
(python/tests/conformance/test_conformance_suite.py) run the harness once per bug and
check that it finds the implementation NOT CONFORMANT, and that the cases
written to catch the bug (:data:`CAUGHT_BY`) fail.

Each bug imitates a mistake a real implementation could make; its
docstring says which, and which requirement it breaks. A bug patches the
name that its caller looks up at call time: a module global of the module
that uses it (``ocf.format.reader.check_bool``, not ``ocf.format.raw.check_bool``, since
the reader imported the name), or a method of a class. Run one by hand::

    OCF_CONFORMANCE_BUG=accept_overlaps ocf conformance
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from types import ModuleType

import numpy as np

import ocf.distributed.parts.merging
import ocf.format.container
import ocf.format.errors
import ocf.format.index.decoding
import ocf.format.index.tables
import ocf.format.metadata
import ocf.format.object_graph
import ocf.format.reader
import ocf.format.reading.blocks
import ocf.format.storage.local
import ocf.format.writer
from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.index.model import Block, TensorInfo
from ocf.format.object_graph import Node, ObjectGraph, Origin
from ocf.v1 import object_graph_pb2, tensor_pb2

Bug = Callable[[], None]

# Each bug by name: the function that injects it into this process.
BUGS: dict[str, Bug] = {}
# Each bug by name: case ids or fnmatch patterns of cases that must catch it.
# Every case matching each pattern fails when the bug is injected (the
# suite's tests check this), so a case that stops catching a bug it was
# written for is noticed.
CAUGHT_BY: dict[str, tuple[str, ...]] = {}


def bug(*caught_by: str) -> Callable[[Bug], Bug]:
    """Register the decorated function in :data:`BUGS` under its name, caught by
    the cases ``caught_by``."""
    if not caught_by:
        raise ValueError("a bug needs at least one case that catches it")

    def register(function: Bug) -> Bug:
        BUGS[function.__name__] = function
        CAUGHT_BY[function.__name__] = caught_by
        return function

    return register


def inject_bug(name: str) -> None:
    """Apply the bug ``name`` to this process; exit for an unknown name."""
    injected = BUGS.get(name)
    if injected is None:
        known = ", ".join(sorted(BUGS)) or "none"
        raise SystemExit(f"OCF_CONFORMANCE_BUG={name!r} names no bug; known: {known}")
    injected()


def _patch(module: ModuleType, name: str, value: object) -> None:
    """Replace the global ``name`` of ``module``, which must exist with a value of the
    same kind, so that a renamed internal breaks the bug loudly rather than silently."""
    current = getattr(module, name)  # AttributeError once the name is gone
    if callable(current) != callable(value) or (
            not callable(value) and not isinstance(value, type(current))):
        raise TypeError(f"{module.__name__}.{name} is {current!r}, not like {value!r}")
    setattr(module, name, value)


# -- reading bytes -------------------------------------------------------------

@bug("read.dtype.float32", "read.codec.zstd")
def off_by_one_offset() -> None:
    """Blocks are read one byte after their recorded offset.

    Imitates an off-by-one in offset arithmetic (a 1-based position, or a
    length prefix counted twice) [R-DATA-002]: every tensor comes back
    shifted by one byte, or the last block runs past its region.
    """
    original = ocf.format.index.tables.Tables._block

    def shifted(self: ocf.format.index.tables.Tables, c: ocf.format.index.tables._ColumnLists,
                j: int) -> Block:
        block = original(self, c, j)
        return dataclasses.replace(block, offset=block.offset + 1,
                                   chunk_starts=[s + 1 for s in block.chunk_starts])

    ocf.format.index.tables.Tables._block = shifted  # type: ignore[method-assign]


@bug("reject.crc.data-byte-changed", "reject.crc.chunk-crc-changed")
def wrong_checksum() -> None:
    """Chunk checksums are computed but a mismatch is never reported.

    Imitates a reader whose CRC verification is stubbed out or whose
    comparison is inverted so that it accepts any stored value
    [R-CRC-001]: corrupted tensor bytes are returned as if they were good.
    """

    def accept(self: ocf.format.reading.blocks.BlockReader, info: TensorInfo, block: Block,
               chunk: int, crc: int) -> None:
        return None

    ocf.format.reading.blocks.BlockReader._check_crc = accept  # type: ignore[method-assign]


@bug("read.dtype.*", "read.codec.*")
def crc32_not_crc32c() -> None:
    """Checksums use CRC-32 (zlib's polynomial) instead of CRC-32C.

    Imitates the most common checksum mistake, picking the CRC function
    that the standard library happens to offer [R-CRC-001]: every index
    and chunk checksum of a valid file fails to match.
    """

    def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
        return zlib.crc32(data, value)

    _patch(ocf.format.reading.blocks, "crc32c", crc32)  # chunk checksums
    _patch(ocf.format.container, "crc32c", crc32)  # the index checksum (read_index_bytes)


@bug("reject.file.index-crc-mismatch", "reject.file.index-byte-changed")
def ignore_index_checksum() -> None:
    """The index checksum of the footer is not verified.

    Imitates a reader that checks chunk CRCs but trusts the index bytes
    [R-FILE-006]: a corrupted index is parsed (or refused for the wrong
    reason) instead of being reported as INTEGRITY. The patched footer
    parser records the CRC of whatever index bytes the file holds.
    """
    original = ocf.format.container.parse_footer

    def trusting(tail: bytes, file_size: int, path: str | os.PathLike[str]
                 ) -> ocf.format.container.Footer:
        footer = original(tail, file_size, path)
        with open(path, "rb") as file:
            file.seek(footer.index_offset)
            data = file.read(footer.index_length)
        return dataclasses.replace(footer, index_crc32c=crc32c(data))

    _patch(ocf.format.container, "parse_footer", trusting)  # read_index_bytes looks it up


# -- the container -------------------------------------------------------------

@bug("reject.file.preamble-magic", "reject.file.preamble-high-bit-stripped")
def accept_bad_magic() -> None:
    """The preamble magic at byte 0 is not checked.

    Imitates a reader that seeks straight to the footer and never looks at
    the start of the file [R-FILE-002]: a file that is not OCF, or whose
    first bytes were damaged, is read when its footer happens to parse.
    """

    def unchecked(head: bytes, path: str | os.PathLike[str]) -> None:
        return None

    _patch(ocf.format.container, "check_preamble", unchecked)  # the index file's, not shards'


@bug("reject.version.major-2", "reject.version.major-0")
def ignore_major_version() -> None:
    """The footer's major version is not compared with the one implemented.

    Imitates a reader that parses the version fields but never checks them
    [R-VER-001]: a file of format 2.x is read as if it were 1.x instead of
    being refused as UNSUPPORTED_VERSION.
    """
    original = ocf.format.container.parse_footer

    def any_major(tail: bytes, file_size: int, path: str | os.PathLike[str]
                  ) -> ocf.format.container.Footer:
        if len(tail) == ocf.format.container.FOOTER_SIZE:
            patched = bytearray(tail)
            struct.pack_into("<H", patched, 20, ocf.format.container.FORMAT_MAJOR)
            tail = bytes(patched)
        return original(tail, file_size, path)

    _patch(ocf.format.container, "parse_footer", any_major)


# -- the index -----------------------------------------------------------------

class _EveryFeature(frozenset[str]):
    """A set that claims to contain every feature name."""

    def __contains__(self, item: object) -> bool:
        return True


@bug("reject.feature.experimental-name", "reject.feature.several")
def ignore_required_features() -> None:
    """Unknown names in ``required_features`` are accepted.

    Imitates a reader that ignores the header's feature list, as a reader
    written before features existed would [R-FEAT-001]: a checkpoint that
    needs a capability the reader lacks is misread instead of refused with
    UNKNOWN_REQUIRED_FEATURE.
    """
    _patch(ocf.format.index.decoding, "SUPPORTED_FEATURES", _EveryFeature())


@bug("reject.shard.path-dot-dot-slash", "reject.shard.path-absolute")
def lax_shard_names() -> None:
    """Shard paths are not restricted to plain file names.

    Imitates a reader that joins the stored shard path to the checkpoint
    directory without validating it [R-SHARD-001]: ``../x``, ``/etc/x`` or
    ``a/b`` escape the checkpoint (a path traversal) instead of being
    refused as INVALID.
    """
    _patch(ocf.format.index.decoding, "SHARD_NAME", re.compile(r".+", re.DOTALL))


@bug("reject.graph.deep-chain-then-unreachable")
def recursive_graph_walk() -> None:
    """The object graph is walked by a recursive depth-first search.

    Imitates a reader whose walks recurse [R-LIMIT-003]: a valid chain of a
    hundred thousand nodes, a few hundred kilobytes of index, exhausts the
    call stack (here Python's recursion limit; in C or C++ the thread's
    stack, and the process dies) instead of being checked.
    """
    original = ocf.format.object_graph.origins

    def recursive(nodes: list[Node]) -> list[Origin | None]:
        seen = {0}

        def visit(u: int) -> None:
            for v in nodes[u].children.values():
                if v not in seen:
                    seen.add(v)
                    visit(v)

        visit(0)
        return original(nodes)

    _patch(ocf.format.object_graph, "origins", recursive)


@bug("reject.shard.symlink-*")
def follow_shard_links() -> None:
    """A shard name that is a symbolic link is followed.

    Imitates a reader that opens shard files with a plain open() [R-SHARD-002]:
    a link planted under a shard's name makes it read a file outside the
    checkpoint's directory (a valid shard of another checkpoint, or any file
    the reader may read) instead of refusing it as NOT_FOUND.
    """
    original = ocf.format.storage.local._open_nonblocking

    def following(path: str | os.PathLike[str], what: str, requirement: str | None,
                  key: str | None = None, *, follow: bool = True) -> int:
        return original(path, what, requirement, key, follow=True)

    _patch(ocf.format.storage.local, "_open_nonblocking", following)


@bug("merge.wire.part-index-symlink")
def merge_follows_part_links() -> None:
    """A part index that is a symbolic link is followed.

    Imitates a merger that opens part indexes as a reader opens an index file
    [R-PART-004]: a link under a part file name, to an index anywhere, becomes a
    part of the save instead of a missing part (NOT_FOUND).
    """
    local = ocf.format.storage.local.LocalBackend
    original = local.open_index

    def following(self: ocf.format.storage.local.LocalBackend, path: object, *,
                  follow: bool = True) -> object:
        return original(self, path, follow=True)  # type: ignore[arg-type]

    local.open_index = following  # type: ignore[method-assign, assignment]


@bug("read.path.index-symlink-shards-beside-link")
def shards_beside_link_target() -> None:
    """Shards are looked up beside the target of a linked index, not beside the link.

    Imitates a reader that resolves the path it is given (``realpath``) before it
    takes its directory [R-FILE-008], [R-SHARD-001]: two readers then disagree on
    which files a checkpoint has.
    """
    local = ocf.format.storage.local.LocalBackend
    original = local.resolve_checkpoint

    def resolving(self: ocf.format.storage.local.LocalBackend, where: object) -> object:
        return original(self, where).resolve()  # type: ignore[arg-type]

    local.resolve_checkpoint = resolving  # type: ignore[method-assign, assignment]


@bug("reject.data.overlap-*")
def accept_overlaps() -> None:
    """Blocks whose stored bytes overlap are not detected.

    Imitates a reader that checks each block against its shard's bounds
    but never the blocks against each other [R-DATA-003]: two tensors
    sharing bytes are read instead of refused as INVALID.
    """

    def unchecked(self: ocf.format.index.tables.Tables) -> None:
        return None

    ocf.format.index.tables.Tables._check_overlaps = unchecked  # type: ignore[method-assign]


@bug("reject.meta.depth-33-*")
def no_limit_checks() -> None:
    """Metadata nesting depth is not limited.

    Imitates a reader that decodes metadata recursively without counting
    the depth [R-META-002]: metadata nested deeper than 32 levels is
    accepted (and a deep enough file exhausts the stack) instead of being
    refused as LIMIT_EXCEEDED.
    """
    _patch(ocf.format.metadata, "MAX_METADATA_DEPTH", 1 << 30)


@bug("reject.tensor.rank-33")
def no_rank_limit() -> None:
    """The rank limit of 32 dimensions is not checked.

    Imitates a reader that forgot one line of the limits table
    [R-TENSOR-003]: a tensor of rank 33 or more is read instead of refused
    as LIMIT_EXCEEDED.
    """
    _patch(ocf.format.index.tables, "MAX_RANK", 1 << 30)


# -- tensor values -------------------------------------------------------------

@bug("read.dtype.bfloat16")
def misread_dtype() -> None:
    """bfloat16 tensors are read as float16.

    Imitates a dtype table with two 16-bit float codes confused
    [R-DTYPE-001]: both have 2-byte elements, so nothing fails, but every
    value is wrong and the tensor reports the wrong dtype.
    """
    dtypes.BY_CODE[tensor_pb2.DTYPE_BFLOAT16] = dtypes.BY_NAME["float16"]


@bug("reject.dtype.bool-*")
def skip_bool_check() -> None:
    """Bool bytes other than 0x00 and 0x01 are accepted.

    Imitates a reader that reinterprets bool bytes in place (as NumPy and
    C++ do) without checking them [R-DTYPE-002]: a byte 0x02 becomes a bool
    whose behaviour is undefined instead of being refused as INVALID.
    """

    def unchecked(array: np.ndarray) -> None:
        return None

    _patch(ocf.format.reader, "check_bool", unchecked)


# -- the object graph ----------------------------------------------------------

@bug("read.graph.slot-variables")
def drop_slot_variables() -> None:
    """The reader loses the slot variables of the object graph.

    Imitates a reader that follows child edges and attributes but never
    reads ``slot_variables`` [R-GRAPH-006], as an early loader that only
    restored model weights would: optimizer slots (Adam's m and v) are
    silently not restored. The slot nodes keep their paths, so nothing
    fails loudly.
    """
    original = ocf.format.object_graph.decode_graph

    def without_slots(message: object_graph_pb2.ObjectGraph, tensor_keys: Mapping[str, object],
                      path: str) -> ObjectGraph:
        graph = original(message, tensor_keys, path)
        for node in graph.nodes:
            node.slots.clear()
        return graph

    _patch(ocf.format.reader, "decode_graph", without_slots)


# -- merging -------------------------------------------------------------------

@bug("merge.part-of-another-save", "merge.part-number-differs")
def merge_trusts_part_names() -> None:
    """The merge takes a part file's name for its identity.

    Imitates a merger that never compares ``Index.part`` with the save, part
    number and count it was asked for [R-PART-004]: a part file of another
    save, or copied under another part's name, is merged as if it belonged.
    """

    def trust(path: object, identity: object, expected: object) -> None:
        return None

    _patch(ocf.distributed.parts.merging, "check_identity", trust)


@bug("merge.shard-named-like-a-part-index", "merge.shard-not-named-as-a-shard")
def merge_accepts_any_shard_name() -> None:
    """The merge takes any non-empty shard path of a part.

    Imitates a merger that checks only for the empty path [R-PART-001]: a part
    listing another part's index (or any file) as a shard is merged, and the
    file becomes a shard of the checkpoint that the cleanup may then delete.
    """

    def only_empty(path: object, names: list[str]) -> None:
        if "" in names:
            raise ocf.format.errors.InvalidError("shard with the empty path",
                                          requirement="R-PART-001")

    _patch(ocf.distributed.parts.merging, "check_part_shards", only_empty)


# -- writing -------------------------------------------------------------------

@bug("write.every-dtype")
def writer_unaligned_blocks() -> None:
    """The writer does not pad blocks to 64-byte offsets.

    Imitates a writer that appends tensor bytes back to back [R-DATA-001]:
    its own tolerant reader may read them, but a conforming reader refuses
    any checkpoint it writes where a block follows a tensor whose size is
    not a multiple of 64.
    """

    def unpadded(self: ocf.format.storage.local.LocalOutput) -> None:
        return None

    ocf.format.storage.local.LocalOutput.align = unpadded  # type: ignore[method-assign]
