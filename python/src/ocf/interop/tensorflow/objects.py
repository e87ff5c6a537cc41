"""TensorFlow's object graph as an OCF object graph, and back (spec/tensorflow.md).

A ``tf.train.Checkpoint`` stores its object graph as a serialized
``TrackableObjectGraph`` in the scalar string tensor
``_CHECKPOINTABLE_OBJECT_GRAPH``. It has the same shape as OCF's graph
(spec/objects.md): node 0 the root, named child edges, attributes naming
bundle keys, and slot variables as (variable, slot name, slot node). The
mapping is therefore node for node, edge for edge:

- Node ids, the order of edges, attributes and slot variables are kept.
- Attribute ``VARIABLE_VALUE`` (a variable's value) is OCF's ``value``, so
  a TensorFlow variable restores into an ``ocf.Variable`` or NumPy array;
  a TensorFlow attribute literally named ``value`` becomes ``%76alue``.
- Names that OCF does not allow ([R-GRAPH-003]: empty, containing "/" or
  NUL, starting with ".") are percent-encoded the way ``ocf.objects.tracking``
  stores dict keys (``%`` -> ``%25``, ``/`` -> ``%2F``, NUL -> ``%00``, a
  leading ``.`` -> ``%2E``), and the empty name is ``%``; decoding inverts
  it, so ``tf -> ocf -> tf`` gives back every name.
- Attribute keys stay TensorFlow's bundle keys. Each attribute's TF1
  ``full_name`` is kept in the node's metadata under
  ``tensorflow.full_names`` and a ``registered_saver`` under
  ``tensorflow.registered_saver``, so that converting back restores them.

In the other direction, :func:`tensorflow_keys` gives every tensor of an
OCF graph a bundle key: a key that came from TensorFlow is kept; a key that
OCF derived from the canonical path [R-GRAPH-007] is replaced by the key
TensorFlow would derive for the same object
(``path/.ATTRIBUTES/VARIABLE_VALUE``, slots under ``.OPTIMIZER_SLOT``), so
TensorFlow's name-based tools find it where they expect it.

A TensorFlow graph is checked with every rule an OCF reader applies to its
own graphs (:func:`ocf.format.object_graph.decode_graph`) before anything uses it, so a
hostile ``_CHECKPOINTABLE_OBJECT_GRAPH`` gets the error categories an OCF
file would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import cast

from google.protobuf.message import DecodeError

from ocf.format.errors import InvalidError, LimitExceededError, MalformedError
from ocf.format.limits import MAX_INDEX_BYTES, MAX_NODES
from ocf.format.metadata import MetadataValue
from ocf.format.object_graph import (
    VALUE,
    Node,
    ObjectGraph,
    SlotRef,
    attribute_key,
    decode_graph,
    encode_graph,
    escape_name,
)
from ocf.interop.tensorflow.bundle_reader import BundleReader
from ocf.tensorflow.v1.trackable_object_graph_pb2 import TrackableObjectGraph
from ocf.v1 import object_graph_pb2

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VARIABLE_VALUE = "VARIABLE_VALUE"
FULL_NAMES = "tensorflow.full_names"
REGISTERED_SAVER = "tensorflow.registered_saver"
# OCF's name for a TensorFlow attribute literally called "value" (its "v" encoded).
_LITERAL_VALUE = "%76alue"
_EMPTY_NAME = "%"  # a literal "%" is always encoded, so this stands for "" alone
_DECODE = re.compile(r"%(25|2F|00)|^%2E")
_DECODED = {"%25": "%", "%2F": "/", "%00": "\0", "%2E": "."}
# TensorFlow's key components (tensorflow/python/trackable/trackable_utils.py).
_ATTRIBUTES = ".ATTRIBUTES"
_OPTIMIZER_SLOT = ".OPTIMIZER_SLOT"

TFObject = TrackableObjectGraph.TrackableObject


# -- names ------------------------------------------------------------------------


def to_ocf_name(name: str) -> str:
    """An edge or slot name of TensorFlow as a valid OCF name [R-GRAPH-003]."""
    return _EMPTY_NAME if name == "" else escape_name(name)


def to_tf_name(name: str) -> str:
    """The TensorFlow name of an OCF edge or slot name (inverse of :func:`to_ocf_name`)."""
    if name == _EMPTY_NAME:
        return ""
    return _DECODE.sub(lambda m: _DECODED[m.group(0)], name)


def to_ocf_attribute(name: str) -> str:
    """A TensorFlow attribute name as an OCF attribute name."""
    if name == VARIABLE_VALUE:
        return VALUE
    return _LITERAL_VALUE if name == VALUE else to_ocf_name(name)


def to_tf_attribute(name: str) -> str:
    """The TensorFlow attribute name of an OCF attribute name."""
    if name == VALUE:
        return VARIABLE_VALUE
    return VALUE if name == _LITERAL_VALUE else to_tf_name(name)


def tf_escape(name: str) -> str:
    """TensorFlow's escape_local_name: "." doubled, "/" as ".S", for key components."""
    return name.replace(".", "..").replace("/", ".S")


