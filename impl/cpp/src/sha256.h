// SHA-256 (FIPS 180-4), for the tensor digests of the conformance protocol
// (conformance/protocol.md, "Tensors").
#pragma once

#include <cstdint>
#include <string>

namespace ocf {

// The SHA-256 of `data`, as 64 lower-case hexadecimal digits.
std::string Sha256Hex(const std::string& data);

}  // namespace ocf
