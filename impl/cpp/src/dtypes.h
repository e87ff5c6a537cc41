// The element types of spec/format.md, "Data types": item sizes, the names
// the conformance protocol uses, and the byte-string layout of
// [R-DTYPE-003].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ocf {

// The item size of a fixed-size dtype; 0 for DTYPE_BYTES and for values
// the table does not define.
uint64_t ItemSize(int dtype);

// The dtype's name without DTYPE_, in lower case ("float32"); the
// conformance protocol's spelling.
const char* DtypeName(int dtype);

// The dtype named `name` as DtypeName spells it, or 0 (unspecified).
int DtypeFromName(const std::string& name);

// The `count` elements of DTYPE_BYTES raw bytes (a table of u64 lengths,
// then the payloads), checking without overflow that the lengths add up to
// the payload exactly; INVALID naming `what` otherwise [R-DTYPE-003]. The
// caller has checked that raw.size() >= 8 * count.
std::vector<std::string_view> SplitByteStrings(const std::string& raw, uint64_t count, const std::string& what);

}  // namespace ocf
