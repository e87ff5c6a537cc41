// SHA-256 (FIPS 180-4), for the tensor digests of the conformance protocol
// (conformance/protocol.md, "Tensors") and the identity of pool objects
// (spec/pool.md, [R-POOL-004]).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ocf {

// The SHA-256 of `data`, as 64 lower-case hexadecimal digits.
std::string Sha256Hex(const std::string& data);

// A SHA-256 computed over bytes given piece by piece, so that a large file
// is hashed in bounded memory.
class Sha256 {
 public:
  void Update(const std::string& piece);
  // The 32 bytes of the digest; the object is not used afterwards.
  std::string Digest();

 private:
  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string pending_;  // fewer than 64 bytes not compressed yet
  uint64_t length_ = 0;
};

}  // namespace ocf
