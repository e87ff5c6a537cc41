"""``ocf diff A B``: what differs between two checkpoints, of any formats OCF reads.

Compared, in order: tensor keys (only in A, only in B); for keys in both,
dtype and shape; for tensors of one shape, their values; the checkpoints'
metadata (as OCF holds it, so a safetensors file and its OCF conversion
compare equal; keys recording only a layout, like ``safetensors.order``, are
storage and not compared); and the object graphs, walked from both roots at once along
edges of the same name. A TensorFlow checkpoint and its OCF conversion
compare equal: both are read through ocf.interop.registry.

Values are equal as numbers: NaN equals NaN and -0.0 equals 0.0; with
``rtol``/``atol`` elements within ``atol + rtol * |b|`` are equal too
(``numpy.isclose``). Tensors of different dtypes but one shape are compared
as float64 (complex128). For each tensor that differs the report gives the
number of differing elements and the largest absolute and relative
(``|a - b| / |b|``) differences over elements finite in both.

Each tensor is read in pieces (ocf.format.pieces) from both sides at once:
memory holds two pieces and their float64 copies, never two whole tensors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import ObjectGraph
from ocf.format.pieces import Piece, pieces, whole
from ocf.format.source import AnySource, TensorView

# float64 bytes per piece, per side.
PIECE_BYTES = 8 << 20
# Metadata recording only how a format laid the tensors out (the order of a safetensors
# file's data buffer), which is storage like OCF's layout and codecs: not compared.
LAYOUT_METADATA = frozenset({"safetensors.order"})


@dataclass
class TensorDiff:
    """A tensor present on both sides that differs."""

    key: str
    dtypes: tuple[str, str]
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    elements: int | None = None  # compared; None when the shapes differ
    differing: int | None = None
    max_abs: float | None = None
    max_rel: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "dtype": list(self.dtypes),
                "shape": [list(self.shapes[0]), list(self.shapes[1])],
                "elements": self.elements, "differing": self.differing,
                "max_abs_diff": self.max_abs, "max_rel_diff": self.max_rel}


@dataclass
class Difference:
    """A metadata entry or object-graph detail that differs; ``a``/``b`` absent as None."""

    where: str  # the metadata key, or the object's path ("" for the root)
    what: str  # "value", or for objects "type", "metadata", "child", "attribute", "slot"
    a: Any
    b: Any

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "what": self.what, "a": self.a, "b": self.b}


@dataclass
class Report:
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    tensors: list[TensorDiff] = field(default_factory=list)
    compared: int = 0
    metadata: list[Difference] = field(default_factory=list)
    objects: list[Difference] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.only_in_a or self.only_in_b or self.tensors or self.metadata
                    or self.objects)


@dataclass(frozen=True)
class Tolerance:
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0


def compare(a: AnySource, b: AnySource, tolerance: Tolerance,
            advance: Callable[[int], object] = lambda n: None) -> Report:
    """Everything that differs between ``a`` and ``b``; ``advance(bytes)`` per piece."""
    report = Report()
    a_keys, b_keys = list(a), set(b)
    in_a = set(a_keys)
    report.only_in_a = [k for k in a_keys if k not in b_keys]
    report.only_in_b = [k for k in b if k not in in_a]
    for key in a_keys:
        if key in b_keys:
            report.compared += 1
            found = compare_tensor(a, b, key, tolerance, advance)
            if found is not None:
                report.tensors.append(found)
    report.metadata = metadata_differences(
        {k: v for k, v in a.metadata.items() if k not in LAYOUT_METADATA},
        {k: v for k, v in b.metadata.items() if k not in LAYOUT_METADATA})
    report.objects = graph_differences(a.object_graph, b.object_graph)
    return report


def comparable_bytes(a: AnySource, b: AnySource, key: str) -> int:
    """What comparing ``key`` reads, for progress bars: its elements in float64."""
    x, y = a.summary(key), b.summary(key)
    return 0 if x.shape != y.shape else int(np.prod(x.shape, dtype=np.int64)) * 8


def compare_tensor(a: AnySource, b: AnySource, key: str, tolerance: Tolerance,
                   advance: Callable[[int], object]) -> TensorDiff | None:
    x, y = a.summary(key), b.summary(key)
    found = TensorDiff(key, (x.dtype.name, y.dtype.name), (x.shape, y.shape))
    if x.shape != y.shape:
        return found
    if (x.dtype.numpy is None) != (y.dtype.numpy is None):  # byte strings against numbers
        return found
    elements = differing = 0
    for piece in _plan(x, y):
        differing += _add_piece(found, a.read_piece(key, piece), b.read_piece(key, piece),
                                tolerance)
        elements += piece.size
        advance(piece.size * 8)
    found.elements, found.differing = elements, differing
    if found.differing == 0 and x.dtype.name == y.dtype.name:
        return None
    return found


def _plan(x: TensorView, y: TensorView) -> Iterator[Piece]:
    x_numpy, y_numpy = x.dtype.numpy, y.dtype.numpy
    if x_numpy is None or y_numpy is None:
        return iter([whole(x.shape)])
    complex_values = x_numpy.kind == "c" or y_numpy.kind == "c"
    return pieces(x.shape, 16 if complex_values else 8, PIECE_BYTES)


def _add_piece(found: TensorDiff, x: np.ndarray, y: np.ndarray, tolerance: Tolerance) -> int:
    """The number of differing elements of a piece; its magnitudes folded into ``found``."""
    if x.dtype == object or y.dtype == object:  # byte strings
        return int(np.count_nonzero(x != y))
    if x.dtype == y.dtype and np.array_equal(_raw(x), _raw(y)):  # the common case, fast
        found.max_abs = found.max_abs or 0.0
        found.max_rel = found.max_rel or 0.0
        return 0
    if x.dtype == y.dtype and x.dtype.kind in "biu":
        same = x == y  # exactly, without a float64 rounding of large integers
        if not tolerance.exact:
            same |= _close(_wide(x), _wide(y), tolerance)
    else:
        xw, yw = _wide(x), _wide(y)
        same = (xw == yw) | (np.isnan(xw) & np.isnan(yw))
        if not tolerance.exact:
            same |= _close(xw, yw, tolerance)
    _add_magnitudes(found, _wide(x), _wide(y))
    return int(x.size - np.count_nonzero(same))


def _raw(values: np.ndarray) -> np.ndarray:
    """The bytes of ``values``: equal bytes are equal values (NaN payloads included)."""
    return np.ascontiguousarray(values).reshape(-1).view(np.uint8)


def _wide(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "c":
        return values.astype(np.complex128)
    return values.astype(np.float64)


def _close(x: np.ndarray, y: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    close: np.ndarray = np.isclose(x, y, rtol=tolerance.rtol, atol=tolerance.atol,
                                   equal_nan=True)
    return close


def _add_magnitudes(found: TensorDiff, x: np.ndarray, y: np.ndarray) -> None:
    """Fold the largest absolute and relative differences of finite pairs into ``found``."""
    both = np.isfinite(x) & np.isfinite(y)
    if not both.any():
        return
    x, y = x[both], y[both]
    gap = np.abs(x - y)
    found.max_abs = max(found.max_abs or 0.0, float(gap.max()))
    scale = np.abs(y)
    nonzero = scale > 0
    if nonzero.any():
        relative = float((gap[nonzero] / scale[nonzero]).max())
        found.max_rel = max(found.max_rel or 0.0, relative)
    elif found.max_rel is None:
        found.max_rel = 0.0 if not gap.any() else None


def metadata_differences(a: dict[str, MetadataValue], b: dict[str, MetadataValue]
                         ) -> list[Difference]:
    keys = list(a) + [k for k in b if k not in a]
    return [Difference(k, "value", a.get(k), b.get(k)) for k in keys
            if k not in a or k not in b or not _same(a[k], b[k])]


def _same(x: object, y: object) -> bool:
    """Metadata equality in which NaN equals NaN and 1 does not equal 1.0 or True."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (x != x and y != y)
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(map(_same, x, y))
    return x == y


