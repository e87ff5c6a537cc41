// The merge of a multi-writer save (spec/parts.md): checks the parts in the
// order of "Merge order of checks" (M1 to M7), then commits the merged
// index, referencing the parts' shard files where they are.
#pragma once

#include <cstdint>
#include <string>

namespace ocf {

// Merges parts 0 to `count` - 1 of save `save_id` in `directory` and
// commits `directory`/index.ocf; throws FormatError for the first failing
// check, having changed nothing in `directory` ([R-PART-007]). A save id
// that is not 16 lowercase hexadecimal digits, or a count outside
// [1, 65536], is INVALID before any file is touched (M0).
void MergeParts(const std::string& directory, const std::string& save_id, int64_t count);

}  // namespace ocf
