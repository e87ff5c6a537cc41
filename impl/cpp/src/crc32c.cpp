#include "crc32c.h"

#include <array>

namespace ocf {
namespace {

// One table entry per byte value: the bitwise algorithm of Appendix B run
// over that byte alone, so the loop below handles a byte per step.
std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    table[byte] = crc;
  }
  return table;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t size, uint32_t previous) {
  static const std::array<uint32_t, 256> table = MakeTable();
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = previous ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace ocf