# -- TensorFlow -> OCF --------------------------------------------------------------


def parse_tf_graph(data: bytes, path: str) -> TrackableObjectGraph:
    """The TrackableObjectGraph stored in ``data``."""
    graph = TrackableObjectGraph()
    try:
        graph.ParseFromString(data)
    except (DecodeError, RecursionError) as exc:
        raise MalformedError(f"{OBJECT_GRAPH_KEY} is not a TrackableObjectGraph: {exc}",
                             path=path, key=OBJECT_GRAPH_KEY) from None
    return graph


def read_tf_graph(bundle: BundleReader, keys: Iterable[str]) -> ObjectGraph | None:
    """The checked OCF graph of the bundle's ``_CHECKPOINTABLE_OBJECT_GRAPH`` whose
    attributes name tensors among ``keys``; None when the bundle has no graph."""
    if OBJECT_GRAPH_KEY not in bundle:
        return None
    path = bundle.index_path
    entry = bundle.entry(OBJECT_GRAPH_KEY)
    # The graph becomes part of an OCF index, and is parsed whole: bound it the same way
    # before reading it.
    if entry.slices is None and entry.size > MAX_INDEX_BYTES:
        raise LimitExceededError(f"{OBJECT_GRAPH_KEY} is {entry.size} bytes, above the "
                                 f"index limit of {MAX_INDEX_BYTES}", path=path,
                                 key=OBJECT_GRAPH_KEY, requirement="R-LIMIT-001")
    value = bundle.read(OBJECT_GRAPH_KEY)
    if value.shape != () or value.dtype != object or not isinstance(value.item(), bytes):
        raise InvalidError(f"{OBJECT_GRAPH_KEY} must be a scalar string, not "
                           f"{entry.dtype_name}{list(value.shape)}", path=path,
                           key=OBJECT_GRAPH_KEY)
    return decode_tf_graph(cast(bytes, value.item()), keys, path)


def ocf_nodes(graph: TrackableObjectGraph, path: str) -> list[Node]:
    """The OCF nodes of a TensorFlow graph, one per TensorFlow node, unchecked
    beyond what the conversion itself needs (node ids in range, distinct names)."""
    count = len(graph.nodes)
    if count > MAX_NODES:
        raise LimitExceededError(f"{OBJECT_GRAPH_KEY} has {count} nodes, above the limit of "
                                 f"{MAX_NODES}", path=path, requirement="R-LIMIT-002")
    return [_ocf_node(i, stored, count, path) for i, stored in enumerate(graph.nodes)]


def _ocf_node(i: int, stored: TFObject, count: int, path: str) -> Node:
    def fail(message: str) -> InvalidError:
        return InvalidError(f"{OBJECT_GRAPH_KEY} node {i}: {message}", path=path)

    node = Node()
    for child in stored.children:
        name = to_ocf_name(child.local_name)
        if not 0 <= child.node_id < count:
            raise fail(f"edge {child.local_name!r} leads to node {child.node_id}, which does "
                       "not exist")
        if name in node.children:
            raise fail(f"edge name {child.local_name!r} appears twice")
        node.children[name] = child.node_id
    full_names: dict[str, MetadataValue] = {}
    for attribute in stored.attributes:
        name = to_ocf_attribute(attribute.name)
        if name in node.attributes:
            raise fail(f"attribute {attribute.name!r} appears twice")
        node.attributes[name] = attribute.checkpoint_key
        if attribute.full_name:
            full_names[name] = attribute.full_name
    for slot in stored.slot_variables:
        ids = (slot.original_variable_node_id, slot.slot_variable_node_id)
        if not all(0 <= n < count for n in ids):
            raise fail(f"slot variable {slot.slot_name!r} names node {ids}, which does not "
                       "exist")
        node.slots.append(SlotRef(ids[0], to_ocf_name(slot.slot_name), ids[1]))
    if full_names:
        node.metadata[FULL_NAMES] = full_names
    if stored.HasField("registered_saver"):
        saver = stored.registered_saver
        node.metadata[REGISTERED_SAVER] = {"name": saver.name, "object_name": saver.object_name}
    return node


def check_nodes(nodes: list[Node], keys: Iterable[str], path: str) -> ObjectGraph:
    """``nodes`` checked as an OCF reader checks a stored graph [R-GRAPH-001..006]."""
    message = object_graph_pb2.ObjectGraph()
    encode_graph(nodes, message)
    return decode_graph(message, dict.fromkeys(keys), path)


def decode_tf_graph(data: bytes, keys: Iterable[str], path: str) -> ObjectGraph:
    """The checked OCF graph of a serialized TrackableObjectGraph whose attributes
    name tensors among ``keys``."""
    return check_nodes(ocf_nodes(parse_tf_graph(data, path), path), keys, path)


# -- OCF -> TensorFlow --------------------------------------------------------------


