#include "graph.h"

#include <deque>
#include <set>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "errors.h"
#include "index_checks.h"

namespace ocf {
namespace {

constexpr size_t kMaxNodes = size_t(1) << 24;

// [R-GRAPH-003]: non-empty, no NUL, no '/', not starting with '.'.
bool IsValidName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('\0') == std::string::npos &&
         name.find('/') == std::string::npos;
}

std::string Node(size_t id) { return "node " + std::to_string(id); }

void CheckEdges(const v1::ObjectNode& node, size_t id, size_t node_count) {       // G3a
  std::unordered_set<std::string_view> names;
  for (const auto& child : node.children()) {
    if (!IsValidName(child.name()) || !names.insert(child.name()).second) {
      Fail(Category::kInvalid, "R-GRAPH-003", Node(id) + ": the edge name '" + child.name() + "' is not valid or repeats");
    }
    if (child.node_id() >= node_count) {
      Fail(Category::kInvalid, "R-GRAPH-002", Node(id) + ": edge '" + child.name() + "' leads to no node");
    }
  }
}

void CheckAttributes(const v1::ObjectNode& node, size_t id,
                     const std::unordered_set<std::string_view>& keys,
                     std::unordered_set<std::string_view>* named_keys) {                  // G3b
  std::unordered_set<std::string_view> names;
  for (const auto& attribute : node.attributes()) {
    if (!IsValidName(attribute.name()) || !names.insert(attribute.name()).second) {
      Fail(Category::kInvalid, "R-GRAPH-003",
           Node(id) + ": the attribute name '" + attribute.name() + "' is not valid or repeats");
    }
    if (keys.count(attribute.key()) == 0) {
      Fail(Category::kInvalid, "R-GRAPH-004", Node(id) + ": attribute '" + attribute.name() +
                                                  "' names the key '" + attribute.key() + "', which no tensor has");
    }
    if (!named_keys->insert(attribute.key()).second) {
      Fail(Category::kInvalid, "R-GRAPH-004", Node(id) + ": the tensor '" + attribute.key() + "' is already an attribute");
    }
  }
}

void CheckSlotVariables(const v1::ObjectNode& node, size_t id, size_t node_count) {  // G3c
  std::set<std::pair<uint32_t, std::string_view>> pairs;
  for (const auto& slot : node.slot_variables()) {
    if (!IsValidName(slot.slot_name()) ||
        !pairs.emplace(slot.original_variable_node_id(), slot.slot_name()).second) {
      Fail(Category::kInvalid, "R-GRAPH-006", Node(id) + ": the slot name '" + slot.slot_name() + "' is not valid or repeats");
    }
    if (slot.original_variable_node_id() >= node_count || slot.slot_variable_node_id() >= node_count) {
      Fail(Category::kInvalid, "R-GRAPH-006", Node(id) + ": a slot variable names a node that does not exist");
    }
  }
}

// Steps 1 and 2 of [R-GRAPH-007] marking nodes: true for every reachable node.
std::vector<bool> ReachableNodes(const v1::ObjectGraph& graph) {
  const size_t n = graph.nodes_size();
  std::vector<bool> by_edges(n, false);
  std::deque<uint32_t> queue = {0};
  by_edges[0] = true;
  while (!queue.empty()) {
    uint32_t u = queue.front();
    queue.pop_front();
    for (const auto& child : graph.nodes(u).children()) {
      if (!by_edges[child.node_id()]) {
        by_edges[child.node_id()] = true;
        queue.push_back(child.node_id());
      }
    }
  }
  std::vector<bool> reached = by_edges;
  for (size_t u = 0; u < n; ++u) {
    if (!by_edges[u]) continue;
    for (const auto& slot : graph.nodes(u).slot_variables()) {
      if (by_edges[slot.original_variable_node_id()]) reached[slot.slot_variable_node_id()] = true;
    }
  }
  return reached;
}

std::string Join(std::initializer_list<const std::string*> parts) {
  std::string joined;
  for (const std::string* part : parts) {
    if (part->empty()) continue;
    if (!joined.empty()) joined += '/';
    joined += *part;
  }
  return joined;
}

}  // namespace

void CheckGraph(const v1::Index& index, const MapEntryFaults& faults) {
  const v1::ObjectGraph& graph = index.object_graph();
  const size_t n = graph.nodes_size();
  if (n == 0) Fail(Category::kInvalid, "R-GRAPH-001", "the object graph is present and has no node");   // G1
  if (n > kMaxNodes) Fail(Category::kLimitExceeded, "R-LIMIT-002", "the object graph has over 2^24 nodes");  // G2
  std::unordered_set<std::string_view> keys(index.tensors().keys().begin(), index.tensors().keys().end());
  std::unordered_set<std::string_view> named_keys;
  for (size_t id = 0; id < n; ++id) {                                                      // G3
    const v1::ObjectNode& node = graph.nodes(id);
    CheckEdges(node, id, n);
    CheckAttributes(node, id, keys, &named_keys);
    CheckSlotVariables(node, id, n);
    if (faults.nodes.count(id)) {                                                          // G3d
      Fail(Category::kInvalid, "R-META-001", Node(id) + ": a map entry of its metadata holds a field other than its key and value");
    }
    CheckMetadataDepth(node.metadata(), Node(id) + " metadata");
  }
  for (size_t id = 0; id < n; ++id) {                                                      // G4
    for (const auto& slot : graph.nodes(id).slot_variables()) {
      const v1::ObjectNode& slot_node = graph.nodes(slot.slot_variable_node_id());
      if (slot_node.children_size() > 0 || slot_node.slot_variables_size() > 0) {
        Fail(Category::kInvalid, "R-GRAPH-006",
             Node(slot.slot_variable_node_id()) + " is a slot node and has child edges or slot variables");
      }
    }
  }
  std::vector<bool> reached = ReachableNodes(graph);                              // G5
  for (size_t id = 0; id < n; ++id) {
    if (!reached[id]) Fail(Category::kInvalid, "R-GRAPH-005", Node(id) + " is not reachable from the root");
  }
}

std::vector<std::string> CanonicalPaths(const v1::ObjectGraph& graph) {
  const size_t n = graph.nodes_size();
  std::vector<std::string> path(n);
  std::vector<bool> has_path(n, false);
  has_path[0] = true;
  std::deque<uint32_t> queue = {0};
  while (!queue.empty()) {                         // step 1: breadth-first
    uint32_t u = queue.front();
    queue.pop_front();
    for (const auto& child : graph.nodes(u).children()) {
      uint32_t v = child.node_id();
      if (has_path[v]) continue;
      path[v] = Join({&path[u], &child.name()});
      has_path[v] = true;
      queue.push_back(v);
    }
  }
  const std::vector<bool> by_edges = has_path;
  static const std::string kSlot = ".slot";
  for (size_t u = 0; u < n; ++u) {                 // step 2: one pass
    if (!by_edges[u]) continue;
    for (const auto& slot : graph.nodes(u).slot_variables()) {
      uint32_t s = slot.slot_variable_node_id(), variable = slot.original_variable_node_id();
      if (has_path[s] || !by_edges[variable]) continue;
      path[s] = Join({&path[u], &kSlot, &path[variable], &slot.slot_name()});
      has_path[s] = true;
    }
  }
  return path;
}

}  // namespace ocf
