"""A DCP checkpoint's ``.metadata`` file, unpickled with an allowlist and checked.

``torch.distributed.checkpoint`` writes its index, ``.metadata``, as a pickle
of its own dataclasses, and its FileSystemReader loads it with an
unrestricted ``pickle.load``, which runs whatever code the file names. OCF
never does: :func:`read_index` unpickles it with a ``find_class`` that
hands out only DCP's metadata classes, ``torch.Size``, torch dtypes and
layouts, and stand-ins for paths; anything else the pickle names is refused.
Every value is then checked as hostile before the reader trusts it:

* each tensor's dtype is one OCF has, its shape within OCF's limits;
* its chunks lie inside its shape and tile it exactly (no overlap, no gap);
* each chunk's bytes are stored in a file of the directory (a plain name,
  no path), inside that file, uncompressed (no DCP stream transforms), and
  its storage item holds at least the chunk's bytes: a tensor never needs
  more memory than the files hold;
* each non-tensor value's storage item is inside its file as well.
"""

from __future__ import annotations

import io
import os
import pathlib
import pickle
import pickletools
from dataclasses import dataclass
from math import prod
from types import ModuleType
from typing import Any, TypeGuard

from ocf.format import dtypes
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError
from ocf.format.limits import MAX_ELEMENTS, MAX_INDEX_BYTES, MAX_RANK, MAX_TENSORS
from ocf.format.storage.local import open_regular
from ocf.interop.pytorch.tensors import ocf_dtype

METADATA_FILE = ".metadata"
_DCP = "torch.distributed.checkpoint."
_METADATA_CLASSES = ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata",
                     "ChunkStorageMetadata", "TensorProperties", "MetadataIndex",
                     "StorageMeta", "_MEM_FORMAT_ENCODING")
# Chunks of one tensor checked pairwise for overlap; a real checkpoint has one per rank.
MAX_CHUNKS = 4096


@dataclass(frozen=True)
class Item:
    """Where a storage item lies: a file of the directory, an offset and a length."""

    file: str
    offset: int
    length: int


@dataclass(frozen=True)
class Chunk:
    """One stored box of a tensor: its start, its extent, and where its bytes are."""

    start: tuple[int, ...]
    extent: tuple[int, ...]
    item: Item


@dataclass(frozen=True)
class Tensor:
    """A checked tensor entry: its torch dtype, OCF dtype, shape and chunks."""

    torch_dtype: Any
    dtype: dtypes.Dtype
    shape: tuple[int, ...]
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Index:
    """A checked ``.metadata``: tensors and non-tensor values by key, and what DCP
    holds that is not read (key -> what it is)."""

    tensors: dict[str, Tensor]
    values: dict[str, Item]
    unread: dict[str, str]


class _AllowlistUnpickler(pickle.Unpickler):
    """Builds DCP's metadata classes and nothing else a pickle may name."""

    def __init__(self, data: bytes, torch: ModuleType, path: str) -> None:
        super().__init__(io.BytesIO(data))
        self._torch = torch
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        torch = self._torch
        allowed: Any = None
        if module == _DCP + "metadata" and name in _METADATA_CLASSES:
            allowed = getattr(torch.distributed.checkpoint.metadata, name)
        elif module == _DCP + "filesystem" and name == "_StorageInfo":
            allowed = torch.distributed.checkpoint.filesystem._StorageInfo
        elif module == "torch" and name == "Size":
            allowed = torch.Size
        elif module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            allowed = getattr(torch, name)
        elif module == "torch.serialization" and name == "_get_layout":
            allowed = torch.serialization._get_layout
        elif module == "pathlib" and name in ("Path", "PosixPath", "WindowsPath"):
            allowed = pathlib.PurePath  # the checkpoint id: a name, never opened
        elif module == "collections" and name == "OrderedDict":
            allowed = dict
        if allowed is None:
            raise InvalidError(f"{METADATA_FILE} names {module}.{name}, which is not one of "
                               "DCP's metadata types; OCF never builds other objects from a "
                               "pickle", path=self._path)
        return allowed


