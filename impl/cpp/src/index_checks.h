// The checks of a parsed index that need no file: required features,
// shard names, the tensor and block tables and the metadata depth
// (spec/format.md, "Reader's order of checks", steps 10 to 15).
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint.h"
#include "map_entries.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// Which index the checks are for: a checkpoint's, or a part index that a
// merge reads (spec/parts.md [R-PART-001]: the feature name "part" is
// implemented, and the boxes of a sliced tensor need not cover its shape).
enum class IndexKind { kCheckpoint, kPart };

// Runs steps 10 to 15 in order; on success fills where every tensor's and
// block's values are. `index_offset` ends the index file's data region.
void CheckIndexContent(const v1::Index& index, uint64_t index_offset,
                       std::vector<TensorLayout>* tensors,
                       std::vector<BlockLayout>* blocks,
                       IndexKind kind = IndexKind::kCheckpoint,
                       const MapEntryFaults& faults = MapEntryFaults());

// Step 16 for every external shard of `index`, in order: it is not the
// index file itself, named `index_name` in `directory` (INVALID,
// [R-SHARD-006]); the regular file exists (NOT_FOUND), has the recorded
// length and begins with the preamble magic (MALFORMED); a pool shard is
// opened in the pool of the managed root instead [R-POOL-003]. Returns the
// open files by shard number (the index file's own slot stays closed).
std::vector<File> OpenShardFiles(const v1::Index& index, const std::string& directory,
                                 const std::string& index_name);

// The most slices a tensor of `rank` may be stored in [R-SLICE-004]: 65536
// up to rank 4, whose boxes the tiling check decides in O(r k log k) by
// their corners (boxes.cpp); 4096 above, where it may compare pairs.
uint64_t MaxSlices(uint64_t rank);

// Step 16b of a full verification: the SHA-256 of every pool shard's file,
// in order, against its pool_sha256; INTEGRITY otherwise [R-POOL-004].
void CheckPoolIdentities(const v1::Index& index, const std::vector<File>& files);

// [R-META-002]: LIMIT_EXCEEDED when a value of `metadata` (whose values are
// at level 0) lies above level 32. `where` names the map in messages.
void CheckMetadataDepth(const google::protobuf::Map<std::string, v1::Value>& metadata,
                        const std::string& where);

}  // namespace ocf
