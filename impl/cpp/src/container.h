// The bytes around the index: preamble, footer, index position, checksum
// and parse (spec/format.md, steps 2 to 9 of the reader's order of checks).
#pragma once

#include <cstdint>

#include "files.h"
#include "map_entries.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// The largest index an index file may hold: 1 GiB since format 1.2
// [R-LIMIT-001].
constexpr uint64_t kMaxIndexLength = 1073741824;

// Parses the index of `file` into `index` and returns `index_offset`, the
// end of the index file's data region.
uint64_t ReadIndex(const File& file, v1::Index* index, MapEntryFaults* faults);

// True when the file's first 8 bytes are the preamble magic [R-FILE-002].
bool HasPreambleMagic(const File& file);

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
bool IsValidUtf8(const std::string& text);

}  // namespace ocf
