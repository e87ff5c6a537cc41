"""An Orbax checkpoint as a :class:`ocf.format.source.Source`, read through orbax-checkpoint.

A checkpoint saved by ``ocp.StandardCheckpointer`` or ``ocp.PyTreeCheckpointer``
is a directory holding ``_METADATA`` (the tree's structure and each leaf's
kind) and the arrays in tensorstore's formats; a CheckpointManager's step
directory holds one such directory per item (``default``, ``state``, ...):
a step directory of one item opens as that item, and a CheckpointManager's
directory as its latest step.
OCF does not parse those formats itself: orbax-checkpoint, when installed,
reads the tree's metadata (shapes and dtypes, no values) on opening, then
restores one leaf at a time as a NumPy array (every other leaf a
placeholder, so nothing else is read). Without orbax-checkpoint, opening is
INVALID, naming the directory and what to install.

Tensors are keyed by their tree path, its parts joined with ``/``:
``params/dense/kernel``, ``opt_state/0/mu/w`` (list indices as numbers).
Leaves that are not arrays or scalars (strings saved by PyTreeCheckpointer)
are listed, by path and kind, in the metadata ``orbax.other_leaves``; the
tree's custom metadata, when it has some, in ``orbax.custom_metadata``.

Every checkpoint is hostile: the shapes and dtypes of the metadata are
checked against OCF's limits before anything is restored, a restored array
must have the shape and dtype the metadata promised, and whatever orbax
raises on a damaged checkpoint becomes a MalformedError naming the
directory and the tensor. Orbax stores no checksums OCF can check, and
tensorstore fills a missing chunk with the array's fill value, so a chunk
file deleted from a checkpoint reads as zeros.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from ocf.format import dtypes
from ocf.format.checksum import crc32c
from ocf.format.errors import (
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    OCFError,
)
from ocf.format.limits import MAX_ELEMENTS, MAX_RANK, MAX_TENSORS, nonzero_product
from ocf.format.memory import needing
from ocf.format.metadata import MetadataValue
from ocf.format.pieces import Piece
from ocf.format.source import Source, TensorSummary
from ocf.interop.output import with_path

METADATA_FILE = "_METADATA"
STEP_METADATA_FILE = "_CHECKPOINT_METADATA"
EXTRA = "pip install 'ocf[orbax]'"
OTHER_LEAVES_KEY = "orbax.other_leaves"
CUSTOM_METADATA_KEY = "orbax.custom_metadata"
MAX_METADATA_BYTES = 1 << 30

TreePath = tuple[str | int, ...]


def item_directory(path: str) -> str | None:
    """The directory of the Orbax tree at ``path``: the path itself when it holds
    ``_METADATA``, or a step directory's one item that does, or that of the latest
    step of a CheckpointManager's directory; None otherwise."""
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, METADATA_FILE)):
        return path
    if not os.path.isfile(os.path.join(path, STEP_METADATA_FILE)):
        steps = [int(e.name) for e in os.scandir(path) if e.name.isdigit() and e.is_dir()
                 and os.path.isfile(os.path.join(e.path, STEP_METADATA_FILE))]
        return item_directory(os.path.join(path, str(max(steps)))) if steps else None
    items = [e.path for e in os.scandir(path)
             if e.is_dir() and os.path.isfile(os.path.join(e.path, METADATA_FILE))]
    return items[0] if len(items) == 1 else None


def orbax_checkpoint(path: str) -> Any:
    """The orbax.checkpoint module; InvalidError naming ``path`` and what to install
    without it."""
    try:
        import orbax.checkpoint as ocp  # type: ignore[import-untyped]
    except ImportError:
        raise InvalidError("reading an Orbax checkpoint needs orbax-checkpoint, which is "
                           f"not installed ({EXTRA})", path=path) from None
    return ocp


def leaves(tree: object, path: TreePath = ()) -> Iterator[tuple[TreePath, object]]:
    """The leaves of a metadata tree (nested dicts, lists and tuples) with their paths."""
    if isinstance(tree, Mapping):
        for name, child in tree.items():
            yield from leaves(child, (*path, name))
    elif isinstance(tree, (list, tuple)):
        for i, child in enumerate(tree):
            yield from leaves(child, (*path, i))
    else:
        yield path, tree


def key_of(path: TreePath) -> str:
    return "/".join(str(part) for part in path)


