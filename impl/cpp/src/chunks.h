// Decoding one stored chunk: a Zstandard frame under the rules of
// [R-CODEC-001], and the byte unshuffle of [R-CODEC-002].
#pragma once

#include <cstdint>
#include <string>

namespace ocf {

// The `raw_length` bytes that the single Zstandard frame `stored` decodes
// to; MALFORMED (naming `what`) for anything [R-CODEC-001] forbids.
std::string DecodeZstdFrame(const std::string& stored, uint64_t raw_length, const std::string& what);

// Undoes the byte shuffle of a chunk of `item_size`-byte elements.
std::string Unshuffle(const std::string& shuffled, uint64_t item_size);

}  // namespace ocf
