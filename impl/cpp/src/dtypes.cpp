#include "dtypes.h"

#include "errors.h"
#include "ocf/v1/tensor.pb.h"

namespace ocf {
namespace {

struct DtypeInfo {
  const char* name;
  uint64_t item_size;
};

// Indexed by the Dtype value; item size 0 marks DTYPE_BYTES.
constexpr DtypeInfo kDtypes[] = {
    {"unspecified", 0}, {"bool", 1},     {"int8", 1},       {"int16", 2},           {"int32", 4},
    {"int64", 8},       {"uint8", 1},    {"uint16", 2},     {"uint32", 4},          {"uint64", 8},
    {"float16", 2},     {"bfloat16", 2}, {"float32", 4},    {"float64", 8},         {"complex64", 8},
    {"complex128", 16}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1}, {"bytes", 0}};

bool IsDefined(int dtype) { return dtype >= v1::DTYPE_BOOL && dtype <= v1::DTYPE_BYTES; }

}  // namespace

uint64_t ItemSize(int dtype) { return IsDefined(dtype) ? kDtypes[dtype].item_size : 0; }

const char* DtypeName(int dtype) { return IsDefined(dtype) ? kDtypes[dtype].name : "unspecified"; }

int DtypeFromName(const std::string& name) {
  for (int dtype = v1::DTYPE_BOOL; dtype <= v1::DTYPE_BYTES; ++dtype) {
    if (name == kDtypes[dtype].name) return dtype;
  }
  return v1::DTYPE_UNSPECIFIED;
}

std::vector<std::string_view> SplitByteStrings(const std::string& raw, uint64_t count, const std::string& what) {
  uint64_t remaining = raw.size() - 8 * count;
  std::vector<std::string_view> elements(count);
  uint64_t payload_at = 8 * count;
  for (uint64_t e = 0; e < count; ++e) {
    uint64_t length = 0;
    for (int k = 7; k >= 0; --k) length = length << 8 | static_cast<unsigned char>(raw[8 * e + k]);
    if (length > remaining) {
      Fail(Category::kInvalid, "R-DTYPE-003", what + ": the byte-string lengths exceed the payload");
    }
    remaining -= length;
    elements[e] = std::string_view(raw).substr(payload_at, length);
    payload_at += length;
  }
  if (remaining != 0) {
    Fail(Category::kInvalid, "R-DTYPE-003", what + ": the byte-string lengths fall short of the payload");
  }
  return elements;
}

}  // namespace ocf
