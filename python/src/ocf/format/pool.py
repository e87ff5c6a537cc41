"""The pool of a managed root (spec/pool.md, format 1.2).

A checkpoint with the required feature ``pool`` may keep blocks in pool
objects: shard files in the directory ``ocf-pool`` of its managed root,
shared by several checkpoints of that root and identified by the SHA-256
of their bytes [R-POOL-001] to [R-POOL-004]. This module says where a
checkpoint's pool is and how an object's identity is computed; writing,
reusing and collecting pool objects is ocf.objects.incremental's.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import IntegrityError
from ocf.format.storage.backend import Input
from ocf.format.storage.location import Location

# The required feature of a checkpoint with pool shards [R-POOL-001].
POOL_FEATURE = "pool"
# The pool directory, directly in the managed root [R-POOL-003].
POOL_DIRECTORY = "ocf-pool"
# The names a writer gives its new pool objects [R-COMMIT-007]; a collection deletes
# no other name.
POOL_OBJECT_NAME = re.compile(r"pool-[0-9a-f]{16}-[0-9]{5}\.ocfd")
# Bytes of a pool_sha256 [R-POOL-002].
DIGEST_SIZE = 32
# Bytes hashed per read when an object's identity is checked: memory stays bounded.
_HASH_PIECE = 16 << 20


def pool_object_name(write_id: str, number: int) -> str:
    """The name of pool object ``number`` of the write ``write_id`` [R-COMMIT-007]."""
    return f"pool-{write_id}-{number:05d}.ocfd"


def managed_root(index_file: Location) -> Location:
    """The managed root of the checkpoint whose index file is ``index_file``: the
    directory of a single file, the parent of a checkpoint directory [R-POOL-003].
    Symbolic links in the path were followed to find the index file, so a local
    root is the real directory the index file lies in (or its parent)."""
    if isinstance(index_file, Path):
        index_file = Path(os.path.realpath(index_file))
    holder = index_file.parent
    return holder.parent if index_file.name == INDEX_FILE_NAME else holder


def pool_directory(index_file: Location) -> Location:
    """Where the pool shards of the checkpoint ``index_file`` are."""
    return managed_root(index_file) / POOL_DIRECTORY


def sha256_of(shard: Input) -> bytes:
    """The SHA-256 of the bytes [0, size) of ``shard``, read a piece at a time."""
    digest = hashlib.sha256()
    offset = 0
    while offset < shard.size:
        piece = shard.pread(min(_HASH_PIECE, shard.size - offset), offset)
        digest.update(piece)
        offset += len(piece)
    return digest.digest()


def check_identity(shard: Input, expected: bytes) -> None:
    """IntegrityError unless ``shard`` is the pool object the index recorded [R-POOL-004]."""
    if sha256_of(shard) != expected:
        raise IntegrityError("pool object's SHA-256 differs from the pool_sha256 the index "
                             "records: it is not the object the checkpoint referenced",
                             path=shard.path, requirement="R-POOL-004")
