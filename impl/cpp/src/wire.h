// [R-WIRE-001]: the protobuf tags of the index. libprotobuf keeps the low 32
// bits of a 5-byte tag whose value is 2^32 or more (so reads a field number
// above 2^29 - 1 as another field), where upb and the spec refuse the index
// as MALFORMED; this looks at the index bytes for such a tag.
#pragma once

#include <cstdint>
#include <string>

namespace ocf {

// A position in protobuf bytes and their end.
struct WireBytes {
  const unsigned char* at;
  const unsigned char* end;
};

// Reads the varint at `b->at` and moves past it; bits above 64 are dropped
// (the low 64 bits are its value, [R-WIRE-001]). For bytes that parsed.
uint64_t ReadVarint(WireBytes* b);

// True when every tag of the index bytes, in known messages, in unknown
// groups and at every depth, is below 2^32. Runs on bytes that parsed (so
// well formed and at most 100 levels deep).
bool TagsFitIn32Bits(const std::string& index_bytes);

}  // namespace ocf