def read_index(torch: ModuleType, directory: str) -> Index:
    """The checked index of the DCP checkpoint ``directory``."""
    path = os.path.join(directory, METADATA_FILE)
    with open_regular(path, "the DCP metadata file") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_INDEX_BYTES:
            raise LimitExceededError(f"{size} bytes exceed the limit of {MAX_INDEX_BYTES}",
                                     path=path)
        data = f.read()
    _check_opcodes(data, path)
    try:
        metadata = _AllowlistUnpickler(data, torch, path).load()
    except (InvalidError, MemoryError):
        raise
    # The unpickler raises what it will on damaged bytes (UnpicklingError, EOFError,
    # TypeError from a constructor given the wrong arguments, ...): all MALFORMED.
    except Exception as exc:
        raise MalformedError(f"not a readable DCP metadata pickle: {exc}"[:400],
                             path=path) from None
    return _checked(torch, metadata, directory, path)


# Opcodes whose argument is a memo index: CPython's unpickler grows its memo array to the
# largest index put, so one LONG_BINPUT of 2**31 would reserve gigabytes.
_MEMO_OPCODES = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"})


def _check_opcodes(data: bytes, path: str) -> None:
    """Refuse a pickle whose memo indices or frame lengths exceed what its bytes hold, before
    the C unpickler reserves memory for them; every opcode is decoded once, in Python."""
    try:
        for opcode, argument, _ in pickletools.genops(data):
            bounded = opcode.name in _MEMO_OPCODES or opcode.name == "FRAME"
            if bounded and not (isinstance(argument, int) and 0 <= argument <= len(data)):
                raise MalformedError(f"not a readable DCP metadata pickle: opcode "
                                     f"{opcode.name} {argument!r} exceeds the {len(data)} "
                                     "bytes of the file", path=path)
    except MalformedError:
        raise
    except Exception as exc:  # pickletools raises ValueError (and others) on damaged bytes
        raise MalformedError(f"not a readable DCP metadata pickle: {exc}"[:400],
                             path=path) from None


def _checked(torch: ModuleType, metadata: Any, directory: str, path: str) -> Index:
    module = torch.distributed.checkpoint.metadata
    entries = getattr(metadata, "state_dict_metadata", None)
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(metadata, module.Metadata) or not isinstance(entries, dict) \
            or not isinstance(storage, dict):
        raise MalformedError("not DCP metadata: no state_dict_metadata and storage_data "
                             "maps", path=path)
    if len(entries) > MAX_TENSORS or len(storage) > MAX_TENSORS:
        raise LimitExceededError(f"more than {MAX_TENSORS} entries", path=path,
                                 requirement="R-LIMIT-001")
    files = _Files(directory, path)
    items = {(i.fqn, tuple(i.offset) if i.offset is not None else None): _item(files, v, path)
             for i, v in _storage_entries(module, storage, path)}
    tensors: dict[str, Tensor] = {}
    values: dict[str, Item] = {}
    unread: dict[str, str] = {}
    for key, entry in entries.items():
        if not isinstance(key, str):
            raise MalformedError(f"a state_dict_metadata key of type {type(key).__name__}",
                                 path=path)
        if isinstance(entry, module.BytesStorageMetadata):
            values[key] = _found(items, key, None, path)
        elif isinstance(entry, module.TensorStorageMetadata):
            tensor = _tensor(torch, entry, key, items, path)
            if isinstance(tensor, str):
                unread[key] = tensor
            else:
                tensors[key] = tensor
        else:
            raise MalformedError(f"an entry of type {type(entry).__name__}", path=path, key=key)
    return Index(tensors, values, unread)


def _storage_entries(module: Any, storage: dict[Any, Any], path: str
                     ) -> list[tuple[Any, Any]]:
    found = []
    for index, info in storage.items():
        offset = getattr(index, "offset", None)
        if not isinstance(index, module.MetadataIndex) or not isinstance(index.fqn, str) \
                or not (offset is None or _is_shape(offset)):
            raise MalformedError("a storage_data key that is not a MetadataIndex", path=path)
        found.append((index, info))
    return found


class _Files:
    """The sizes of the directory's data files, each looked at once."""

    def __init__(self, directory: str, path: str) -> None:
        self.directory = directory
        self.path = path
        self.sizes: dict[str, int] = {}

    def size(self, name: object) -> int:
        if not isinstance(name, str) or not name or os.path.basename(name) != name \
                or name in (".", "..") or "\0" in name:
            raise MalformedError(f"storage file {name!r} is not a plain file name in the "
                                 "checkpoint directory", path=self.path)
        found = self.sizes.get(name)
        if found is None:
            with open_regular(os.path.join(self.directory, name), "a DCP data file") as f:
                found = self.sizes[name] = os.fstat(f.fileno()).st_size
        return found


