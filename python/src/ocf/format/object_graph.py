"""The object graph of a checkpoint: checks, canonical paths and flat keys.

spec/objects.md. A checkpoint's object graph is a list of nodes, node 0 the
root, each with named child edges, named references to tensors and slot
variables. :func:`decode_graph` checks a stored graph completely before
anything uses it; :func:`canonical_paths` gives every node the path from
which writers derive tensor keys [R-GRAPH-007], so that every object-based
checkpoint is also readable by name.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ocf.format.errors import InvalidError, LimitExceededError
from ocf.format.limits import MAX_NODES
from ocf.format.metadata import NODE_METADATA_LEVEL, MetadataValue, decode_map, encode_map
from ocf.v1 import object_graph_pb2

SLOT_COMPONENT = ".slot"
# The attribute under which a variable's value is stored (spec/objects.md).
VALUE = "value"


@dataclass(frozen=True, slots=True)
class SlotRef:
    """A slot variable: ``slot_node`` holds ``name`` of variable ``variable``."""

    variable: int
    name: str
    slot_node: int


@dataclass(slots=True)
class Node:
    """One checked node of an object graph."""

    children: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)  # name -> tensor key
    slots: list[SlotRef] = field(default_factory=list)
    type_name: str = ""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Origin:
    """How a node gets its canonical path: an edge of ``parent`` named ``name``,
    or (``variable`` set) the slot ``name`` of ``variable`` kept by ``parent``."""

    parent: int
    name: str
    variable: int | None = None


@dataclass
class ObjectGraph:
    """A checked object graph; canonical paths are built on demand.

    Building every path up front would cost memory quadratic in the depth
    of the graph, which a small hostile file could exploit.
    """

    nodes: list[Node]
    origins: list[Origin | None]  # None for the root

    def path(self, node: int) -> str:
        """The canonical path of ``node`` [R-GRAPH-007].

        Built from the node's origins each time, in memory linear in its
        depth: keeping every prefix would cost memory quadratic in it.
        """
        parts: list[str] = []
        origin = self.origins[node]
        while origin is not None:
            parts.append(origin.name)
            if origin.variable is not None:  # the variable was reached by edges
                parts.append(self.path(origin.variable))
                parts.append(SLOT_COMPONENT)
            origin = self.origins[origin.parent]
        return _join(*reversed(parts))

    def path_end(self, node: int, limit: int) -> str:
        """The canonical path of ``node`` if at most ``limit`` characters long, else
        "..." and its last components: time and memory O(limit), whatever the depth."""
        parts: list[str] = []
        size = 0
        for part in self._components_from_the_end(node):
            if size + len(part) + 3 > limit:
                parts.append("...")
                break
            parts.append(part)
            size += len(part) + 1
        return "/".join(reversed(parts))

    def _components_from_the_end(self, node: int) -> Iterator[str]:
        """The components of ``node``'s canonical path, last first."""
        origin = self.origins[node]
        while origin is not None:
            yield origin.name
            if origin.variable is not None:  # reached by edges: no slot in its path
                yield from self._components_from_the_end(origin.variable)
                yield SLOT_COMPONENT
            origin = self.origins[origin.parent]

    def node_at(self, path: Sequence[str]) -> int | None:
        """The node reached from the root along child edges named ``path``."""
        node = 0
        for name in path:
            child = self.nodes[node].children.get(name)
            if child is None:
                return None
            node = child
        return node


def check_name(name: str, what: str) -> str | None:
    """Why ``name`` is not a valid edge, attribute or slot name, or None [R-GRAPH-003]."""
    if not name or "\0" in name or "/" in name or name.startswith("."):
        return f"{what} {name!r} is empty, contains NUL or '/', or starts with '.'"
    return None


def attribute_key(path: str, name: str) -> str:
    """The flat key of attribute ``name`` of the node at canonical ``path``."""
    return f"{path}/.{name}" if path else f".{name}"


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


