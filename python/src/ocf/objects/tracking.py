"""The tracking protocol: how objects take part in object-based checkpoints.

An object becomes a node of a checkpoint's object graph (spec/objects.md)
through these methods, all optional, all public:

``ocf_children() -> Mapping[str, object]``
    The objects it holds, by edge name (a layer's sublayers, a model's
    optimizer). Names follow [R-GRAPH-003]: non-empty, no "/", no leading ".".
``ocf_tensors() -> Mapping[str, numpy.ndarray]``
    Its own values to save, by attribute name (a variable's ``value``).
``ocf_restore_tensors(values: Mapping[str, numpy.ndarray]) -> None``
    Take saved values back (only the names the checkpoint has).
``ocf_tensor_names() -> Iterable[str]``
    The attribute names ``ocf_tensors`` would give, without the values: what
    a restore asks when it judges which objects received values (a GPU
    tensor's ``ocf_tensors`` copies it to the host). Without it, the keys of
    ``ocf_tensors()`` are taken.
``ocf_expected_tensors() -> Mapping[str, tuple[tuple[int, ...], numpy.dtype, str]]``
    The shape and dtype each restored value must have, and a word for the
    target in messages ("Parameter"), by attribute name (names it leaves
    out take any value). A restore checks every value of
    every object against these before it hands over the first one, so a
    mismatch leaves every object as it was; with ``cast=True`` values of
    another dtype are cast to the expected one first.
``ocf_metadata() -> Mapping[str, MetadataValue]`` and
``ocf_restore_metadata(values) -> None``
    Non-tensor state: hyperparameters, Python scalars, step numbers.
``ocf_check_restore_metadata(values) -> None``
    Raise the error ``ocf_restore_metadata(values)`` would raise, changing
    nothing (an optimizer with another number of parameter groups). A
    restore calls it for every object before it hands over the first value,
    so such a refusal leaves every object as it was.
``ocf_slots() -> Iterable[tuple[object, str, object]]``
    For optimizers: ``(variable, slot_name, slot)`` for every slot variable
    kept, where ``slot`` is itself trackable (an array or a Variable).
``ocf_restore_slot(variable, slot_name, values) -> None``
    Create or fill the slot ``slot_name`` of ``variable`` from ``values``
    (the slot node's saved tensors).
``ocf_type_name: str``
    An optional type tag stored with the node.

Adapters (:func:`register_adapter`) make types trackable that one cannot
add methods to; built-in types get adapters here: dict, list and tuple
(items become children, scalar items metadata) and NumPy arrays (a leaf
with one tensor, ``value``, restored in place). An object's own protocol
methods win over an adapter registered for its class or a base class, as a
subclass's methods override its base's: the adapter provides only the
parts the object does not define. The parts go by pairs, since what saves
a value and what restores it must agree: ``ocf_tensors`` with
``ocf_restore_tensors``, ``ocf_metadata`` with ``ocf_restore_metadata``,
``ocf_slots`` with ``ocf_restore_slot``; ``ocf_children`` and
``ocf_type_name`` stand alone. So an ``nn.Module`` subclass defining
``ocf_metadata`` keeps its parameters as children (ocf.torch's adapter)
and saves its own metadata, and one defining ``ocf_children`` decides its
children itself.

Objects that gain children after a restore started (a layer that builds
its weights on first call) call :func:`attached` when they do, so pending
values reach them (restore-on-create); :class:`Module` does this for every
attribute assignment.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import VALUE as VALUE  # re-exported for the adapters
from ocf.format.object_graph import escape_name as escape_name

# The shape and dtype a restored value must have, and what the target is, for
# messages ("Parameter"): ocf_expected_tensors.
Expected = tuple[tuple[int, ...], np.dtype[Any], str]
_SCALARS = (bool, int, float, str, bytes, type(None))


# The protocol's parts: an object defining any method of a part provides the
# whole part, so a value is never saved by one object and restored by another.
_PARTS: tuple[tuple[str, ...], ...] = (
    ("ocf_type_name",), ("ocf_children",),
    ("ocf_tensors", "ocf_restore_tensors", "ocf_expected_tensors", "ocf_tensor_names"),
    ("ocf_metadata", "ocf_restore_metadata", "ocf_check_restore_metadata"),
    ("ocf_slots", "ocf_restore_slot"))
_PART_OF = {method: part for part in _PARTS for method in part}


class Tracked:
    """A uniform view of any trackable object: the protocol with defaults.

    ``obj`` is the live object; ``adapter`` (registered for its type) provides
    the parts of the protocol ``obj`` does not define itself.
    """

    def __init__(self, obj: object, adapter: object | None = None) -> None:
        self.obj = obj
        self.adapter = adapter

    def _provider(self, method: str) -> object:
        if self.adapter is None or any(hasattr(self.obj, m) for m in _PART_OF[method]):
            return self.obj
        return self.adapter

    @property
    def type_name(self) -> str:
        name = getattr(self._provider("ocf_type_name"), "ocf_type_name", None)
        if isinstance(name, str):
            return name
        cls = type(self.obj)
        return f"{cls.__module__}.{cls.__qualname__}"

    def children(self) -> Mapping[str, object]:
        children: Mapping[str, object] = self._call("ocf_children", {})
        return children

    def tensors(self) -> Mapping[str, np.ndarray]:
        tensors: Mapping[str, np.ndarray] = self._call("ocf_tensors", {})
        return tensors

    def tensor_names(self) -> list[str]:
        """The attribute names of its tensors; their values only when it cannot say."""
        method = self._method("ocf_tensor_names")
        return list(self.tensors() if method is None else method())

    def restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        method = self._method("ocf_restore_tensors")
        if method is not None:
            method(values)

    def expected_tensors(self) -> Mapping[str, Expected]:
        expected: Mapping[str, Expected] = self._call("ocf_expected_tensors", {})
        return expected

    def metadata(self) -> Mapping[str, MetadataValue]:
        metadata: Mapping[str, MetadataValue] = self._call("ocf_metadata", {})
        return metadata

    def holds_state(self) -> bool:
        """Whether it has metadata to restore: state a strict restore must find."""
        return self._method("ocf_restore_metadata") is not None and bool(self.metadata())

    def restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        method = self._method("ocf_restore_metadata")
        if method is not None:
            method(values)

    def check_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        """Raise what restore_metadata(values) would refuse, changing nothing."""
        method = self._method("ocf_check_restore_metadata")
        if method is not None:
            method(values)

    def slots(self) -> Iterable[tuple[object, str, object]]:
        slots: Iterable[tuple[object, str, object]] = self._call("ocf_slots", ())
        return slots

    def restore_slot(self, variable: object, name: str, values: Mapping[str, np.ndarray]
                     ) -> bool:
        """Hand a saved slot to the object; False when it does not take slots."""
        method = self._method("ocf_restore_slot")
        if method is None:
            return False
        method(variable, name, values)
        return True

    def _method(self, name: str) -> Callable[..., Any] | None:
        method: Callable[..., Any] | None = getattr(self._provider(name), name, None)
        return method

    def _call(self, name: str, default: Any) -> Any:
        method = self._method(name)
        return default if method is None else method()


# -- built-in types -------------------------------------------------------------


class _ArrayAdapter:
    """A NumPy array: a leaf holding one tensor, restored in place."""

    ocf_type_name = "numpy.ndarray"

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: self.array}

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE in values:
            assign_in_place(self.array, values[VALUE])

    def ocf_expected_tensors(self) -> Mapping[str, Expected]:
        return {VALUE: (self.array.shape, self.array.dtype, "array")}


class _DictAdapter:
    """A dict with str keys: trackable values are children, scalars metadata."""

    ocf_type_name = "dict"

    def __init__(self, mapping: dict[Any, Any]) -> None:
        self.mapping = mapping

    def _named(self) -> dict[str, Any]:
        return {escape_name(k): k for k in self.mapping if isinstance(k, str)}

    def ocf_children(self) -> Mapping[str, object]:
        return {n: self.mapping[k] for n, k in self._named().items()
                if is_trackable(self.mapping[k])}

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {n: self.mapping[k] for n, k in self._named().items()
                if isinstance(self.mapping[k], _SCALARS)}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        named = self._named()
        for name, value in values.items():
            key = named.get(name)
            if key is not None and isinstance(self.mapping[key], _SCALARS):
                self.mapping[key] = value


class _SequenceAdapter:
    """A list or tuple: items are children '0', '1', ...; scalar items metadata."""

    def __init__(self, items: list[Any] | tuple[Any, ...]) -> None:
        self.items = items
        self.ocf_type_name = type(items).__name__

    def ocf_children(self) -> Mapping[str, object]:
        return {str(i): x for i, x in enumerate(self.items) if is_trackable(x)}

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {str(i): x for i, x in enumerate(self.items) if isinstance(x, _SCALARS)}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        if not isinstance(self.items, list):
            return  # a tuple cannot change; its scalars stay as they are
        for name, value in values.items():
            i = int(name) if name.isdigit() else -1
            if 0 <= i < len(self.items) and isinstance(self.items[i], _SCALARS):
                self.items[i] = value


_ADAPTERS: dict[type, Callable[[Any], object]] = {
    np.ndarray: _ArrayAdapter,
    dict: _DictAdapter,
    list: _SequenceAdapter,
    tuple: _SequenceAdapter,
}


def register_adapter(cls: type, adapter: Callable[[Any], object]) -> None:
    """Make instances of ``cls`` trackable through ``adapter(instance)``, an object
    implementing the protocol (for types one cannot add methods to)."""
    _ADAPTERS[cls] = adapter


def _protocol_object(obj: object) -> object | None:
    for cls in type(obj).__mro__:
        adapter = _ADAPTERS.get(cls)
        if adapter is not None:
            return adapter(obj)
    return None


def track(obj: object) -> Tracked:
    """The protocol view of ``obj``: its own methods, then its type's adapter."""
    return Tracked(obj, _protocol_object(obj))


