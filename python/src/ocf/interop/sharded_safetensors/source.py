"""A Hugging Face sharded safetensors model as one :class:`ocf.format.source.Source`.

Hugging Face saves a large model as several safetensors files (shards) and
an index, ``model.safetensors.index.json``::

    {"metadata": {"total_size": 123456},
     "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", ...}}

The index is hostile like every file: its size is bounded, its JSON must
not name a key twice, and the weight map is checked before any tensor is
read. Every shard it names must be a regular file inside the index's
directory (no absolute path, no ``..``, no symbolic link leading out), and
every tensor must be in the shard the map names and in no other: a key the
map names that its shard lacks, or a shard holding a tensor the map gives
to another shard (or to none), is refused. Each shard is read as a
safetensors file (ocf.interop.safetensors), so its header gets the same
checks. Each problem is an OCF error naming the file and the tensor.

The metadata, as OCF holds it: ``safetensors.index.metadata``, the index's
``metadata`` object (``total_size``, ...); when every shard has the same
``__metadata__`` map (Hugging Face writes ``{"format": "pt"}`` in each),
``safetensors.metadata``, that map, as for one safetensors file (so
converting to one file keeps it); else ``safetensors.shards``, each shard's
map by shard name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np

from ocf.format.checksum import crc32c
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, NotFoundError
from ocf.format.limits import MAX_SHARDS, MAX_TENSORS
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import Source, TensorSummary
from ocf.interop.output import open_source
from ocf.interop.safetensors.convert import METADATA_KEY
from ocf.interop.safetensors.source import SafetensorsSource

INDEX_NAME = "model.safetensors.index.json"
INDEX_SUFFIX = ".safetensors.index.json"
INDEX_METADATA_KEY = "safetensors.index.metadata"
SHARDS_METADATA_KEY = "safetensors.shards"
MAX_INDEX_BYTES = 100_000_000  # as the safetensors package bounds a header


def index_path(path: str) -> str | None:
    """The index file of the sharded model at ``path`` (its directory, or the index
    itself); None when there is none."""
    if os.path.isdir(path):
        found = os.path.join(path, INDEX_NAME)
        return found if os.path.isfile(found) else None
    return path if path.endswith(INDEX_SUFFIX) and os.path.isfile(path) else None


def read_index(path: str) -> tuple[dict[str, str], dict[str, MetadataValue], bytes]:
    """The weight map, the metadata and the raw bytes of the index file ``path``."""
    with open_source(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_INDEX_BYTES:
            raise LimitExceededError(f"the index is {size} bytes; the most read is "
                                     f"{MAX_INDEX_BYTES}", path=path)
        raw = f.read(MAX_INDEX_BYTES + 1)
    document = _parse(raw, path)
    weight_map, metadata = document.get("weight_map"), document.get("metadata", {})
    if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()):
        raise MalformedError("the index's weight_map must be an object mapping tensor names "
                             "to shard file names", path=path)
    if not isinstance(metadata, dict):
        raise MalformedError("the index's metadata must be an object", path=path)
    if len(weight_map) > MAX_TENSORS:
        raise LimitExceededError(f"{len(weight_map)} tensors exceed the limit of "
                                 f"{MAX_TENSORS}", path=path, requirement="R-LIMIT-001")
    return weight_map, metadata, raw


def _parse(raw: bytes, path: str) -> dict[str, Any]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise MalformedError(f"the index names {key!r} twice (a key in two shards?)",
                                     path=path, key=key)
            result[key] = value
        return result

    def no_constants(name: str) -> NoReturn:
        raise MalformedError(f"the index holds the non-JSON number {name}", path=path)

    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=unique,
                              parse_constant=no_constants)
    except UnicodeDecodeError as exc:
        raise MalformedError(f"the index is not UTF-8: {exc.reason}", path=path) from None
    except RecursionError:
        raise MalformedError("the index's JSON nests too deeply", path=path) from None
    except ValueError as exc:
        if isinstance(exc, MalformedError):
            raise
        raise MalformedError(f"the index is not valid JSON: {exc}", path=path) from None
    if not isinstance(document, dict):
        raise MalformedError("the index is not a JSON object", path=path)
    return document


def shard_file(directory: str, name: str, index: str) -> str:
    """The path of shard ``name``, which must be a regular file inside ``directory``."""
    parts = name.replace("\\", "/").split("/")
    if not name or os.path.isabs(name) or ".." in parts or "\0" in name:
        raise InvalidError(f"shard name {name!r} leads outside the model's directory",
                           path=index)
    found = os.path.join(directory, name)
    real_directory = os.path.realpath(directory)
    if os.path.commonpath([real_directory, os.path.realpath(found)]) != real_directory:
        raise InvalidError(f"shard {name!r} is a symbolic link leading outside the model's "
                           "directory", path=index)
    if not os.path.isfile(found):
        raise NotFoundError(f"shard {name!r}, named in the weight map, is not a file in "
                            "the model's directory", path=index)
    return found


class ShardedSafetensorsSource(Source[TensorSummary]):
    """A sharded safetensors model (an index and its shards) as one Source."""

    format_name = "sharded-safetensors"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        del verify  # safetensors has no checksums: the structure is checked on opening
        text = os.fspath(path)
        index = index_path(text)
        if index is None:
            raise NotFoundError(f"no {INDEX_NAME} here", path=text)
        self.path: str = text
        self.index = index
        self.weight_map, self._index_metadata, raw = read_index(index)
        self._identity = (len(raw), crc32c(raw))
        self.shards: dict[str, SafetensorsSource] = {}
        try:
            self._open_shards(os.path.dirname(index))
        except BaseException:
            self.close()
            raise

    def _open_shards(self, directory: str) -> None:
        names = list(dict.fromkeys(self.weight_map.values()))
        if len(names) > MAX_SHARDS:
            raise LimitExceededError(f"{len(names)} shards exceed the limit of {MAX_SHARDS}",
                                     path=self.index)
        for name in names:
            self.shards[name] = SafetensorsSource(shard_file(directory, name, self.index))
        for key, name in self.weight_map.items():
            if key not in self.shards[name]:
                raise InvalidError(f"the weight map puts this tensor in shard {name!r}, "
                                   "which does not hold it", path=self.index, key=key)
        for name, shard in self.shards.items():
            for key in shard:
                if self.weight_map.get(key) != name:
                    owner = self.weight_map.get(key)
                    where = "no shard" if owner is None else f"shard {owner!r}"
                    raise InvalidError(f"shard {name!r} holds this tensor, which the weight "
                                       f"map gives to {where}", path=self.index, key=key)

    def _shard(self, key: str) -> SafetensorsSource:
        name = self.weight_map.get(key)
        if name is None:
            raise NotFoundError("no tensor with this key", path=self.path, key=key)
        return self.shards[name]

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        found: dict[str, MetadataValue] = {INDEX_METADATA_KEY: dict(self._index_metadata)}
        maps = {name: shard.header.metadata for name, shard in self.shards.items()}
        present: dict[str, MetadataValue] = {name: dict(m) for name, m in maps.items()
                                             if m is not None}
        if len(present) == len(maps) and len(
                {json.dumps(m, sort_keys=True) for m in present.values()}) == 1:
            found[METADATA_KEY] = next(iter(present.values()))
        elif present:
            found[SHARDS_METADATA_KEY] = present
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.weight_map)

    def __len__(self) -> int:
        return len(self.weight_map)

    def __contains__(self, key: object) -> bool:
        return key in self.weight_map

    def __getitem__(self, key: str) -> TensorSummary:
        return self._shard(key)[key]

    def read_tensor(self, key: str) -> np.ndarray:
        return self._shard(key).read_tensor(key)

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        return self._shard(key).read_piece(key, piece)

    @property
    def identity(self) -> tuple[int, int]:
        return self._identity

    def close(self) -> None:
        for shard in self.shards.values():
            shard.close()
