// The checks of a parsed index that need no file: required features,
// shard names, the tensor and block tables and the metadata depth
// (spec/format.md, "Reader's order of checks", steps 10 to 15).
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// Runs steps 10 to 15 in order; on success fills where every tensor's and
// block's values are. `index_offset` ends the index file's data region.
void CheckIndexContent(const v1::Index& index, uint64_t index_offset,
                       std::vector<TensorLayout>* tensors,
                       std::vector<BlockLayout>* blocks);

// [R-META-002]: LIMIT_EXCEEDED when a value of `metadata` (whose values are
// at level 0) lies above level 32. `where` names the map in messages.
void CheckMetadataDepth(const google::protobuf::Map<std::string, v1::Value>& metadata,
                        const std::string& where);

// The item size of a fixed-size dtype, 0 for DTYPE_BYTES and undefined values.
uint64_t ItemSize(int dtype);

}  // namespace ocf