def is_trackable(obj: object) -> bool:
    """Whether ``obj`` becomes a node: it implements the protocol or has an adapter."""
    if isinstance(obj, _SCALARS):
        return False
    return any(hasattr(obj, m) for m in ("ocf_children", "ocf_tensors", "ocf_slots")) or \
        any(cls in _ADAPTERS for cls in type(obj).__mro__)


def is_metadata(obj: object) -> bool:
    """Whether ``obj`` is saved as a node's metadata (a Python scalar)."""
    return isinstance(obj, _SCALARS)


def assign_in_place(target: np.ndarray, value: np.ndarray) -> None:
    """Copy a restored value into an existing array; shape and dtype must match."""
    if target.shape != value.shape or target.dtype != value.dtype:
        raise InvalidError(f"cannot restore a {value.dtype} array of shape "
                           f"{list(value.shape)} into a {target.dtype} array of shape "
                           f"{list(target.shape)}")
    np.copyto(target, value)


# -- restore-on-create ---------------------------------------------------------

# Objects waiting for children that do not exist yet, with a callback per
# child name. Weak keys: a pending restore never keeps an object alive.
_PENDING: weakref.WeakKeyDictionary[object, dict[str, list[Callable[[object], None]]]] = \
    weakref.WeakKeyDictionary()


