#include "map_entries.h"

#include <cstdint>
#include <functional>

#include "wire.h"

namespace ocf {
namespace {

// Field numbers on the paths to map entries (proto/ocf/v1/*.proto).
constexpr uint32_t kIndexMetadata = 5, kIndexObjectGraph = 6, kGraphNodes = 1, kNodeMetadata = 5;
constexpr uint32_t kEntryKey = 1, kEntryValue = 2, kValueList = 6, kValueMap = 7;
constexpr uint32_t kListValues = 1, kMapEntries = 1;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLength = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5;

using Bytes = WireBytes;
constexpr auto Varint = ReadVarint;

// Skips the value of a field of `wire_type`; a group up to its end tag.
void Skip(Bytes* b, uint32_t wire_type) {
  if (wire_type == kVarint) {
    Varint(b);
  } else if (wire_type == kFixed64) {
    b->at += 8;
  } else if (wire_type == kFixed32) {
    b->at += 4;
  } else if (wire_type == kLength) {
    b->at += Varint(b);
  } else if (wire_type == kStartGroup) {
    for (int depth = 1; depth > 0 && b->at < b->end;) {
      const uint32_t tag_type = Varint(b) & 7;
      if (tag_type == kStartGroup) ++depth;
      else if (tag_type == kEndGroup) --depth;
      else Skip(b, tag_type);
    }
  }
}

// Calls `visit(number, wire_type, payload)` for each field of the message in
// `b`; the payload is a length-delimited field's content, else empty.
// Stops early, returning false, when `visit` does.
bool ForEachField(Bytes b, const std::function<bool(uint32_t, uint32_t, Bytes)>& visit) {
  while (b.at < b.end) {
    const uint64_t tag = Varint(&b);
    const uint32_t number = static_cast<uint32_t>(tag >> 3), wire_type = tag & 7;
    Bytes payload{b.at, b.at};
    if (wire_type == kLength) {
      const uint64_t length = Varint(&b);
      payload = Bytes{b.at, b.at + length};
      b.at += length;
    } else {
      Skip(&b, wire_type);
    }
    if (!visit(number, wire_type, payload)) return false;
  }
  return true;
}

// Calls `visit` for each length-delimited occurrence of field `number`: the
// messages of a known message field (another wire type is an unknown field).
bool ForEachEmbedded(Bytes b, uint32_t number, const std::function<bool(Bytes)>& visit) {
  return ForEachField(b, [&](uint32_t n, uint32_t wire_type, Bytes payload) {
    return n != number || wire_type != kLength || visit(payload);
  });
}

bool EntryIsPlain(Bytes entry);

bool ValueIsPlain(Bytes value) {
  return ForEachField(value, [](uint32_t number, uint32_t wire_type, Bytes payload) {
    if (wire_type != kLength) return true;
    if (number == kValueList) return ForEachEmbedded(payload, kListValues, ValueIsPlain);
    if (number == kValueMap) return ForEachEmbedded(payload, kMapEntries, EntryIsPlain);
    return true;
  });
}

bool EntryIsPlain(Bytes entry) {
  return ForEachField(entry, [](uint32_t number, uint32_t wire_type, Bytes payload) {
    if (wire_type != kLength || (number != kEntryKey && number != kEntryValue)) return false;
    return number == kEntryKey || ValueIsPlain(payload);
  });
}

}  // namespace

MapEntryFaults FindMapEntryFaults(const std::string& index_bytes) {
  MapEntryFaults faults;
  const auto* start = reinterpret_cast<const unsigned char*>(index_bytes.data());
  const Bytes index{start, start + index_bytes.size()};
  faults.index_metadata = !ForEachEmbedded(index, kIndexMetadata, EntryIsPlain);
  size_t node_id = 0;
  // Occurrences of Index.object_graph merge, so their nodes follow each other.
  ForEachEmbedded(index, kIndexObjectGraph, [&](Bytes graph) {
    return ForEachEmbedded(graph, kGraphNodes, [&](Bytes node) {
      if (!ForEachEmbedded(node, kNodeMetadata, EntryIsPlain)) faults.nodes.insert(node_id);
      ++node_id;
      return true;
    });
  });
  return faults;
}

}  // namespace ocf
