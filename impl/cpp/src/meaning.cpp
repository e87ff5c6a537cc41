#include "meaning.h"

#include <cmath>
#include <cstdio>

#include "dtypes.h"
#include "graph.h"
#include "json.h"
#include "sha256.h"

namespace ocf {
namespace {

std::string Base64(const std::string& bytes) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t group = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(group >> (6 * k)) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t group = uint32_t(uint8_t(bytes[i])) << 16 | (rest == 2 ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += rest == 2 ? kAlphabet[(group >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// A binary64 as the protocol's hexadecimal float string (C99 %a).
std::string HexFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

std::string TypedValue(const v1::Value& value);

std::string TypedMap(const google::protobuf::Map<std::string, v1::Value>& map) {
  std::string out = "{";
  for (const auto& [key, value] : map) {
    if (out.size() > 1) out += ", ";
    out += Quote(key) + ": " + TypedValue(value);
  }
  return out + "}";
}

std::string TypedValue(const v1::Value& value) {
  switch (value.kind_case()) {
    case v1::Value::kStringValue: return "{\"string\": " + Quote(value.string_value()) + "}";
    case v1::Value::kIntValue: return "{\"int\": \"" + std::to_string(value.int_value()) + "\"}";
    case v1::Value::kFloatValue: return "{\"float\": \"" + HexFloat(value.float_value()) + "\"}";
    case v1::Value::kBoolValue: return value.bool_value() ? "{\"bool\": true}" : "{\"bool\": false}";
    case v1::Value::kBytesValue: return "{\"bytes\": \"" + Base64(value.bytes_value()) + "\"}";
    case v1::Value::kListValue: {
      std::string out = "{\"list\": [";
      for (int k = 0; k < value.list_value().values_size(); ++k) {
        if (k > 0) out += ", ";
        out += TypedValue(value.list_value().values(k));
      }
      return out + "]}";
    }
    case v1::Value::kMapValue: return "{\"map\": " + TypedMap(value.map_value().entries()) + "}";
    case v1::Value::KIND_NOT_SET: break;
  }
  return "null";
}

std::string DescribeTensors(const Checkpoint& checkpoint) {
  std::string out = "{";
  for (size_t i = 0; i < checkpoint.tensor_count(); ++i) {
    const std::string digest = Sha256Hex(checkpoint.CanonicalBytes(i));
    std::string shape = "[";
    for (uint64_t dim : checkpoint.tensor(i).shape) shape += (shape.size() > 1 ? ", " : "") + std::to_string(dim);
    if (i > 0) out += ", ";
    out += Quote(checkpoint.key(i)) + ": {\"dtype\": \"" + DtypeName(checkpoint.dtype(i)) +
           "\", \"shape\": " + shape + "], \"sha256\": \"" + digest + "\"}";
  }
  return out + "}";
}

std::string DescribeNode(const v1::ObjectNode& node, const std::vector<std::string>& paths) {
  std::string children = "{", attributes = "{", slots = "[";
  for (const auto& child : node.children()) {
    children += (children.size() > 1 ? ", " : "") + Quote(child.name()) + ": " + Quote(paths[child.node_id()]);
  }
  for (const auto& attribute : node.attributes()) {
    attributes += (attributes.size() > 1 ? ", " : "") + Quote(attribute.name()) + ": " + Quote(attribute.key());
  }
  for (const auto& slot : node.slot_variables()) {
    slots += (slots.size() > 1 ? ", [" : "[") + Quote(paths[slot.original_variable_node_id()]) + ", " +
             Quote(slot.slot_name()) + ", " + Quote(paths[slot.slot_variable_node_id()]) + "]";
  }
  return "{\"type_name\": " + Quote(node.type_name()) + ", \"children\": " + children +
         "}, \"attributes\": " + attributes + "}, \"slot_variables\": " + slots +
         "], \"metadata\": " + TypedMap(node.metadata()) + "}";
}

std::string DescribeGraph(const v1::Index& index) {
  if (!index.has_object_graph()) return "null";
  const v1::ObjectGraph& graph = index.object_graph();
  const std::vector<std::string> paths = CanonicalPaths(graph);
  std::string out = "{";
  for (int id = 0; id < graph.nodes_size(); ++id) {
    if (id > 0) out += ", ";
    out += Quote(paths[id]) + ": " + DescribeNode(graph.nodes(id), paths);
  }
  return out + "}";
}

}  // namespace

std::string DescribeMeaning(const Checkpoint& checkpoint) {
  return "\"tensors\": " + DescribeTensors(checkpoint) + ", \"metadata\": " +
         TypedMap(checkpoint.index().metadata()) + ", \"object_graph\": " + DescribeGraph(checkpoint.index());
}

}  // namespace ocf