def tensorflow_keys(graph: ObjectGraph | None, keys: Iterable[str]) -> dict[str, str]:
    """The bundle key of every OCF tensor key.

    Attributes whose key OCF derived from the node's canonical path get the
    key TensorFlow derives for that object; every other key (TensorFlow's
    own, after a conversion from TensorFlow, or a tensor outside the graph)
    is kept as it is.
    """
    result = {key: key for key in keys}
    if graph is not None:
        tf_paths = _TFPaths(graph)
        for node_id, node in enumerate(graph.nodes):
            for name, key in node.attributes.items():
                if key == attribute_key(graph.path(node_id), name):
                    result[key] = (f"{tf_paths.path(node_id)}/{_ATTRIBUTES}/"
                                   f"{tf_escape(to_tf_attribute(name))}")
    taken: dict[str, str] = {}
    for key, tf_key in result.items():
        if tf_key in taken or tf_key == OBJECT_GRAPH_KEY:
            other = taken.get(tf_key, OBJECT_GRAPH_KEY)
            raise InvalidError(f"tensors {other!r} and {key!r} would both be stored under "
                               f"the TensorFlow key {tf_key!r}", key=key)
        taken[tf_key] = key
    return result


class _TFPaths:
    """TensorFlow's object path of each node: escaped edge names from the root, and for a
    slot reached only as a slot ``<variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot>``
    (tensorflow/python/checkpoint/util.py). Memoized; built without recursion."""

    def __init__(self, graph: ObjectGraph) -> None:
        self.graph = graph
        self.known: dict[int, str] = {0: ""}

    def path(self, node: int) -> str:
        chain = []
        current = node
        while current not in self.known:
            chain.append(current)
            origin = self.graph.origins[current]
            assert origin is not None  # only the root has none, and it is known
            current = origin.parent
        for child in reversed(chain):
            origin = self.graph.origins[child]
            assert origin is not None
            name = tf_escape(to_tf_name(origin.name))
            if origin.variable is None:
                parent = self.known[origin.parent]
                self.known[child] = f"{parent}/{name}" if parent else name
            else:  # a slot: the variable and the optimizer are both reached by edges
                self.known[child] = (f"{self.path(origin.variable)}/{_OPTIMIZER_SLOT}/"
                                     f"{self.known[origin.parent]}/{name}")
        return self.known[node]


def tf_graph(graph: ObjectGraph, keys: Mapping[str, str]) -> TrackableObjectGraph:
    """The TrackableObjectGraph of ``graph``, its attributes naming ``keys[ocf key]``."""
    result = TrackableObjectGraph()
    for i, node in enumerate(graph.nodes):
        stored = result.nodes.add()
        _fill_tf_node(i, node, stored, keys)
    _mark_values(result)
    return result


def _fill_tf_node(i: int, node: Node, stored: TFObject, keys: Mapping[str, str]) -> None:
    locals_ = _tf_names(i, node.children, to_tf_name, "edges", "name")
    for local, child in zip(locals_, node.children.values()):
        stored.children.add(node_id=child, local_name=local)
    full_names = node.metadata.get(FULL_NAMES)
    full = full_names if isinstance(full_names, dict) else {}
    tf_names = _tf_names(i, node.attributes, to_tf_attribute, "attributes", "attribute")
    for tf_name, (name, key) in zip(tf_names, node.attributes.items()):
        full_name = full.get(name)
        stored.attributes.add(name=tf_name, checkpoint_key=keys[key],
                              full_name=full_name if isinstance(full_name, str) else "")
    for slot in node.slots:
        stored.slot_variables.add(original_variable_node_id=slot.variable,
                                  slot_name=to_tf_name(slot.name),
                                  slot_variable_node_id=slot.slot_node)
    saver = node.metadata.get(REGISTERED_SAVER)
    if isinstance(saver, dict):
        stored.registered_saver.name = str(saver.get("name", ""))
        stored.registered_saver.object_name = str(saver.get("object_name", ""))


def _tf_names(i: int, names: Iterable[str], convert: Callable[[str], str], plural: str,
              singular: str) -> list[str]:
    """TensorFlow's names for ``names`` of node ``i``, refusing two that become one."""
    converted: dict[str, str] = {}
    for name in names:
        tf_name = convert(name)
        if tf_name in converted:
            raise InvalidError(f"node {i}: {plural} {name!r} and {converted[tf_name]!r} both "
                               f"become the TensorFlow {singular} {tf_name!r}")
        converted[tf_name] = name
    return list(converted)


def _mark_values(graph: TrackableObjectGraph) -> None:
    """Set ``has_checkpoint_values`` as TensorFlow does: true for nodes that save
    something (attributes, slot variables, a registered saver) and for every node
    from which such a node is reached by child edges. TensorFlow's restore skips
    children that it says have no values."""
    parents: dict[int, list[int]] = {}
    for i, node in enumerate(graph.nodes):
        for child in node.children:
            parents.setdefault(child.node_id, []).append(i)
    todo = [i for i, node in enumerate(graph.nodes)
            if node.attributes or node.slot_variables or node.HasField("registered_saver")]
    marked = set(todo)
    while todo:
        for parent in parents.get(todo.pop(), []):
            if parent not in marked:
                marked.add(parent)
                todo.append(parent)
    for i, node in enumerate(graph.nodes):
        node.has_checkpoint_values.value = i in marked
