#include "wire.h"

#include <cstdint>

#include "ocf/v1/index.pb.h"

namespace ocf {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLength = 2, kStartGroup = 3, kEndGroup = 4;
constexpr uint64_t kTagLimit = uint64_t{1} << 32;

using Cursor = WireBytes;
constexpr auto Varint = ReadVarint;

// Walks the fields of one message (`type`, or null for the content of an
// unknown group) up to its end, or up to the end tag of the group it is in.
// Embedded messages of known fields are walked with their own type; the
// content of an unknown length-delimited field is opaque, as a parser sees it.
bool FieldsFit(const Descriptor* type, Cursor* c) {
  while (c->at < c->end) {
    const uint64_t tag = Varint(c);
    if (tag >= kTagLimit) return false;
    const uint32_t number = static_cast<uint32_t>(tag >> 3), wire_type = tag & 7;
    if (wire_type == kEndGroup) return true;
    if (wire_type == kVarint) {
      Varint(c);
    } else if (wire_type == kFixed64) {
      c->at += 8;
    } else if (wire_type == kLength) {
      const uint64_t length = Varint(c);
      Cursor payload{c->at, c->at + length};
      c->at += length;
      const FieldDescriptor* field = type ? type->FindFieldByNumber(static_cast<int>(number)) : nullptr;
      if (field && field->type() == FieldDescriptor::TYPE_MESSAGE &&
          !FieldsFit(field->message_type(), &payload)) {
        return false;
      }
    } else if (wire_type == kStartGroup) {
      if (!FieldsFit(nullptr, c)) return false;
    } else {
      c->at += 4;  // fixed32; the parse refused wire types 6 and 7
    }
  }
  return true;
}

}  // namespace

uint64_t ReadVarint(WireBytes* b) {
  uint64_t value = 0;
  for (int shift = 0; b->at < b->end; shift += 7) {
    const unsigned char byte = *b->at++;
    if (shift < 64) value |= uint64_t(byte & 0x7F) << shift;
    if (byte < 0x80) break;
  }
  return value;
}

bool TagsFitIn32Bits(const std::string& index_bytes) {
  const auto* start = reinterpret_cast<const unsigned char*>(index_bytes.data());
  Cursor cursor{start, start + index_bytes.size()};
  return FieldsFit(v1::Index::descriptor(), &cursor);
}

}  // namespace ocf