# Marks nodes that the root does not reach, in the result of origins().
UNREACHED = Origin(-1, "")


def origins(nodes: Sequence[Node]) -> list[Origin | None]:
    """How each node gets its canonical path: None for the root, UNREACHED for nodes
    the root does not reach.

    Breadth-first from the root along child edges in their stored order.
    Then, visiting nodes in id order and their slot variables in stored
    order, a slot node not reached yet gets its path from the slot, provided
    the slot's variable was reached by child edges [R-GRAPH-006].
    """
    found: list[Origin | None] = [UNREACHED] * len(nodes)
    found[0] = None
    queue: deque[int] = deque([0])
    while queue:
        u = queue.popleft()
        for name, v in nodes[u].children.items():
            if found[v] is UNREACHED:
                found[v] = Origin(u, name)
                queue.append(v)
    by_edges = [f is not UNREACHED for f in found]
    for u, node in enumerate(nodes):
        if not by_edges[u]:
            continue
        for slot in node.slots:
            if found[slot.slot_node] is UNREACHED and by_edges[slot.variable]:
                found[slot.slot_node] = Origin(u, slot.name, slot.variable)
    return found


def canonical_paths(nodes: Sequence[Node]) -> list[str | None]:
    """The canonical path of every node; None for nodes the root does not reach."""
    found = origins(nodes)
    graph = ObjectGraph(list(nodes), found)
    return [None if found[i] is UNREACHED else graph.path(i) for i in range(len(nodes))]


def decode_graph(message: object_graph_pb2.ObjectGraph, tensor_keys: Mapping[str, object],
                 path: str, odd_metadata_nodes: Collection[int] = frozenset()) -> ObjectGraph:
    """Check a stored object graph against the index's tensors [R-GRAPH-001..006].

    ``odd_metadata_nodes`` are the nodes whose metadata holds a map entry with a field
    other than key and value on the wire (ocf.format.map_entries); G3d refuses the first
    [R-META-001]. A graph built in memory has none."""
    # Counted, then walked one node at a time: a list of a million protobuf wrappers
    # at once is what ran out of memory (and crashed protobuf's C extension) before.
    count = len(message.nodes)
    if not count:
        raise InvalidError("object graph has no nodes; node 0 must be the root", path=path,
                           requirement="R-GRAPH-001")
    if count > MAX_NODES:
        raise LimitExceededError(f"object graph has {count} nodes, above the limit of "
                                 f"{MAX_NODES}", path=path, requirement="R-LIMIT-002")
    used_keys: set[str] = set()
    nodes = [_decode_node(i, n, count, tensor_keys, used_keys, path, i in odd_metadata_nodes)
             for i, n in enumerate(message.nodes)]
    for owner, node in enumerate(nodes):
        for slot in node.slots:
            held = nodes[slot.slot_node]
            if held.children or held.slots:
                raise InvalidError(f"node {owner}: slot variable node {slot.slot_node} has "
                                   "child edges or slot variables of its own", path=path,
                                   requirement="R-GRAPH-006")
    found = origins(nodes)
    unreached = [i for i, origin in enumerate(found) if origin is UNREACHED]
    if unreached:
        raise InvalidError(f"nodes {unreached[:10]} cannot be reached from the root (a slot "
                           "variable is reached only when its variable is reached by child "
                           "edges)", path=path, requirement="R-GRAPH-005")
    return ObjectGraph(nodes, found)


class _EmptyDict(dict):  # type: ignore[type-arg]
    """An empty dict that refuses to change: one is shared by every decoded node without
    attributes or metadata, so that a graph of many bare nodes (a deep chain in a
    hostile file) does not pay for a dict per node and field."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("the nodes of a decoded object graph do not change")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    update = setdefault = pop = popitem = clear = _refuse  # type: ignore[assignment]


class _EmptyList(list):  # type: ignore[type-arg]
    """An empty list that refuses to change, shared as :class:`_EmptyDict` is."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("the nodes of a decoded object graph do not change")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse


