// CRC-32C (Castagnoli) as spec/format.md [R-CRC-001] and Appendix B define
// it: reflected polynomial 0x82F63B78, initial value and final XOR
// 0xFFFFFFFF, stored unmasked.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ocf {

// The CRC-32C of `size` bytes at `data`; `previous` extends an earlier CRC
// over more bytes (0 starts afresh).
uint32_t Crc32c(const void* data, size_t size, uint32_t previous = 0);

}  // namespace ocf
