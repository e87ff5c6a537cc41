"""Publishing a checkpoint atomically, one committer per layout (spec/commit.md).

A committer owns the files of one write: it hands the block emitter the
file each block goes to, and on commit writes the index and footer and
publishes them [R-COMMIT-001] [R-COMMIT-002]; on abort it discards them,
leaving the target as it was. A crash before the commit leaves nothing at
the target but what was there before.
"""

from __future__ import annotations

import re
import sys
from abc import ABC, abstractmethod

from ocf.format.checksum import crc32c
from ocf.format.commit import leftover_names, shard_file_name, temp_names_of
from ocf.format.container import (
    FOOTER_SIZE,
    INDEX_FILE_NAME,
    PREAMBLE,
    PREAMBLE_SIZE,
    Footer,
    padding,
)
from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.index import canonical
from ocf.format.limits import MAX_INDEX_BYTES
from ocf.format.storage.backend import Backend, Layout, Output
from ocf.format.storage.location import Location
from ocf.v1 import index_pb2


class Committer(ABC):
    """The files of one write to ``target``, and what the layouts share."""

    #: The bytes a shard may reach before the next block goes to a new one.
    shard_limit: int = sys.maxsize

    def __init__(self, storage: Backend, target: Location, write_id: str) -> None:
        self.storage, self.target, self.write_id = storage, target, write_id
        self.created_directory = False
        self._outputs: list[Output] = []

    @property
    def shard(self) -> int:
        """The number, in the index, of the shard :meth:`output_for` returned last."""
        return len(self._outputs) - 1

    def output_for(self, size: int) -> Output:
        """The file that takes the next block, of ``size`` bytes."""
        return self._outputs[-1]

    @abstractmethod
    def close_shards(self) -> None:
        """Make the data written so far durable now, so that :meth:`commit` has only
        the index left to write; later blocks go to new shards."""

    @abstractmethod
    def commit(self, index: index_pb2.Index, name: str) -> None:
        """Write ``index`` and publish the checkpoint (its index under ``name``, in the
        directory layout)."""

    def seal(self, index: index_pb2.Index) -> bytes:
        """Make the shards durable and return the index file's bytes (preamble, index,
        footer) unpublished, for a merger that receives them in-band (spec/parts.md,
        [R-PART-009]); only the directory layout has shards apart from its index."""
        raise InvalidError("only the directory layout writes an index apart from its data",
                           path=self.target)

    def abort(self) -> None:
        """Drop everything written so far; the target is left as it was."""
        for output in self._outputs:
            output.discard()
        self._outputs.clear()
        if self.created_directory:
            self.storage.remove_created_directory(self.target)

    def _index_bytes(self, index: index_pb2.Index) -> bytes:
        index_bytes = canonical.serialize(index)
        if len(index_bytes) > MAX_INDEX_BYTES:
            raise LimitExceededError(f"index would be {len(index_bytes)} bytes, above the "
                                     f"limit of {MAX_INDEX_BYTES}", path=self.target,
                                     requirement="R-LIMIT-001")
        return index_bytes

    @staticmethod
    def _write_index(output: Output, index_bytes: bytes) -> None:
        """Append ``index_bytes`` and their footer to ``output`` and make them durable;
        for an object, completing the upload is the commit [R-COMMIT-005]."""
        output.flush()
        index_offset = output.position
        output.write(index_bytes)
        output.write(Footer(index_offset, len(index_bytes), crc32c(index_bytes)).pack())
        assert output.position == index_offset + len(index_bytes) + FOOTER_SIZE
        output.close_durably()


class FileCommitter(Committer):
    """The file layout: blocks, index and footer in one file, written under a temporary
    name and renamed over the target [R-COMMIT-001]."""

    def __init__(self, storage: Backend, target: Location, write_id: str) -> None:
        super().__init__(storage, target, write_id)
        self.created_directory = storage.prepare_target(target, "file")
        self._outputs.append(storage.create_output(target, write_id))

    def close_shards(self) -> None:
        """Nothing: the one file holds the index too, and becomes durable with it."""

    def commit(self, index: index_pb2.Index, name: str) -> None:
        index.shards.add(path="")  # the file itself holds the data
        index_bytes = self._index_bytes(index)
        output = self._outputs[0]
        self._write_index(output, index_bytes)
        output.publish()
        self._outputs.clear()
        remove_temporaries_of(self.storage, self.target)


