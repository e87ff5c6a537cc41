#include "merge.h"

#include <cstdio>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "boxes.h"
#include "checkpoint.h"
#include "commit.h"
#include "container.h"
#include "errors.h"
#include "graph.h"
#include "index_checks.h"

namespace ocf {
namespace {

using u128 = unsigned __int128;
constexpr int64_t kMaxParts = 65536;

struct Part {
  v1::Index index;
  std::vector<TensorLayout> tensors;
  std::vector<BlockLayout> blocks;
};

// Where one part holds a key: the part and the tensor's row in its table.
struct Holder {
  size_t part;
  int tensor;
};

std::string PartFileName(const std::string& save_id, uint32_t number) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%05u", number);
  return "part-" + save_id + "-" + digits + ".ocfpart";
}

bool IsLowerHex(const std::string& text, size_t from, size_t count) {
  for (size_t i = from; i < from + count; ++i) {
    if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f'))) return false;
  }
  return true;
}

// data-<16 lowercase hex digits>-<5 decimal digits>.ocfd [R-PART-001]
bool IsWriteShardName(const std::string& name) {
  if (name.size() != 32 || name.compare(0, 5, "data-") != 0 || name[21] != '-' ||
      name.compare(27, 5, ".ocfd") != 0 || !IsLowerHex(name, 5, 16)) {
    return false;
  }
  for (size_t i = 22; i < 27; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

// M2 for part `number`: steps 2 to 15 with "part" implemented, then the
// rules of a part index, its identity, and what only part 0 may carry.
Part ReadPart(const File& file, const std::string& save_id, uint32_t number, uint32_t count) {
  Part part;
  MapEntryFaults faults;
  const uint64_t index_offset = ReadIndex(file, &part.index, &faults);
  CheckIndexContent(part.index, index_offset, &part.tensors, &part.blocks, IndexKind::kPart, faults);
  const v1::Index& index = part.index;
  bool lists_part = false;
  for (const std::string& name : index.header().required_features()) lists_part |= name == "part";
  if (!lists_part || !index.has_part()) {
    Fail(Category::kInvalid, "R-PART-001", file.name() + ": not a part index (no feature 'part', or no Index.part)");
  }
  for (const v1::Shard& shard : index.shards()) {
    if (shard.path().empty() || !IsWriteShardName(shard.path())) {
      Fail(Category::kInvalid, "R-PART-001",
           file.name() + ": lists the shard '" + shard.path() + "', not named data-<writeid>-<nnnnn>.ocfd");
    }
  }
  if (index.part().save_id() != save_id || index.part().number() != number || index.part().count() != count) {
    Fail(Category::kInvalid, "R-PART-004",
         file.name() + ": says it is part " + std::to_string(index.part().number()) + " of " +
             std::to_string(index.part().count()) + " of save '" + index.part().save_id() + "'");
  }
  if (number != 0 && (index.metadata_size() > 0 || index.has_object_graph())) {
    Fail(Category::kInvalid, "R-PART-005", file.name() + ": only part 0 may carry metadata or an object graph");
  }
  return part;
}

const uint64_t* Box(const Part& part, uint64_t block, bool extents) {
  const auto& column = extents ? part.index.blocks().slice_extents() : part.index.blocks().slice_starts();
  return column.data() + part.blocks[block].first_box_value;
}

// M4 for one key, given every part that holds it: stored whole in one
// part only, with one dtype and one shape in all.
void CheckKeyAgreement(const std::vector<Part>& parts, const std::string& key, const std::vector<Holder>& holders) {
  const Holder& first = holders[0];
  const std::vector<uint64_t>& shape = parts[first.part].tensors[first.tensor].shape;
  const int dtype = parts[first.part].index.tensors().dtypes(first.tensor);
  for (const Holder& holder : holders) {
    const Part& part = parts[holder.part];
    if (part.index.tensors().slice_counts(holder.tensor) == 0 && holders.size() > 1) {
      Fail(Category::kInvalid, "R-PART-005", "'" + key + "' is stored whole in one part and also in another");
    }
    if (part.index.tensors().dtypes(holder.tensor) != dtype || part.tensors[holder.tensor].shape != shape) {
      Fail(Category::kInvalid, "R-PART-005", "'" + key + "' has different dtypes or shapes in different parts");
    }
  }
}

// M5 for one key stored in slices: at most MaxSlices(rank) in all parts, boxes
// pairwise disjoint, and together tiling the shape.
void CheckKeyTiling(const std::vector<Part>& parts, const std::string& key, const std::vector<Holder>& holders) {
  const Holder& first = holders[0];
  const TensorLayout& shape_of_first = parts[first.part].tensors[first.tensor];
  if (parts[first.part].index.tensors().slice_counts(first.tensor) == 0) return;
  std::vector<std::pair<size_t, uint64_t>> slices;  // (part, block)
  for (const Holder& holder : holders) {
    const TensorLayout& tensor = parts[holder.part].tensors[holder.tensor];
    for (uint64_t s = 0; s < tensor.block_count; ++s) slices.emplace_back(holder.part, tensor.first_block + s);
  }
  if (slices.size() > MaxSlices(shape_of_first.shape.size())) {
    Fail(Category::kLimitExceeded, "R-SLICE-004", "'" + key + "' has " + std::to_string(slices.size()) + " slices in all parts");
  }
  const size_t rank = shape_of_first.shape.size();
  // The boxes side by side, for a check that does not compare every pair (boxes.cpp).
  std::vector<uint64_t> starts, extents;
  u128 covered = 0;
  for (const auto& [part, block] : slices) {
    starts.insert(starts.end(), Box(parts[part], block, false), Box(parts[part], block, false) + rank);
    extents.insert(extents.end(), Box(parts[part], block, true), Box(parts[part], block, true) + rank);
    covered += parts[part].blocks[block].element_count;
  }
  size_t a = 0, b = 0;
  if (!BoxesDisjoint(starts.data(), extents.data(), slices.size(), rank, &a, &b)) {
    Fail(Category::kInvalid, "R-PART-005", "'" + key + "': boxes of the parts overlap");
  }
  if (covered != shape_of_first.element_count) {
    Fail(Category::kInvalid, "R-PART-005", "'" + key + "': the boxes of the parts do not tile its shape");
  }
}

void AppendBlock(const Part& part, uint64_t j, uint32_t shard_base, v1::BlockTable* out) {
  const v1::BlockTable& in = part.index.blocks();
  const BlockLayout& block = part.blocks[j];
  out->add_shards(shard_base + in.shards(j));
  out->add_offsets(in.offsets(j));
  out->add_stored_lengths(in.stored_lengths(j));
  out->add_raw_lengths(in.raw_lengths(j));
  out->add_codecs(in.codecs(j));
  out->add_byte_shuffles(in.byte_shuffles(j));
  out->add_chunk_sizes(in.chunk_sizes(j));
  for (uint64_t c = 0; c < block.chunk_count; ++c) out->add_chunk_crcs(in.chunk_crcs(block.first_crc + c));
  if (in.codecs(j) == v1::CODEC_ZSTD) {
    for (uint64_t c = 0; c < block.chunk_count; ++c) {
      out->add_chunk_stored_lengths(in.chunk_stored_lengths(block.first_zstd_length + c));
    }
  }
  if (part.index.tensors().slice_counts(block.tensor) > 0) {
    const size_t rank = part.tensors[block.tensor].shape.size();
    for (size_t d = 0; d < rank; ++d) {
      out->add_slice_starts(Box(part, j, false)[d]);
      out->add_slice_extents(Box(part, j, true)[d]);
    }
  }
}

// The merged index of [R-PART-006].
v1::Index MergedIndex(const std::vector<Part>& parts, const std::vector<std::string>& keys,
                      const std::unordered_map<std::string, std::vector<Holder>>& holders) {
  v1::Index merged;
  merged.mutable_header()->set_writer("ocf-cpp 0.1.0");
  std::vector<uint32_t> shard_base;
  for (const Part& part : parts) {
    shard_base.push_back(static_cast<uint32_t>(merged.shards_size()));
    for (const v1::Shard& shard : part.index.shards()) *merged.add_shards() = shard;
  }
  v1::TensorTable* table = merged.mutable_tensors();
  for (const std::string& key : keys) {
    const std::vector<Holder>& where = holders.at(key);
    const Part& first = parts[where[0].part];
    const TensorLayout& tensor = first.tensors[where[0].tensor];
    table->add_keys(key);
    table->add_dtypes(first.index.tensors().dtypes(where[0].tensor));
    table->add_ranks(static_cast<uint32_t>(tensor.shape.size()));
    for (uint64_t dim : tensor.shape) table->add_dims(dim);
    uint32_t slices = 0;
    for (const Holder& holder : where) slices += parts[holder.part].index.tensors().slice_counts(holder.tensor);
    table->add_slice_counts(slices);
    for (const Holder& holder : where) {
      const TensorLayout& held = parts[holder.part].tensors[holder.tensor];
      for (uint64_t s = 0; s < held.block_count; ++s) {
        AppendBlock(parts[holder.part], held.first_block + s, shard_base[holder.part], merged.mutable_blocks());
      }
    }
  }
  *merged.mutable_metadata() = parts[0].index.metadata();
  if (parts[0].index.has_object_graph()) *merged.mutable_object_graph() = parts[0].index.object_graph();
  return merged;
}

// M6: steps 1 to 15 of the reader's order on the merged index's bytes, then
// the object graph's checks.
void CheckMergedIndex(const std::string& bytes) {
  if (bytes.size() > kMaxIndexLength) {
    Fail(Category::kLimitExceeded, "R-LIMIT-001",
         "the merged index would exceed " + std::to_string(kMaxIndexLength) + " bytes");
  }
  v1::Index reparsed;
  if (!reparsed.ParseFromString(bytes)) {
    Fail(Category::kMalformed, "R-FILE-007", "the merged index does not parse back");
  }
  std::vector<TensorLayout> tensors;
  std::vector<BlockLayout> blocks;
  const MapEntryFaults faults = FindMapEntryFaults(bytes);
  CheckIndexContent(reparsed, 64, &tensors, &blocks, IndexKind::kCheckpoint, faults);
  if (reparsed.has_object_graph()) CheckGraph(reparsed, faults);
}

void Publish(const std::string& directory, const std::string& index_bytes) {
  const std::string temporary = directory + "/.index.ocf.ocf-tmp-" + NewWriteId();
  try {
    WriteNewFile(temporary, IndexFileBytes("", index_bytes));  // step 5 of [R-COMMIT-002]
    FsyncDirectory(directory);                                  // step 6
    RenameFile(temporary, directory + "/index.ocf");            // step 7
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  FsyncDirectory(directory);                                    // step 8
}

}  // namespace

void MergeParts(const std::string& directory, const std::string& save_id, int64_t count) {
  if (save_id.size() != 16 || !IsLowerHex(save_id, 0, 16) || count < 1 || count > kMaxParts) {   // M0
    Fail(Category::kInvalid, "R-PART-004",
         "save id '" + save_id + "' and part count " + std::to_string(count) +
             ": the id must be 16 lowercase hexadecimal digits, the count in [1, 65536]");
  }
  std::vector<File> files;
  for (uint32_t p = 0; p < count; ++p) {                                                 // M1
    files.push_back(OpenFileInDirectory(directory, PartFileName(save_id, p), "R-PART-004"));
  }
  std::vector<Part> parts;
  for (uint32_t p = 0; p < count; ++p) {                                                 // M2
    parts.push_back(ReadPart(files[p], save_id, p, static_cast<uint32_t>(count)));
  }
  std::unordered_set<std::string> shard_paths;
  for (const Part& part : parts) {                                                       // M3
    for (const v1::Shard& shard : part.index.shards()) {
      if (!shard_paths.insert(shard.path()).second) {
        Fail(Category::kInvalid, "R-PART-005", "two parts list the shard '" + shard.path() + "'");
      }
    }
  }
  std::vector<std::string> keys;  // merged order: first appearance
  std::unordered_map<std::string, std::vector<Holder>> holders;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (int i = 0; i < parts[p].index.tensors().keys_size(); ++i) {
      const std::string& key = parts[p].index.tensors().keys(i);
      auto& where = holders[key];
      if (where.empty()) keys.push_back(key);
      where.push_back({p, i});
    }
  }
  for (const std::string& key : keys) CheckKeyAgreement(parts, key, holders[key]);      // M4
  for (const std::string& key : keys) CheckKeyTiling(parts, key, holders[key]);         // M5
  const v1::Index merged = MergedIndex(parts, keys, holders);
  const std::string bytes = SerializeIndex(merged);
  CheckMergedIndex(bytes);                                                               // M6
  OpenShardFiles(merged, directory, "index.ocf");                                        // M7
  Publish(directory, bytes);
}

}  // namespace ocf
