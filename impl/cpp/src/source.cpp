#include "source.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "dtypes.h"

namespace ocf {
namespace {

[[noreturn]] void BadSource(const std::string& what) { throw std::runtime_error("source.json: " + what); }

std::string ReadWholeFile(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) BadSource("cannot open " + path);
  return std::string((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
}

const Json& Member(const Json& object, const std::string& name, Json::Kind kind) {
  const Json* member = object.Find(name);
  if (member == nullptr || member->kind != kind) BadSource("missing or mistyped '" + name + "'");
  return *member;
}

uint64_t ToUnsigned(const Json& number) {
  uint64_t value = 0;
  const std::string& text = number.text;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (number.kind != Json::Kind::kNumber || error != std::errc() || end != text.data() + text.size()) {
    BadSource("'" + text + "' is not an unsigned integer");
  }
  return value;
}

int64_t ParseInt(const std::string& text) {
  const char* begin = text.data();
  if (!text.empty() && text[0] == '+') ++begin;
  int64_t value = 0;
  auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || begin == end) {
    BadSource("'" + text + "' is not a 64-bit integer");
  }
  return value;
}

double ParseHexFloat(const std::string& text) {
  if (text == "nan" || text == "-nan") return std::strtod("nan", nullptr);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || text.empty()) BadSource("'" + text + "' is not a float");
  return value;
}

std::string Base64Decode(const std::string& text) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (text.size() % 4 != 0) BadSource("base64 of a length that is not a multiple of 4");
  std::string out;
  for (size_t at = 0; at < text.size(); at += 4) {
    uint32_t group = 0;
    int padding = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[at + k];
      size_t digit = kAlphabet.find(c);
      if (c == '=' && at + 4 == text.size() && k >= 2) {
        ++padding;
        digit = 0;
      } else if (digit == std::string::npos || padding > 0) {
        BadSource("invalid base64");
      }
      group = group << 6 | static_cast<uint32_t>(digit);
    }
    out += static_cast<char>(group >> 16);
    if (padding < 2) out += static_cast<char>((group >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(group & 0xFF);
  }
  return out;
}

void ReadTypedMap(const Json& object, google::protobuf::Map<std::string, v1::Value>* map);

v1::Value ReadTypedValue(const Json& typed) {
  v1::Value value;
  if (typed.kind == Json::Kind::kNull) return value;
  if (typed.kind != Json::Kind::kObject || typed.members.size() != 1) BadSource("a typed value is not {kind: value}");
  const std::string& kind = typed.members[0].first;
  const Json& content = typed.members[0].second;
  if (kind == "bool" && content.kind == Json::Kind::kBool) {
    value.set_bool_value(content.boolean);
  } else if (kind == "int" && content.kind == Json::Kind::kString) {
    value.set_int_value(ParseInt(content.text));
  } else if (kind == "float" && content.kind == Json::Kind::kString) {
    value.set_float_value(ParseHexFloat(content.text));
  } else if (kind == "string" && content.kind == Json::Kind::kString) {
    value.set_string_value(content.text);
  } else if (kind == "bytes" && content.kind == Json::Kind::kString) {
    value.set_bytes_value(Base64Decode(content.text));
  } else if (kind == "list" && content.kind == Json::Kind::kArray) {
    v1::ValueList* list = value.mutable_list_value();
    for (const Json& item : content.items) *list->add_values() = ReadTypedValue(item);
  } else if (kind == "map" && content.kind == Json::Kind::kObject) {
    ReadTypedMap(content, value.mutable_map_value()->mutable_entries());
  } else {
    BadSource("unknown typed value '" + kind + "'");
  }
  return value;
}

void ReadTypedMap(const Json& object, google::protobuf::Map<std::string, v1::Value>* map) {
  for (const auto& [key, typed] : object.members) (*map)[key] = ReadTypedValue(typed);
}

int DtypeNumber(const std::string& name) {
  int dtype = DtypeFromName(name);
  if (dtype == 0) BadSource("unknown dtype '" + name + "'");
  return dtype;
}

void ReadGraph(const Json& graph, v1::ObjectGraph* out) {
  for (const Json& node_json : Member(graph, "nodes", Json::Kind::kArray).items) {
    v1::ObjectNode* node = out->add_nodes();
    node->set_type_name(Member(node_json, "type_name", Json::Kind::kString).text);
    for (const Json& edge : Member(node_json, "children", Json::Kind::kArray).items) {
      if (edge.items.size() != 2) BadSource("a child edge is not [name, node id]");
      v1::ChildReference* child = node->add_children();
      child->set_name(edge.items[0].text);
      child->set_node_id(static_cast<uint32_t>(ToUnsigned(edge.items[1])));
    }
    for (const Json& pair : Member(node_json, "attributes", Json::Kind::kArray).items) {
      if (pair.items.size() != 2) BadSource("an attribute is not [name, key]");
      v1::TensorAttribute* attribute = node->add_attributes();
      attribute->set_name(pair.items[0].text);
      attribute->set_key(pair.items[1].text);
    }
    for (const Json& triple : Member(node_json, "slot_variables", Json::Kind::kArray).items) {
      if (triple.items.size() != 3) BadSource("a slot variable is not [variable, slot name, slot node]");
      v1::SlotVariable* slot = node->add_slot_variables();
      slot->set_original_variable_node_id(static_cast<uint32_t>(ToUnsigned(triple.items[0])));
      slot->set_slot_name(triple.items[1].text);
      slot->set_slot_variable_node_id(static_cast<uint32_t>(ToUnsigned(triple.items[2])));
    }
    ReadTypedMap(Member(node_json, "metadata", Json::Kind::kObject), node->mutable_metadata());
  }
}

}  // namespace

Source ReadSource(const std::string& path) {
  const Json source = ParseJson(ReadWholeFile(path));
  const std::string directory = path.substr(0, path.rfind('/') + 1);
  Source result;
  for (const auto& [key, description] : Member(source, "tensors", Json::Kind::kObject).members) {
    SourceTensor tensor;
    tensor.key = key;
    tensor.dtype = DtypeNumber(Member(description, "dtype", Json::Kind::kString).text);
    for (const Json& dim : Member(description, "shape", Json::Kind::kArray).items) tensor.shape.push_back(ToUnsigned(dim));
    tensor.bytes = ReadWholeFile(directory + Member(description, "data", Json::Kind::kString).text);
    result.tensors.push_back(std::move(tensor));
  }
  if (const Json* metadata = source.Find("metadata"); metadata != nullptr && metadata->kind == Json::Kind::kObject) {
    ReadTypedMap(*metadata, result.index.mutable_metadata());
  }
  if (const Json* graph = source.Find("object_graph"); graph != nullptr && graph->kind == Json::Kind::kObject) {
    ReadGraph(*graph, result.index.mutable_object_graph());
  }
  return result;
}

}  // namespace ocf