def remove_temporaries_of(storage: Backend, target: Location) -> None:
    """Delete the temporary files of earlier, killed writes of the file ``target``,
    which [R-COMMIT-004] allows once a commit to it is done; without it each killed
    save would leave up to a whole checkpoint behind for good."""
    if not storage.temporary_names:
        return  # an upload uses no temporary name
    parent = target.parent
    ours = temp_names_of(re.escape(target.name))
    for name in storage.list_names(parent):
        if ours.fullmatch(name):
            storage.remove(parent / name)


class DirectoryCommitter(Committer):
    """The directory layout: data shards of at most ``max_shard_size`` bytes each (a
    block larger than that gets a shard of its own), then the index file."""

    def __init__(self, storage: Backend, target: Location, write_id: str,
                 max_shard_size: int) -> None:
        super().__init__(storage, target, write_id)
        self.shard_limit = max_shard_size
        self.created_directory = storage.prepare_target(target, "directory")
        self._closed = 0  # the shards before this one are durable and closed

    def output_for(self, size: int) -> Output:
        last = self._outputs[-1] if len(self._outputs) > self._closed else None
        if last is None or (last.position > PREAMBLE_SIZE and last.position
                            + padding(last.position) + size > self.shard_limit):
            # A shard goes straight to its final name, which no reader opens
            # before a committed index names it [R-COMMIT-002].
            name = shard_file_name(self.write_id, len(self._outputs))
            last = self.storage.create_output(self.target / name, None)
            self._outputs.append(last)
        return last

    def commit(self, index: index_pb2.Index, name: str) -> None:
        """Steps 4 to 8 of [R-COMMIT-002]: sync the shards, list them, and publish the
        index under ``name``; a part index (spec/parts.md) publishes under its own
        name, and deletes nothing [R-COMMIT-004]."""
        self.close_shards()
        for output in self._outputs:
            index.shards.add(path=output.path.name, length=output.position)
        index_bytes = self._index_bytes(index)
        # Local files go to a temporary name and are renamed; on an object store the
        # index is uploaded under its final name after every shard upload completed,
        # and completing it is the commit [R-COMMIT-005].
        index_file = self.storage.create_output(self.target / name, self.write_id)
        self._outputs.append(index_file)
        self._write_index(index_file, index_bytes)
        self.storage.sync_directory(self.target)  # the shards' names are durable
        index_file.publish()
        self._outputs.clear()
        if name == INDEX_FILE_NAME:
            self._remove_leftovers(index)

    def seal(self, index: index_pb2.Index) -> bytes:
        """Step 4 of [R-COMMIT-002] and the index bytes of steps 5 and 6, published by
        nobody here: the merger that receives them publishes the merged index. The
        directory is fsynced too, as a part writer does before it publishes its part
        [R-PART-002]: every writer makes its own shards' names durable, at the same
        time, which leaves the merger's fsync of the directory little to do."""
        self.close_shards()
        self.storage.sync_directory(self.target)
        for output in self._outputs:
            index.shards.add(path=output.path.name, length=output.position)
        index_bytes = self._index_bytes(index)
        # The shards are durable and are the checkpoint's once a merged index names
        # them: an abort from here on must not delete them.
        self._outputs.clear()
        return index_file_bytes(index_bytes)

    def close_shards(self) -> None:
        for output in self._outputs[self._closed:]:
            output.close_durably()
        self._closed = len(self._outputs)

    def _remove_leftovers(self, index: index_pb2.Index) -> None:
        """A previous version's shards, or a crashed write's [R-COMMIT-004]."""
        referenced = {s.path for s in index.shards}
        self.storage.remove_names(self.target, leftover_names(
            self.storage.list_names(self.target), referenced))


def index_file_bytes(index_bytes: bytes) -> bytes:
    """An index file holding only ``index_bytes``: preamble, index, footer."""
    footer = Footer(PREAMBLE_SIZE, len(index_bytes), crc32c(index_bytes)).pack()
    return PREAMBLE + index_bytes + footer


def committer_for(layout: Layout, storage: Backend, target: Location, write_id: str,
                  max_shard_size: int) -> Committer:
    """The committer of ``layout``, its target prepared."""
    if layout == "file":
        return FileCommitter(storage, target, write_id)
    if layout == "directory":
        return DirectoryCommitter(storage, target, write_id, max_shard_size)
    raise InvalidError(f"layout must be 'file' or 'directory', not {layout!r}")