def defer(parent: object, name: str, callback: Callable[[object], None]) -> bool:
    """Run ``callback(child)`` when ``parent`` gains the child ``name``.

    False when ``parent`` cannot announce new children (it is not weakly
    referenceable, like a dict), so nothing can wait on it.
    """
    try:
        _PENDING.setdefault(parent, {}).setdefault(name, []).append(callback)
    except TypeError:
        return False
    return True


def attached(parent: object, name: str, child: object) -> None:
    """Announce that ``parent`` now holds ``child`` under ``name``.

    Objects that create children lazily call this (Module does on every
    attribute assignment); values a restore holds for that child are
    applied now.
    """
    try:
        waiting = _PENDING.get(parent)
    except TypeError:
        return
    if not waiting or name not in waiting:
        return
    for callback in waiting.pop(name):
        callback(child)
    if not waiting:
        _PENDING.pop(parent, None)


# -- built-in trackable classes --------------------------------------------------


class Variable:
    """A holder of one array, saved as the node's tensor ``value``.

    Restoring copies into the existing array when shape and dtype match,
    so views of ``value`` see the restored values.

    Examples:
        >>> kernel = ocf.Variable(np.zeros((3, 2)))
        >>> kernel.value[...] = 1.5  # restores write into .value in place
        >>> ocf.Checkpoint(kernel=kernel).save("ckpt")
    """

    ocf_type_name = "ocf.Variable"

    def __init__(self, value: object) -> None:
        self.value = np.array(value)

    def ocf_tensors(self) -> Mapping[str, np.ndarray]:
        return {VALUE: self.value}

    def ocf_tensor_names(self) -> Iterable[str]:
        return (VALUE,)

    def ocf_restore_tensors(self, values: Mapping[str, np.ndarray]) -> None:
        if VALUE in values:
            assign_in_place(self.value, values[VALUE])

    def ocf_expected_tensors(self) -> Mapping[str, Expected]:
        return {VALUE: (self.value.shape, self.value.dtype, "ocf.Variable")}

    def __repr__(self) -> str:
        return f"ocf.Variable({self.value!r})"


class Module:
    """A base class that tracks what it is given, as tf.Module does.

    Assigning a trackable value to a public attribute (``self.dense =
    Dense(...)``) makes an edge named after the attribute; public scalar
    attributes (int, float, str, bytes, bool, None) are saved as the node's
    metadata, and numbers, bools and None are restored. Attributes starting
    with "_" are not tracked.

    Examples:
        >>> class Dense(ocf.Module):
        ...     def __init__(self, units):
        ...         self.units = units  # saved as an attribute of the object
        ...         self.kernel = ocf.Variable(np.zeros((3, units)))  # an edge "kernel"
        >>> ocf.Checkpoint(layer=Dense(2)).save("ckpt")
    """

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if not name.startswith("_") and is_trackable(value):
            attached(self, name, value)

    def ocf_children(self) -> Mapping[str, object]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and is_trackable(v)}

    def ocf_metadata(self) -> Mapping[str, MetadataValue]:
        return {k: v for k, v in vars(self).items()
                if not k.startswith("_") and isinstance(v, _SCALARS)}

    def ocf_restore_metadata(self, values: Mapping[str, MetadataValue]) -> None:
        # Numbers are state (step counters, schedules); strings are usually
        # identity or configuration (a layer's name), which a restore keeps.
        for name, value in values.items():
            if not name.startswith("_") and isinstance(value, (bool, int, float, type(None))):
                object.__setattr__(self, name, value)