def graph_differences(a: ObjectGraph | None, b: ObjectGraph | None) -> list[Difference]:
    """Differences of the object graphs, found by walking both from the root at once.

    Objects are matched by the edges leading to them (child names, slot
    names with the path of their variable), not by node numbers, so two
    checkpoints of one model written in another order compare equal. Each
    pair of matched objects is compared once.
    """
    if a is None or b is None:
        if a is b:
            return []
        return [Difference("", "graph", a is not None, b is not None)]
    found: list[Difference] = []
    queue: deque[tuple[int, int, str]] = deque([(0, 0, "")])
    seen: set[tuple[int, int]] = {(0, 0)}
    while queue:
        i, j, path = queue.popleft()
        for child_i, child_j, child_path in _compare_nodes(a, b, i, j, path, found):
            if (child_i, child_j) not in seen:
                seen.add((child_i, child_j))
                queue.append((child_i, child_j, child_path))
    return found


def _compare_nodes(a: ObjectGraph, b: ObjectGraph, i: int, j: int, path: str,
                   found: list[Difference]) -> Iterator[tuple[int, int, str]]:
    x, y = a.nodes[i], b.nodes[j]
    if x.type_name != y.type_name:
        found.append(Difference(path, "type", x.type_name, y.type_name))
    found.extend(Difference(path, f"metadata {d.where}", d.a, d.b)
                 for d in metadata_differences(x.metadata, y.metadata))
    _compare_names(path, "attribute", x.attributes, y.attributes, found)
    _compare_names(path, "child", x.children, y.children, found, values=False)
    for name in x.children.keys() & y.children.keys():
        yield x.children[name], y.children[name], f"{path}/{name}" if path else name
    x_slots = {(s.name, a.path(s.variable)): s.slot_node for s in x.slots}
    y_slots = {(s.name, b.path(s.variable)): s.slot_node for s in y.slots}
    for slot in sorted(x_slots.keys() - y_slots.keys()):
        found.append(Difference(path, "slot", f"{slot[0]} of {slot[1]}", None))
    for slot in sorted(y_slots.keys() - x_slots.keys()):
        found.append(Difference(path, "slot", None, f"{slot[0]} of {slot[1]}"))
    for slot in x_slots.keys() & y_slots.keys():
        yield x_slots[slot], y_slots[slot], f"{path}[slot {slot[0]} of {slot[1]}]"


def _compare_names(path: str, what: str, x: dict[str, Any], y: dict[str, Any],
                   found: list[Difference], *, values: bool = True) -> None:
    """Names on one side only (and, with ``values``, names whose values differ)."""
    for name in x:
        if name not in y or (values and x[name] != y[name]):
            found.append(Difference(path, f"{what} {name}", x[name] if values else name,
                                    y.get(name) if values else None))
    for name in y:
        if name not in x:
            found.append(Difference(path, f"{what} {name}", None, y[name] if values else name))