class OrbaxSource(Source[TensorSummary]):
    """An Orbax checkpoint directory as an :class:`ocf.format.source.Source`."""

    format_name = "Orbax"

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        del verify  # nothing to switch off: orbax reads what it reads
        self.path: str = os.fspath(path)
        item = item_directory(self.path)
        if item is None:
            raise NotFoundError(f"no Orbax checkpoint here (no {METADATA_FILE} file)",
                                path=self.path)
        self.item = os.path.abspath(item)  # orbax reads relative paths as nothing
        self._ocp = orbax_checkpoint(self.path)
        raw = self._metadata_bytes()
        self._identity = (len(raw), crc32c(raw))
        tree, custom = self._read_tree()
        self._tree = tree
        self._custom = custom
        self._views: dict[str, TensorSummary] = {}
        self._paths: dict[str, TreePath] = {}
        self._other: list[str] = []
        for found_path, leaf in leaves(tree):
            self._add_leaf(found_path, leaf)
        self._last: tuple[str, np.ndarray] | None = None  # the last tensor read, for pieces

    def _metadata_bytes(self) -> bytes:
        name = os.path.join(self.item, METADATA_FILE)
        if os.path.getsize(name) > MAX_METADATA_BYTES:
            raise LimitExceededError(f"{METADATA_FILE} exceeds {MAX_METADATA_BYTES} bytes",
                                     path=self.path)
        with open(name, "rb") as f:
            return f.read()

    def _read_tree(self) -> tuple[Any, Any]:
        try:
            with needing(self._identity[0] * 16, "reading the checkpoint's metadata",
                         path=self.path), self._ocp.PyTreeCheckpointer() as checkpointer:
                found = checkpointer.metadata(self.item)
        except OCFError:
            raise
        except Exception as exc:  # orbax's and tensorstore's errors on a damaged checkpoint
            raise MalformedError(f"orbax-checkpoint cannot read this checkpoint's metadata: "
                                 f"{type(exc).__name__}: {exc}", path=self.path) from None
        tree_metadata = getattr(found, "item_metadata", found)
        tree = getattr(tree_metadata, "tree", tree_metadata)
        if not isinstance(tree, (Mapping, list, tuple)):  # orbax answers None for junk
            raise MalformedError(f"orbax-checkpoint cannot read the tree's metadata (in "
                                 f"{METADATA_FILE} and the array store) and answers "
                                 f"{type(tree).__name__}", path=self.path)
        return tree, getattr(tree_metadata, "custom_metadata", None)

    def _add_leaf(self, path: TreePath, leaf: object) -> None:
        key = key_of(path)
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            self._other.append(f"{key}: {type(leaf).__name__}")
            return
        if len(self._views) >= MAX_TENSORS:
            raise LimitExceededError(f"more than {MAX_TENSORS} tensors", path=self.path,
                                     requirement="R-LIMIT-001")
        shape = tuple(int(d) for d in shape)
        if len(shape) > MAX_RANK or nonzero_product(shape) > MAX_ELEMENTS or min(
                shape, default=0) < 0:
            raise LimitExceededError(f"shape {list(shape)} is beyond OCF's limits of "
                                     f"{MAX_RANK} dimensions and {MAX_ELEMENTS} elements",
                                     path=self.path, key=key, requirement="R-TENSOR-003")
        try:
            found = dtypes.for_array(np.empty(0, np.dtype(dtype)))
        except (OCFError, TypeError) as exc:
            raise with_path(MalformedError(f"dtype {dtype!r}: {exc}"), self.path, key) from None
        if key in self._views:
            raise MalformedError("two leaves of the tree have this path", path=self.path,
                                 key=key)
        self._views[key] = TensorSummary(key, found, shape)
        self._paths[key] = path

    @property
    def metadata(self) -> dict[str, MetadataValue]:
        found: dict[str, MetadataValue] = {}
        if self._other:
            found[OTHER_LEAVES_KEY] = list(self._other)
        if isinstance(self._custom, dict) and self._custom:
            found[CUSTOM_METADATA_KEY] = dict(self._custom)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, key: object) -> bool:
        return key in self._views

    def __getitem__(self, key: str) -> TensorSummary:
        found = self._views.get(key)
        if found is None:
            raise NotFoundError("no tensor with this key", path=self.path, key=key)
        return found

    def read_tensors(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Tensors ``keys``, restored by one call of orbax (nothing else is read)."""
        views = [self[key] for key in keys]
        wanted = {self._paths[key]: key for key in keys}
        ocp = self._ocp
        item = _mapped(self._tree, lambda path, leaf: leaf if path in wanted
                       else ocp.PLACEHOLDER)
        restore_args = _mapped(self._tree, lambda path, leaf: ocp.RestoreArgs(
            restore_type=np.ndarray))
        nbytes = sum(prod(v.shape) * v.dtype.itemsize for v in views)
        try:
            with needing(nbytes, "restoring tensors", path=self.path,
                         key=keys[0] if len(keys) == 1 else None), \
                    ocp.PyTreeCheckpointer() as checkpointer:
                restored = checkpointer.restore(self.item, args=ocp.args.PyTreeRestore(
                    item=item, restore_args=restore_args))
        except OCFError:
            raise
        except Exception as exc:  # orbax's and tensorstore's errors on a damaged checkpoint
            raise MalformedError(f"orbax-checkpoint cannot restore this checkpoint: "
                                 f"{type(exc).__name__}: {exc}", path=self.path,
                                 key=keys[0] if len(keys) == 1 else None) from None
        return {key: _checked(_at(restored, self._paths[key]), view, self.path)
                for key, view in zip(keys, views)}

    def read_tensor(self, key: str) -> np.ndarray:
        return self.read_tensors([key])[key]

    def read_piece(self, key: str, piece: Piece) -> np.ndarray:
        # Orbax restores whole leaves: the last one is kept for its next pieces.
        if self._last is None or self._last[0] != key:
            self._last = None  # freed before the next one is restored
            self._last = (key, self.read_tensor(key))
        result: np.ndarray = self._last[1][piece.index].copy()
        return result

    @property
    def identity(self) -> tuple[int, int]:
        return self._identity

    def close(self) -> None:
        self._last = None


def _mapped(tree: object, leaf_value: Any, path: TreePath = ()) -> Any:
    """``tree`` with each leaf replaced by ``leaf_value(path, leaf)``."""
    if isinstance(tree, Mapping):
        return {name: _mapped(child, leaf_value, (*path, name)) for name, child in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_mapped(child, leaf_value, (*path, i))
                          for i, child in enumerate(tree))
    return leaf_value(path, tree)


def _at(tree: Any, path: TreePath) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def _checked(value: Any, view: TensorSummary, path: str) -> np.ndarray:
    """The restored ``value`` as a writable array, which must have the view's shape and
    dtype (the metadata's promise)."""
    array = np.array(value, copy=True)
    if array.shape != view.shape or array.dtype != view.dtype.numpy:
        raise MalformedError(f"orbax restored a {array.dtype} array of shape "
                             f"{list(array.shape)}; the checkpoint's metadata says "
                             f"{view.dtype.name} of shape {list(view.shape)}", path=path,
                             key=view.key)
    return array
