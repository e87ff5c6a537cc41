"""A JAX pytree seen as trackable objects, walked by ocf.objects.saving and ocf.objects.restoring.

JAX arrays cannot be restored in place, so a tree is not tracked directly:
:class:`TreeView` builds a proxy per node of the tree (:class:`Container`
for every pytree node, :class:`Leaf` for every array), the ordinary object
graph machinery saves or restores the proxies, and :meth:`TreeView.rebuild`
assembles a new tree from what they received.

The graph of a tree (spec/objects.md):

- every pytree node (dict, list, tuple, namedtuple, registered dataclass,
  Flax FrozenDict, optax state, ...) is a node whose child edges are named
  after its keys: dict keys (percent-escaped as ``ocf.objects.tracking`` does),
  sequence positions ``0``, ``1``, ..., attribute names of namedtuples and
  dataclasses; its type name is the class, ``module.QualName``;
- every array leaf (``jax.Array``, ``numpy.ndarray``, NumPy scalar) is a node
  with one tensor, ``value``;
- Python scalar leaves (bool, int, float, str) and None are the metadata of
  their parent, under the edge name they would have had;
- optimizer moments become slot variables (see :mod:`ocf.jax.slots`).

A restore target may be concrete or abstract (``jax.ShapeDtypeStruct``
leaves, as ``jax.eval_shape`` gives): it fixes the structure, and every
leaf's shape and dtype, which the checkpoint must match exactly. Each
restored leaf takes its target's kind: a JAX array (on the target's
sharding), a NumPy array, or a NumPy scalar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.jax._framework import jax, jnp
from ocf.objects.tracking import VALUE, escape_name

_SCALARS = (bool, int, float, str)
ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)
# A stored value's transformation before it is checked against a leaf (translations).
Transform = Callable[[np.ndarray], np.ndarray]


def describe(leaf: Any) -> str:
    """A leaf's dtype and shape, for messages."""
    return f"{np.dtype(leaf.dtype).name} {list(leaf.shape)}"


def is_abstract(leaf: object) -> bool:
    return isinstance(leaf, jax.ShapeDtypeStruct)


class Leaf:
    """An array leaf: a node with one tensor, ``value``.

    Not weakly referenceable (``__slots__``) on purpose: a restore cannot
    wait for a proxy to gain children, which it never does.
    """

    __slots__ = ("path", "restored", "source", "to_stored", "transform", "view")

    def __init__(self, view: TreeView, path: str, source: Any) -> None:
        self.view = view
        self.path = path  # in the tree, for messages
        self.source = source  # the leaf of the tree: its value, or its shape and dtype
        self.restored: np.ndarray | None = None
        self.transform: Transform | None = None  # stored value -> leaf, on restore
        self.to_stored: Transform | None = None  # leaf -> stored value, on save

    @property
    def ocf_type_name(self) -> str:
        if isinstance(self.source, np.ndarray | np.generic):
            return "numpy.ndarray"
        return "jax.Array"

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)  # without to_numpy: a device array is not copied to the host

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        if self.restored is not None:  # not yet rebuilt into the tree
            return {VALUE: self.restored}
        if not is_abstract(self.source):
            value = to_numpy(self.source, self.path)
            return {VALUE: value if self.to_stored is None else self.to_stored(value)}
        if self.view.restoring:
            # A restore by name derives keys from these; a zero-stride view
            # of the right shape costs no memory and is never written.
            dtype = np.dtype(self.source.dtype)
            return {VALUE: np.broadcast_to(np.zeros((), dtype), tuple(self.source.shape))}
        raise InvalidError(f"cannot save the abstract leaf {self.path!r} "
                           f"({describe(self.source)}): it has no value")

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE not in values:
            return
        value = values[VALUE]
        if self.transform is not None:
            value = self.transform(value)
        if self.view.cast and value.shape == tuple(self.source.shape):
            value = value.astype(self.source.dtype, copy=False)
        if value.shape != tuple(self.source.shape) or value.dtype != self.source.dtype:
            remedy = ": restore(..., cast=True) casts" if value.shape == tuple(
                self.source.shape) else ""
            raise InvalidError(f"target leaf {self.path!r} is {describe(self.source)}, the "
                               f"checkpoint holds {describe(value)}{remedy}",
                               path=self.view.file)
        self.restored = value
        self.view.dirty = True

    def result(self) -> Any:
        """The leaf of the rebuilt tree: the restored value in the target's kind."""
        if self.restored is None:
            return self.source
        return like(self.source, self.restored, self.path)


class Receiver(Protocol):
    """Anything a restored tensor can be handed to: a Leaf, or a translation's router."""

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None: ...