def _item(files: _Files, info: Any, path: str) -> Item:
    name = getattr(info, "relative_path", None)
    offset, length = getattr(info, "offset", None), getattr(info, "length", None)
    if not _is_count(offset) or not _is_count(length):
        raise MalformedError("a storage item without a whole offset and length", path=path)
    if getattr(info, "transform_descriptors", None):
        raise InvalidError(f"storage item in {name!r} is transformed "
                           f"({info.transform_descriptors!r}); only plain DCP items are read",
                           path=path)
    size = files.size(name)
    assert isinstance(name, str), "files.size refuses other names"
    if offset + length > size:
        raise MalformedError(f"storage item at {offset}+{length} runs past the end of "
                             f"{name!r} ({size} bytes)", path=path)
    return Item(name, offset, length)


def _found(items: dict[tuple[str, tuple[int, ...] | None], Item], key: str,
           offset: tuple[int, ...] | None, path: str) -> Item:
    found = items.get((key, offset))
    if found is None:
        where = "" if offset is None else f" at offset {list(offset)}"
        raise MalformedError(f"no storage item for this entry{where}", path=path, key=key)
    return found


def _tensor(torch: ModuleType, entry: Any, key: str,
            items: dict[tuple[str, tuple[int, ...] | None], Item], path: str) -> Tensor | str:
    torch_dtype = getattr(getattr(entry, "properties", None), "dtype", None)
    shape = getattr(entry, "size", None)
    chunks = getattr(entry, "chunks", None)
    if not isinstance(torch_dtype, torch.dtype) or not _is_shape(shape) \
            or not isinstance(chunks, list):
        raise MalformedError("a tensor entry without a dtype, shape and chunks", path=path,
                             key=key)
    shape = tuple(shape)
    if len(shape) > MAX_RANK or prod(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)} exceeds the limits of {MAX_RANK} "
                                 f"dimensions and {MAX_ELEMENTS} elements", path=path, key=key,
                                 requirement="R-TENSOR-003")
    row = ocf_dtype(torch_dtype)
    if row is None:
        return f"a tensor of dtype {torch_dtype}, which OCF has no dtype for"
    if len(chunks) > MAX_CHUNKS:
        raise LimitExceededError(f"{len(chunks)} chunks exceed the limit of {MAX_CHUNKS}",
                                 path=path, key=key)
    boxes = [_box(chunk, shape, key, path) for chunk in chunks]
    _check_tiling(boxes, shape, key, path)
    found = []
    for start, extent in boxes:
        item = _found(items, key, start, path)
        if prod(extent) * row.itemsize > item.length:
            raise MalformedError(f"the chunk at {list(start)} needs {prod(extent) * row.itemsize}"
                                 f" bytes; its storage item holds {item.length}", path=path,
                                 key=key)
        found.append(Chunk(start, extent, item))
    return Tensor(torch_dtype, row, shape, tuple(found))


def _box(chunk: Any, shape: tuple[int, ...], key: str, path: str
         ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    start, extent = getattr(chunk, "offsets", None), getattr(chunk, "sizes", None)
    if not _is_shape(start) or not _is_shape(extent) or len(start) != len(shape) \
            or len(extent) != len(shape) \
            or any(s + e > d for s, e, d in zip(start, extent, shape)):
        raise MalformedError(f"a chunk ({start!r}, {extent!r}) outside the shape "
                             f"{list(shape)}", path=path, key=key)
    return tuple(start), tuple(extent)


def _check_tiling(boxes: list[tuple[tuple[int, ...], tuple[int, ...]]],
                  shape: tuple[int, ...], key: str, path: str) -> None:
    """Refuse chunks that overlap or leave part of the tensor unwritten."""
    if sum(prod(extent) for _, extent in boxes) != prod(shape):
        raise MalformedError("the chunks do not cover the tensor exactly", path=path, key=key)
    nonempty = [box for box in boxes if prod(box[1]) > 0]
    for i, (a_start, a_extent) in enumerate(nonempty):
        for b_start, b_extent in nonempty[i + 1:]:
            if all(a < b + m and b < a + n for a, n, b, m in
                   zip(a_start, a_extent, b_start, b_extent)):
                raise MalformedError(f"chunks at {list(a_start)} and {list(b_start)} overlap",
                                     path=path, key=key)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_shape(value: object) -> TypeGuard[tuple[int, ...]]:
    return isinstance(value, tuple) and all(_is_count(d) for d in value)
