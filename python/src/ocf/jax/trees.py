"""Saving pytrees as object graphs and restoring them into new trees.

``save(tree, path)`` writes the tree as the root of an object-based
checkpoint; ``restore(target, path)`` matches the checkpoint's graph
against ``target`` by structure and returns a new tree. :class:`TreeState`
puts a tree into an :class:`ocf.Checkpoint` next to other objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ocf.format.argument_order import check_object_then_path
from ocf.format.async_save import SaveHandle
from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.format.save_options import WriteOptions
from ocf.format.storage.location import StorageOptions
from ocf.interop.registry import open_checkpoint
from ocf.jax import slots
from ocf.jax.staleness import LeafMemory
from ocf.jax.translations import Translation
from ocf.jax.tree_view import Container, Leaf, TreeView
from ocf.objects.restore_status import RestoreMismatchError
from ocf.objects.restoring import NameMap, Rename
from ocf.objects.restoring import restore as restore_objects
from ocf.objects.saving import save_root
from ocf.objects.tracking import VALUE

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11
    from typing_extensions import Unpack


def view_of(tree: Any, *, file: str | None = None, translation: Translation | None = None,
            saving: bool = False, cast: bool = False) -> TreeView:
    """The proxies of ``tree``, optimizer moments linked as slots, a translation applied
    for a restore from ``file`` or, when ``saving``, for a save."""
    view = TreeView(tree, file=file, cast=cast)
    if translation is not None:
        translation.apply(view.root, saving=saving)
    slots.link(view.root)
    if translation is not None and not saving:
        translation.route_slots(view.root)
    return view


def save(state: Any, path: str | os.PathLike[str],
         metadata: Mapping[str, object] | None = None, *,
         translation: Translation | None = None, blocking: bool = True,
         **options: Unpack[WriteOptions]) -> str | SaveHandle:
    """Write the pytree ``state`` as an object-based checkpoint at ``path``; return the path.

    ``translation`` writes the tree in another framework's names and array
    layouts (``translation=ocf.jax.FLAX_TO_TORCH`` for a checkpoint that
    restores into the PyTorch model). The other options are those of
    :func:`ocf.numpy.save`.

    Examples:
        >>> ocf.jax.save({"params": params, "opt_state": opt_state}, "ckpt.ocf")
    """
    check_object_then_path("ocf.jax.save", state, path)
    root = view_of(state, translation=translation, saving=translation is not None).root
    return save_root(root, path, metadata=metadata, blocking=blocking, options=options)


def restore(target: Any, path: str | os.PathLike[str], *, start: str = "",
            partial: bool = False, cast: bool = False, translation: Translation | None = None,
            name_map: NameMap | None = None, rename: Rename | None = None,
            verify: bool = True, storage_options: StorageOptions | None = None) -> Any:
    """A new tree shaped like ``target`` with the values of the checkpoint at ``path``.

    ``target`` gives the structure and every leaf's shape and dtype; its
    leaves are arrays or ``jax.ShapeDtypeStruct``. ``start`` names the
    checkpoint object to match with the target's root ("state" when the tree
    was saved as ``ocf.Checkpoint(state=TreeState(tree))``). Unless
    ``partial``, every leaf of the target must receive a value and every
    tensor of the checkpoint below ``start`` must find a leaf; with
    ``partial``, concrete leaves without a value keep theirs. A stored dtype
    other than a leaf's is an error unless ``cast``.
    ``translation`` maps a checkpoint written with other names or array
    layouts (see :mod:`ocf.jax.translations`). Errors name the paths that
    did not match.

    A checkpoint without object graph (``save_file``, a converted
    safetensors file) is read by name: each leaf takes the tensor whose key
    is its path in the tree (``params/dense/kernel``), prefixed by
    ``start/`` when given, then mapped through ``name_map`` (a dict or a
    function of that key). ``rename`` maps the paths of an object-based
    checkpoint to the target's, as for :func:`ocf.restore`
    (``{"params/fc1": "params/encoder"}``).

    Examples:
        >>> target = jax.eval_shape(init)  # abstract leaves: jax.ShapeDtypeStruct
        >>> state = ocf.jax.restore(target, "ckpt.ocf")  # a new tree
    """
    check_object_then_path("ocf.jax.restore", target, path, first_name="target")
    file = os.fspath(path)
    view = view_of(target, file=file, translation=translation, cast=cast)
    graph = _object_graph(file, storage_options)
    if graph is None:
        # partial: this function judges strictness by leaves, below.
        status = restore_objects(view.root, file, name_map=_leaf_keys(start, name_map),
                                 rename=rename, partial=True, verify=verify,
                                 storage_options=storage_options)
        unmatched = status.unmatched_checkpoint_paths()  # tensor keys
    else:
        if name_map is not None:
            raise InvalidError("name_map applies to checkpoints without object graph; this "
                               "one is matched by structure (use start= and translation=)",
                               path=file)
        status = restore_objects(view.root, file, start=start, partial=True, rename=rename,
                                 verify=verify, storage_options=storage_options)
        # Objects holding no tensor (an activation layer of another framework) are
        # structure only, and may be missing.
        unmatched = status.unmatched_checkpoint_paths(holding_values=True)
    if not partial:
        _judge(view.unrestored(), unmatched, path)
    return view.rebuild()


def _judge(unrestored: Sequence[str], unmatched: Sequence[str],
           path: str | os.PathLike[str]) -> None:
    """RestoreMismatchError (INVALID) naming the leaves without a value and the
    checkpoint tensors without a leaf, with the remedy that keeps every value:
    partial=True only when one side alone is left over."""
    parts = [_listed(what, paths) for what, paths in (
        ("leaves of the target received no value", unrestored),
        ("checkpoint tensors matched no leaf of the target", unmatched)) if paths]
    if not parts:
        return
    if unrestored and unmatched:
        remedy = ("the target's structure is not the saved one (another optax optimizer, a "
                  "renamed layer?): build the target as the saved state was built; "
                  "partial=True would leave these leaves as they are")
    elif unrestored:
        remedy = "restore(..., partial=True) keeps these leaves' values"
    else:
        remedy = "restore(..., partial=True) ignores these values"
    raise RestoreMismatchError(f"{'; '.join(parts)} ({remedy})", path=path)


def _listed(what: str, paths: Sequence[str]) -> str:
    shown = ", ".join(repr(p) for p in paths[:20])
    more = f" and {len(paths) - 20} more" if len(paths) > 20 else ""
    return f"{len(paths)} {what}: {shown}{more}"


def _object_graph(path: str, storage_options: StorageOptions | None) -> ObjectGraph | None:
    # The index only: no tensor is read.
    source = open_checkpoint(path, verify=False, storage_options=storage_options)
    try:
        return source.object_graph
    finally:
        source.close()


def _leaf_keys(start: str, name_map: NameMap | None) -> Callable[[str], str]:
    """The checkpoint key of each leaf of a restore by name, from its object-graph key."""
    suffix = "." + VALUE

    def key(live: str) -> str:
        leaf = live.removesuffix("/" + suffix) if live != suffix else ""
        leaf = "/".join(p for p in (start.strip("/"), leaf) if p)
        if name_map is None:
            return leaf
        return name_map.get(leaf, leaf) if isinstance(name_map, Mapping) else name_map(leaf)
    return key


class TreeState:
    """A pytree as one trackable object, for :class:`ocf.Checkpoint`.

    ``ocf.Checkpoint(state=TreeState(tree)).save(prefix)`` saves the tree
    under the edge ``state``, as :func:`save` would; after
    ``checkpoint.restore(path)``, :attr:`tree` is a new tree holding the
    restored values (concrete leaves the checkpoint lacks keep theirs,
    abstract ones are an error). Assign :attr:`tree` after each training
    step so that the next save sees the current values: a save that finds
    the very JAX arrays of the last save or restore warns
    (:class:`~ocf.jax.staleness.StaleTreeWarning`). :class:`ocf.jax.TreeManager`
    takes the tree at each save instead, with no holder to keep in sync.

    Examples:
        >>> holder = ocf.jax.TreeState({"params": params, "opt_state": opt_state})
        >>> path = ocf.Checkpoint(state=holder).save("run/ckpt")
        >>> ocf.Checkpoint(state=holder).restore(path).assert_consumed()
        >>> params = holder.tree["params"]  # a new tree holding the restored values
    """

    __slots__ = ("_memory", "_tree", "_view")  # no __weakref__: nothing can wait on it

    def __init__(self, tree: Any) -> None:
        self._tree = tree
        self._view: TreeView | None = None
        self._memory = LeafMemory()

    @property
    def tree(self) -> Any:
        """The tree; after a restore, a new one with the restored values."""
        if self._view is not None and self._view.dirty:
            self._tree = self._view.rebuild()
            self._memory.remember(self._tree)
        return self._tree

    @tree.setter
    def tree(self, value: Any) -> None:
        self._tree = value
        self._view = None

    # The tracking protocol, delegated to the proxy of the tree's root. The
    # proxies stay the same until the tree is replaced, so a restore status
    # asked after the restore sees the objects the restore filled.

    def _root(self) -> Container | Leaf:
        if self._view is None:
            self._view = view_of(self._tree)
        return self._view.root

    @property
    def ocf_type_name(self) -> str:
        return self._root().ocf_type_name

    def ocf_children(self) -> Mapping[str, object]:
        root = self._root()
        return root.ocf_children() if isinstance(root, Container) else {}

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        # Asked by saves only (a restore asks ocf_tensor_names): the moment to notice
        # a tree that training replaced without telling the holder.
        self._memory.warn_if_unchanged(self.tree)
        root = self._root()
        return root.ocf_tensors() if isinstance(root, Leaf) else {}

    def ocf_tensor_names(self) -> Iterable[str]:
        root = self._root()
        return root.ocf_tensor_names() if isinstance(root, Leaf) else ()

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        root = self._root()
        if isinstance(root, Leaf):
            root.ocf_restore_tensors(values)

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        root = self._root()
        return root.ocf_metadata() if isinstance(root, Container) else {}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        root = self._root()
        if isinstance(root, Container):
            root.ocf_restore_metadata(values)

    def ocf_slots(self) -> list[tuple[Leaf, str, Leaf]]:
        root = self._root()
        return root.ocf_slots() if isinstance(root, Container) else []

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        root = self._root()
        if isinstance(root, Container):
            root.ocf_restore_slot(variable, name, values)
