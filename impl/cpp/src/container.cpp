#include "container.h"

#include <cstring>
#include <string>

#include "crc32c.h"
#include "errors.h"
#include "wire.h"

namespace ocf {
namespace {

constexpr unsigned char kPreambleMagic[8] = {0x89, 'O', 'C', 'F', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr unsigned char kFooterMagic[8] = {0x89, 'O', 'C', 'F', 'E', 'N', 'D', 0x0A};
constexpr uint64_t kPreambleSize = 64;
constexpr uint64_t kFooterSize = 32;

uint64_t LittleEndian(const std::string& bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) {
    value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  }
  return value;
}

// Every string of a Value tree; false at the first that is not UTF-8.
bool ValueStringsAreUtf8(const v1::Value& value) {
  switch (value.kind_case()) {
    case v1::Value::kStringValue:
      return IsValidUtf8(value.string_value());
    case v1::Value::kListValue:
      for (const auto& item : value.list_value().values()) {
        if (!ValueStringsAreUtf8(item)) return false;
      }
      return true;
    case v1::Value::kMapValue:
      for (const auto& [key, item] : value.map_value().entries()) {
        if (!IsValidUtf8(key) || !ValueStringsAreUtf8(item)) return false;
      }
      return true;
    default:
      return true;
  }
}

bool MetadataIsUtf8(const google::protobuf::Map<std::string, v1::Value>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (!IsValidUtf8(key) || !ValueStringsAreUtf8(value)) return false;
  }
  return true;
}

bool GraphStringsAreUtf8(const v1::ObjectGraph& graph) {
  for (const auto& node : graph.nodes()) {
    if (!IsValidUtf8(node.type_name()) || !MetadataIsUtf8(node.metadata())) return false;
    for (const auto& child : node.children()) {
      if (!IsValidUtf8(child.name())) return false;
    }
    for (const auto& attribute : node.attributes()) {
      if (!IsValidUtf8(attribute.name()) || !IsValidUtf8(attribute.key())) return false;
    }
    for (const auto& slot : node.slot_variables()) {
      if (!IsValidUtf8(slot.slot_name())) return false;
    }
  }
  return true;
}

// [R-FILE-007] (a): every string field is UTF-8, whether or not the
// protobuf library checked it while parsing.
bool IndexStringsAreUtf8(const v1::Index& index) {
  for (const auto& name : index.header().required_features()) {
    if (!IsValidUtf8(name)) return false;
  }
  if (!IsValidUtf8(index.header().writer())) return false;
  for (const auto& shard : index.shards()) {
    if (!IsValidUtf8(shard.path())) return false;
  }
  for (const auto& key : index.tensors().keys()) {
    if (!IsValidUtf8(key)) return false;
  }
  if (!IsValidUtf8(index.part().save_id())) return false;
  return MetadataIsUtf8(index.metadata()) && GraphStringsAreUtf8(index.object_graph());
}

}  // namespace

bool HasPreambleMagic(const File& file) {
  return std::memcmp(file.Read(0, 8).data(), kPreambleMagic, 8) == 0;
}

bool IsValidUtf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int continuation;
    uint32_t code;
    if (lead >= 0xC2 && lead <= 0xDF) { continuation = 1; code = lead & 0x1F; }
    else if (lead >= 0xE0 && lead <= 0xEF) { continuation = 2; code = lead & 0x0F; }
    else if (lead >= 0xF0 && lead <= 0xF4) { continuation = 3; code = lead & 0x07; }
    else return false;
    // fewer bytes left than the lead byte announces
    if (size - i <= static_cast<size_t>(continuation)) return false;
    for (int k = 1; k <= continuation; ++k) {
      unsigned char next = bytes[i + k];
      if ((next & 0xC0) != 0x80) return false;
      code = code << 6 | (next & 0x3F);
    }
    if ((continuation == 2 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) ||
        (continuation == 3 && (code < 0x10000 || code > 0x10FFFF))) {
      return false;
    }
    i += continuation + 1;
  }
  return true;
}

uint64_t ReadIndex(const File& file, v1::Index* index, MapEntryFaults* faults) {
  const uint64_t size = file.size();
  if (size < kPreambleSize + kFooterSize) {
    Fail(Category::kMalformed, "R-FILE-004",
         file.name() + ": " + std::to_string(size) +
             " bytes, shorter than the 96 of a preamble and a footer");
  }
  if (!HasPreambleMagic(file)) {
    Fail(Category::kMalformed, "R-FILE-002", file.name() + ": no OCF preamble magic");
  }
  const std::string footer = file.Read(size - kFooterSize, kFooterSize);
  if (std::memcmp(footer.data() + 24, kFooterMagic, 8) != 0) {
    Fail(Category::kMalformed, "R-FILE-004",
         file.name() + ": no OCF footer magic (truncated, or not an index file)");
  }
  const uint64_t index_offset = LittleEndian(footer, 0, 8);
  const uint64_t index_length = LittleEndian(footer, 8, 8);
  const uint32_t index_crc = static_cast<uint32_t>(LittleEndian(footer, 16, 4));
  const uint64_t major = LittleEndian(footer, 20, 2);
  if (major != 1) {
    Fail(Category::kUnsupportedVersion, "R-VER-001",
         file.name() + ": format major version " + std::to_string(major) +
             ", this reader implements 1");
  }
  if (index_length > kMaxIndexLength) {
    Fail(Category::kLimitExceeded, "R-LIMIT-001",
         file.name() + ": index_length " + std::to_string(index_length) +
             " exceeds " + std::to_string(kMaxIndexLength));
  }
  // index_length is small now, so the sum cannot wrap; index_offset can be
  // anything, hence the comparison as a difference.
  if (index_offset < kPreambleSize || index_offset > size - kFooterSize ||
      size - kFooterSize - index_offset != index_length) {
    Fail(Category::kMalformed, "R-FILE-005",
         file.name() + ": the index [" + std::to_string(index_offset) + ", +" +
             std::to_string(index_length) + ") does not end where the footer starts");
  }
  const std::string bytes = file.Read(index_offset, index_length);
  const uint32_t actual = Crc32c(bytes.data(), bytes.size());
  if (actual != index_crc) {
    Fail(Category::kIntegrity, "R-FILE-006",
         file.name() + ": the index bytes have CRC-32C " + std::to_string(actual) +
             ", the footer says " + std::to_string(index_crc));
  }
  // The library's default recursion limit is the spec's 100 levels.
  if (!index->ParseFromString(bytes) || !IndexStringsAreUtf8(*index)) {
    Fail(Category::kMalformed, "R-FILE-007",
         file.name() + ": the index bytes are not a valid ocf.v1.Index "
                       "(bad wire format, invalid UTF-8 or nesting over 100)");
  }
  if (!TagsFitIn32Bits(bytes)) {
    Fail(Category::kMalformed, "R-WIRE-001",
         file.name() + ": a protobuf tag of the index is 2^32 or more "
                       "(a field number above 2^29 - 1)");
  }
  *faults = FindMapEntryFaults(bytes);
  return index_offset;
}

}  // namespace ocf