_NO_ATTRIBUTES: dict[str, str] = _EmptyDict()
_NO_METADATA: dict[str, MetadataValue] = _EmptyDict()
_NO_SLOTS: list[SlotRef] = _EmptyList()


def _decode_node(i: int, stored: object_graph_pb2.ObjectNode, count: int,
                 tensor_keys: Mapping[str, object], used_keys: set[str], path: str,
                 odd_metadata: bool) -> Node:
    def fail(message: str, requirement: str) -> InvalidError:
        return InvalidError(f"node {i}: {message}", path=path, requirement=requirement)

    node = Node(type_name=stored.type_name)
    for child in stored.children:
        problem = check_name(child.name, "edge name")
        if problem or child.name in node.children:
            raise fail(problem or f"edge name {child.name!r} appears twice", "R-GRAPH-003")
        if child.node_id >= count:
            raise fail(f"edge {child.name!r} leads to node {child.node_id}, which does not "
                       "exist", "R-GRAPH-002")
        node.children[child.name] = child.node_id
    for attribute in stored.attributes:
        problem = check_name(attribute.name, "attribute name")
        if problem or attribute.name in node.attributes:
            raise fail(problem or f"attribute {attribute.name!r} appears twice", "R-GRAPH-003")
        if attribute.key not in tensor_keys:
            raise fail(f"attribute {attribute.name!r} names tensor {attribute.key!r}, which "
                       "the index does not hold", "R-GRAPH-004")
        if attribute.key in used_keys:
            raise fail(f"tensor {attribute.key!r} is the attribute of two nodes", "R-GRAPH-004")
        used_keys.add(attribute.key)
        node.attributes[attribute.name] = attribute.key
    seen: set[tuple[int, str]] = set()
    for slot in stored.slot_variables:
        problem = check_name(slot.slot_name, "slot name")
        pair = (slot.original_variable_node_id, slot.slot_name)
        if problem or pair in seen:
            raise fail(problem or f"slot {slot.slot_name!r} of node "
                       f"{slot.original_variable_node_id} appears twice", "R-GRAPH-006")
        if max(slot.original_variable_node_id, slot.slot_variable_node_id) >= count:
            raise fail("slot variable names a node that does not exist", "R-GRAPH-006")
        seen.add(pair)
        node.slots.append(SlotRef(*pair, slot.slot_variable_node_id))
    if odd_metadata:
        raise fail("a map entry of its metadata holds a field other than its key and value",
                   "R-META-001")
    try:
        node.metadata = decode_map(stored.metadata) if stored.metadata else _NO_METADATA
    except LimitExceededError as exc:
        raise LimitExceededError(f"node {i}: {exc.detail}", path=path,
                                 requirement=exc.requirement) from None
    if not node.attributes:
        node.attributes = _NO_ATTRIBUTES
    if not node.slots:
        node.slots = _NO_SLOTS
    return node


def encode_graph(nodes: Sequence[Node], out: object_graph_pb2.ObjectGraph) -> None:
    """Store ``nodes`` into the protobuf ``out``."""
    for node in nodes:
        stored = out.nodes.add(type_name=node.type_name)
        for name, child in node.children.items():
            stored.children.add(name=name, node_id=child)
        for name, key in node.attributes.items():
            stored.attributes.add(name=name, key=key)
        for slot in node.slots:
            stored.slot_variables.add(original_variable_node_id=slot.variable,
                                      slot_name=slot.name, slot_variable_node_id=slot.slot_node)
        encode_map(node.metadata, stored.metadata, NODE_METADATA_LEVEL)


def escape_name(key: str) -> str:
    """A dict key as an edge name: '%', '/' and NUL percent-encoded, and a leading '.'."""
    if not key:
        raise InvalidError("dict keys stored in a checkpoint must be non-empty strings")
    escaped = key.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    return "%2E" + escaped[1:] if escaped.startswith(".") else escaped