class Scalar:
    """A Python scalar leaf, kept in its parent's metadata."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def result(self) -> object:
        return self.value


class ScalarTarget:
    """A Python number of a restore target, as the receiver of a 0-d tensor the
    checkpoint holds in its place: a step counter that a jitted update turned into
    an array (Flax's ``TrainState.step``) restores into a fresh state's ``0``."""

    __slots__ = ("holder", "path", "view")
    ocf_type_name = "jax.Array"

    def __init__(self, view: TreeView, path: str, holder: Scalar) -> None:
        self.view = view
        self.path = path
        self.holder = holder

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: np.asarray(self.holder.value)}  # what a restore by name derives keys from

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE not in values:
            return
        value = values[VALUE]
        current = self.holder.value
        kind: type[bool | int | float] = type(current) if isinstance(current, bool | int | float) \
            else float
        number = value.item() if value.shape == () else None
        if number is None or not isinstance(number, bool | int | float) or \
                kind(number) != number:
            shown = repr(number) if number is not None else f"a tensor of shape {list(value.shape)}"
            raise InvalidError(f"the checkpoint holds {shown} for {self.path!r}, which a "
                               f"Python {kind.__name__} cannot hold exactly", path=self.view.file)
        self.holder.value = kind(number)
        self.view.dirty = True


class Container:
    """A pytree node: children by edge name, scalar leaves as metadata, slots."""

    __slots__ = ("children", "path", "scalar_targets", "scalars", "slot_targets", "slots",
                 "source", "type_name", "view")

    def __init__(self, view: TreeView, path: str, source: Any) -> None:
        self.view = view
        self.path = path
        self.source = source
        cls = type(source)
        self.type_name = cls.__name__ if cls in (dict, list, tuple) else \
            f"{cls.__module__}.{cls.__qualname__}"
        self.children: dict[str, Container | Leaf] = {}
        self.scalars: dict[str, Scalar | None] = {}  # None for a None leaf
        # Restoring only: numeric scalars as children, for checkpoints holding them as
        # 0-d tensors (ScalarTarget).
        self.scalar_targets: dict[str, ScalarTarget] = {}
        self.slots: list[tuple[Leaf, str, Leaf]] = []
        # (id(variable), slot name) -> what takes a restored slot: the slot's leaf,
        # or what a translation routes a slot saved under another name to
        self.slot_targets: dict[tuple[int, str], Receiver] = {}

    @property
    def ocf_type_name(self) -> str:
        return self.type_name

    def ocf_children(self) -> Mapping[str, object]:
        if self.scalar_targets:
            return {**self.scalar_targets, **self.children}
        return self.children

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {name: None if s is None else s.value  # type: ignore[misc]
                for name, s in self.scalars.items()}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        # Numbers are state (step counters); strings are configuration, kept
        # as the target has them, as ocf.Module does.
        for name, value in values.items():
            if not isinstance(value, bool | int | float):
                continue
            holder = self.scalars.get(name)
            child = self.children.get(name)
            if holder is not None:
                holder.value = value
                self.view.dirty = True
            elif isinstance(child, Leaf) and tuple(child.source.shape) == ():
                # A saved Python number whose target is a 0-d array, as
                # jax.eval_shape makes of every number in a tree.
                child.ocf_restore_tensors({VALUE: exact_scalar(value, child)})

    def ocf_slots(self) -> list[tuple[Leaf, str, Leaf]]:
        return self.slots

    def ocf_restore_slot(self, variable: object, name: str,
                         values: Mapping[str, np.ndarray]) -> None:
        slot = self.slot_targets.get((id(variable), name))
        if slot is not None:
            slot.ocf_restore_tensors(values)

    def add_slot(self, variable: Leaf, name: str, slot: Leaf) -> None:
        self.slots.append((variable, name, slot))
        self.slot_targets[(id(variable), name)] = slot

    def walk(self) -> Iterator[Container | Leaf]:
        """This node and every proxy below it along child edges, depth first."""
        yield self
        for child in self.children.values():
            if isinstance(child, Container):
                yield from child.walk()
            else:
                yield child


def exact_scalar(value: bool | int | float, leaf: Leaf) -> np.ndarray:
    """``value`` as a 0-d array of the leaf's dtype, refusing a change of value."""
    dtype = np.dtype(leaf.source.dtype)
    try:
        with np.errstate(all="ignore"):
            array = np.array(value).astype(dtype)
        exact = bool(array.item() == value)
    except (OverflowError, TypeError, ValueError):
        exact = False
    if not exact:
        raise InvalidError(f"the checkpoint holds the number {value!r} for {leaf.path!r}, "
                           f"which a {dtype.name} target leaf cannot hold exactly",
                           path=leaf.view.file)
    return array


def edge_name(entry: object, path: str) -> str:
    """The edge name of one key of a pytree node."""
    if isinstance(entry, jax.tree_util.DictKey):
        key = entry.key
        if isinstance(key, str):
            return escape_name(key)
        if isinstance(key, int) and not isinstance(key, bool):
            return str(key)
        raise InvalidError(f"{path or '(root)'}: dict key {key!r} is neither str nor int; "
                           "it cannot name an edge of the checkpoint")
    if isinstance(entry, jax.tree_util.SequenceKey):
        return str(entry.idx)
    if isinstance(entry, jax.tree_util.GetAttrKey):
        return escape_name(entry.name)
    if isinstance(entry, jax.tree_util.FlattenedIndexKey):
        return str(entry.key)
    raise InvalidError(f"{path or '(root)'}: unknown pytree key {entry!r}")


def join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


class TreeView:
    """The proxies of one pytree, and the tree rebuilt from what they received."""

    def __init__(self, tree: Any, *, file: str | None = None, cast: bool = False) -> None:
        self.file = file  # the checkpoint being restored, for messages
        self.cast = cast  # restored values of another dtype are cast to the leaf's
        self.restoring = file is not None  # a view only restored into, never saved
        self.dirty = False  # some proxy received a value since the last rebuild
        flat, self.treedef = jax.tree_util.tree_flatten(tree)
        self.holders: list[Leaf | Scalar] = []  # in the order of jax's flattening
        root = self._proxy(tree, "")
        if root is None:
            raise InvalidError(f"a tree to checkpoint must be a pytree or an array, not a "
                               f"{type(tree).__name__}")
        self.root: Container | Leaf = root
        if len(self.holders) != len(flat):  # pragma: no cover - a jax change
            raise AssertionError("the walk of the tree disagrees with jax's flattening")

    def _proxy(self, node: Any, path: str) -> Container | Leaf | None:
        if isinstance(node, ARRAY_TYPES):
            leaf = Leaf(self, path, node)
            self.holders.append(leaf)
            return leaf
        if node is None or isinstance(node, _SCALARS):
            return None
        entries, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)
        if len(entries) == 1 and entries[0][0] == ():
            raise InvalidError(f"{path or '(root)'}: a leaf of type {type(node).__qualname__} "
                               "cannot be checkpointed; leaves must be arrays or Python "
                               "scalars (register other classes as pytrees, e.g. with "
                               "jax.tree_util.register_dataclass)")
        container = Container(self, path, node)
        for keys, child in entries:
            name = edge_name(keys[0], path)
            if name in container.children or name in container.scalars:
                raise InvalidError(f"{path or '(root)'}: two keys give the edge name {name!r}")
            self._add(container, name, child)
        return container

    def _add(self, container: Container, name: str, child: Any) -> None:
        if child is None:
            container.scalars[name] = None
        elif isinstance(child, _SCALARS):
            holder = Scalar(child)
            self.holders.append(holder)
            container.scalars[name] = holder
            if self.restoring and isinstance(child, bool | int | float):
                container.scalar_targets[name] = ScalarTarget(self, join(container.path, name),
                                                              holder)
        else:
            proxy = self._proxy(child, join(container.path, name))
            assert proxy is not None
            container.children[name] = proxy

    def leaves(self) -> list[Leaf]:
        return [h for h in self.holders if isinstance(h, Leaf)]

    def missing(self) -> list[str]:
        """Paths of abstract leaves that received no value."""
        return [leaf.path or "(root)" for leaf in self.leaves()
                if leaf.restored is None and is_abstract(leaf.source)]

    def unrestored(self) -> list[str]:
        """Paths of all array leaves that received no value."""
        return [leaf.path or "(root)" for leaf in self.leaves() if leaf.restored is None]

    def rebuild(self) -> Any:
        """A new tree with every received value; the proxies then describe it."""
        missing = self.missing()
        if missing:
            shown = ", ".join(repr(p) for p in missing[:20])
            raise InvalidError(f"{len(missing)} abstract leaves of the target received no "
                               f"value from the checkpoint: {shown}", path=self.file)
        results = [holder.result() for holder in self.holders]
        for holder, value in zip(self.holders, results):
            if isinstance(holder, Leaf):
                holder.source, holder.restored = value, None
        self.dirty = False
        return jax.tree_util.tree_unflatten(self.treedef, results)


def to_numpy(leaf: Any, path: str) -> np.ndarray:
    """The value of an array leaf as a NumPy array (zero-copy for CPU JAX arrays)."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        raise InvalidError(f"{path or '(root)'}: typed PRNG keys are not stored; keep "
                           "jax.random.key_data(key) in the tree instead")
    return np.asarray(leaf)


def like(target: Any, value: np.ndarray, path: str) -> Any:
    """``value`` as the same kind of leaf as ``target``."""
    if isinstance(target, np.ndarray):
        return value
    if isinstance(target, np.generic):
        return value[()]
    sharding = getattr(target, "sharding", None)
    result = jax.device_put(value, sharding)
    if result.dtype != target.dtype:  # e.g. int64 with jax_enable_x64 off
        raise InvalidError(f"{path or '(root)'}: JAX turned the restored "
                           f"{np.dtype(value.dtype).name} into {result.dtype.name}; "
                           "enable jax_enable_x64 to keep 64-bit values")
    return result
