#include "index_checks.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>

#include "boxes.h"
#include "container.h"
#include "dtypes.h"
#include "errors.h"
#include "sha256.h"

namespace ocf {
namespace {

using u128 = unsigned __int128;

constexpr uint64_t kMaxShards = 65536;
constexpr uint64_t kMaxTensors = uint64_t(1) << 24;
constexpr uint64_t kMaxKeyBytes = 4096;
constexpr uint32_t kMaxRank = 32;
constexpr u128 kMaxElements = u128(1) << 58;
constexpr uint64_t kMaxChunks = uint64_t(1) << 24;
constexpr int kMaxMetadataLevel = 32;

std::string Tensor(const v1::Index& index, uint64_t i) {
  return "tensor " + std::to_string(i) + " ('" + index.tensors().keys(i) + "')";
}

std::string Block(uint64_t j) { return "block " + std::to_string(j); }

// --- steps 10 to 13: features and shards ---------------------------------

void CheckRequiredFeatures(const v1::Index& index, IndexKind kind) {
  // Formats 1.0 and 1.1 define no feature names for checkpoints; 1.2
  // defines "pool", which a reader of checkpoints knows [R-FEAT-001]
  // [R-FEAT-002] [R-POOL-001]; a merge knows "part".
  for (const std::string& name : index.header().required_features()) {
    if (kind == IndexKind::kPart && name == "part") continue;
    if (kind == IndexKind::kCheckpoint && name == "pool") continue;
    Fail(Category::kUnknownRequiredFeature, "R-FEAT-001",
         "the index requires feature '" + name + "', which this implementation does not implement");
  }
}

bool IsPortableNameCharacter(char c, bool first) {
  bool alphanumeric = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  return alphanumeric || (!first && (c == '.' || c == '_' || c == '-'));
}

bool HasShardNameSyntax(const std::string& path) {
  if (path.empty() || path.size() > 255 || path == "index.ocf") return false;
  for (size_t i = 0; i < path.size(); ++i) {
    if (!IsPortableNameCharacter(path[i], i == 0)) return false;
  }
  return true;
}

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

bool IsDeviceName(const std::string& path) {
  std::string stem = AsciiLower(path.substr(0, path.find('.')));
  if (stem == "con" || stem == "prn" || stem == "aux" || stem == "nul") return true;
  return stem.size() == 4 && (stem.compare(0, 3, "com") == 0 || stem.compare(0, 3, "lpt") == 0) &&
         stem[3] >= '1' && stem[3] <= '9';
}

bool ListsPool(const v1::Index& index) {
  for (const std::string& name : index.header().required_features()) {
    if (name == "pool") return true;
  }
  return false;
}

// A pool shard, on the index alone, in the order of spec/pool.md
// [R-POOL-001] [R-POOL-002].
void CheckPoolShard(const v1::Index& index, int s) {
  const v1::Shard& shard = index.shards(s);
  const std::string what = "pool shard " + std::to_string(s) + " ('" + shard.path() + "')";
  if (!ListsPool(index)) {
    Fail(Category::kInvalid, "R-POOL-001", what + " is in an index that does not list the feature 'pool'");
  }
  if (shard.pool_sha256().size() != 32) {
    Fail(Category::kInvalid, "R-POOL-002",
         what + " has a pool_sha256 of " + std::to_string(shard.pool_sha256().size()) + " bytes, not 32");
  }
  if (!HasShardNameSyntax(shard.path())) {
    Fail(Category::kInvalid, "R-POOL-002", what + ": not a plain file name of [A-Za-z0-9._-]");
  }
  if (shard.length() < 64 || shard.length() > (uint64_t(1) << 63) - 1) {
    Fail(Category::kInvalid, "R-POOL-002",
         what + " has length " + std::to_string(shard.length()) + ", outside [64, 2^63 - 1]");
  }
}

void CheckShards(const v1::Index& index) {
  const auto& shards = index.shards();
  if (static_cast<uint64_t>(shards.size()) > kMaxShards) {
    Fail(Category::kLimitExceeded, "R-LIMIT-002",
         "the index lists " + std::to_string(shards.size()) + " shards, over 65536");
  }
  std::unordered_set<std::string_view> seen;
  for (int s = 0; s < shards.size(); ++s) {
    const std::string& path = shards.Get(s).path();
    if (!seen.insert(path).second) {
      Fail(Category::kInvalid, "R-SHARD-003", "shard " + std::to_string(s) + " repeats the path '" + path + "'");
    }
    if (!shards.Get(s).pool_sha256().empty()) {
      CheckPoolShard(index, s);
      continue;
    }
    if (path.empty()) continue;
    if (!HasShardNameSyntax(path)) {
      Fail(Category::kInvalid, "R-SHARD-001", "shard " + std::to_string(s) + " has the path '" + path +
                                                  "', not a plain file name of [A-Za-z0-9._-]");
    }
    uint64_t length = shards.Get(s).length();
    if (length < 64 || length > (uint64_t(1) << 63) - 1) {
      Fail(Category::kInvalid, "R-SHARD-002",
           "shard '" + path + "' has length " + std::to_string(length) + ", outside [64, 2^63 - 1]");
    }
  }
  std::unordered_set<std::string> folded;
  for (const auto& shard : shards) {
    const std::string& path = shard.path();
    if (path.empty()) continue;
    std::string lower = AsciiLower(path);
    if (!folded.insert(lower).second || lower == "index.ocf" || IsDeviceName(path) || path.back() == '.') {
      Fail(Category::kInvalid, "R-SHARD-005", "shard path '" + path + "' is not portable across file systems");
    }
  }
}

// --- step 14: the tensor table, T1 to T10 --------------------------------

void CheckTensorColumns(const v1::Index& index) {
  const auto& table = index.tensors();
  const uint64_t n = table.keys_size();
  if (n > kMaxTensors) {                                                   // T1
    Fail(Category::kLimitExceeded, "R-LIMIT-002", std::to_string(n) + " tensors, over 2^24");
  }
  if (uint64_t(table.dtypes_size()) != n || uint64_t(table.ranks_size()) != n ||
      uint64_t(table.slice_counts_size()) != n) {                          // T2
    Fail(Category::kInvalid, "R-TABLE-001",
         "dtypes, ranks and slice_counts must each hold " + std::to_string(n) + " values");
  }
  uint64_t rank_sum = 0;  // at most 2^24 values of 32 bits: no overflow
  for (uint32_t rank : table.ranks()) rank_sum += rank;
  if (uint64_t(table.dims_size()) != rank_sum) {                           // T3
    Fail(Category::kInvalid, "R-TABLE-001",
         "dims holds " + std::to_string(table.dims_size()) + " values, the ranks add up to " +
             std::to_string(rank_sum));
  }
  for (uint64_t i = 0; i < n; ++i) {                                       // T4
    const std::string& key = table.keys(i);
    if (key.empty() || key.find('\0') != std::string::npos) {
      Fail(Category::kInvalid, "R-TENSOR-001", "tensor " + std::to_string(i) + " has an empty key or one with a NUL byte");
    }
  }
  for (uint64_t i = 0; i < n; ++i) {                                       // T5
    if (table.keys(i).size() > kMaxKeyBytes) {
      Fail(Category::kLimitExceeded, "R-TENSOR-001",
           "tensor " + std::to_string(i) + " has a key of " + std::to_string(table.keys(i).size()) + " bytes, over 4096");
    }
  }
  std::unordered_set<std::string_view> keys;
  for (uint64_t i = 0; i < n; ++i) {                                       // T6
    if (!keys.insert(table.keys(i)).second) {
      Fail(Category::kInvalid, "R-TENSOR-001", Tensor(index, i) + " repeats an earlier key");
    }
  }
  for (uint64_t i = 0; i < n; ++i) {                                       // T7
    int dtype = table.dtypes(i);
    if (dtype < 1 || dtype > v1::DTYPE_BYTES) {
      Fail(Category::kInvalid, "R-TENSOR-002", Tensor(index, i) + " has the undefined dtype " + std::to_string(dtype));
    }
  }
  for (uint64_t i = 0; i < n; ++i) {                                       // T8
    if (table.ranks(i) > kMaxRank) {
      Fail(Category::kLimitExceeded, "R-TENSOR-003", Tensor(index, i) + " has rank " + std::to_string(table.ranks(i)) + ", over 32");
    }
  }
  uint64_t dim_at = 0;
  for (uint64_t i = 0; i < n; ++i) {                                       // T9
    u128 product = 1;
    for (uint32_t d = 0; d < table.ranks(i); ++d) {
      uint64_t dim = table.dims(dim_at + d);
      if (dim == 0) continue;
      product *= dim;  // both factors <= 2^64 only while product <= 2^58
      if (product > kMaxElements) {
        Fail(Category::kLimitExceeded, "R-TENSOR-003",
             Tensor(index, i) + ": the product of its non-zero dimensions exceeds 2^58");
      }
    }
    dim_at += table.ranks(i);
  }
  for (uint64_t i = 0; i < n; ++i) {                                       // T10
    if (table.slice_counts(i) > MaxSlices(table.ranks(i))) {
      Fail(Category::kLimitExceeded, "R-SLICE-004",
           Tensor(index, i) + " has " + std::to_string(table.slice_counts(i)) + " slices, over " +
               std::to_string(MaxSlices(table.ranks(i))) + " at rank " + std::to_string(table.ranks(i)));
    }
  }
}

// Shapes, element counts and block positions of the tensors, once T1 to
// T10 have passed (so every sum below is small).
std::vector<TensorLayout> LayOutTensors(const v1::Index& index) {
  const auto& table = index.tensors();
  std::vector<TensorLayout> tensors(table.keys_size());
  uint64_t dim_at = 0, block_at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorLayout& tensor = tensors[i];
    tensor.shape.assign(table.dims().begin() + dim_at, table.dims().begin() + dim_at + table.ranks(i));
    dim_at += table.ranks(i);
    tensor.element_count = 1;
    for (uint64_t dim : tensor.shape) tensor.element_count *= dim;  // <= 2^58 or 0
    tensor.first_block = block_at;
    tensor.block_count = std::max<uint64_t>(1, table.slice_counts(i));
    block_at += tensor.block_count;
  }
  return tensors;
}

// --- step 14: the block table, T11 to T28 --------------------------------

void CheckBlockColumnLengths(const v1::Index& index, const std::vector<TensorLayout>& tensors) {
  const auto& blocks = index.blocks();
  uint64_t m = 0, box_values = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    m += tensors[i].block_count;
    box_values += uint64_t(index.tensors().ranks(i)) * index.tensors().slice_counts(i);
  }
  for (int size : {blocks.shards_size(), blocks.offsets_size(), blocks.stored_lengths_size(),
                   blocks.raw_lengths_size(), blocks.codecs_size(), blocks.byte_shuffles_size(),
                   blocks.chunk_sizes_size()}) {
    if (uint64_t(size) != m) {                                             // T11
      Fail(Category::kInvalid, "R-TABLE-002",
           "a per-block column holds " + std::to_string(size) + " values, the tensors have " +
               std::to_string(m) + " blocks");
    }
  }
  if (uint64_t(blocks.slice_starts_size()) != box_values ||
      uint64_t(blocks.slice_extents_size()) != box_values) {               // T12
    Fail(Category::kInvalid, "R-TABLE-002",
         "slice_starts and slice_extents must each hold " + std::to_string(box_values) + " values");
  }
}

// T13, all of it for one tensor before the next; fills the element count
// of every block and the position of every box.
void CheckSlices(const v1::Index& index, const std::vector<TensorLayout>& tensors,
                 std::vector<BlockLayout>* blocks, IndexKind kind) {
  const bool must_tile = kind == IndexKind::kCheckpoint;
  const uint64_t* starts = index.blocks().slice_starts().data();
  const uint64_t* extents = index.blocks().slice_extents().data();
  uint64_t box_at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLayout& tensor = tensors[i];
    const size_t rank = tensor.shape.size();
    uint32_t slices = index.tensors().slice_counts(i);
    if (slices == 0) {
      (*blocks)[tensor.first_block].element_count = static_cast<uint64_t>(tensor.element_count);
      continue;
    }
    if (must_tile && tensor.element_count == 0) {
      Fail(Category::kInvalid, "R-SLICE-002", Tensor(index, i) + " has no elements and must be stored whole");
    }
    u128 covered = 0;
    for (uint32_t s = 0; s < slices; ++s) {
      const uint64_t at = box_at + uint64_t(s) * rank;
      u128 count = 1;
      for (size_t d = 0; d < rank; ++d) {
        if (extents[at + d] == 0 || u128(starts[at + d]) + extents[at + d] > tensor.shape[d]) {
          Fail(Category::kInvalid, "R-SLICE-001",
               Tensor(index, i) + ", slice " + std::to_string(s) + ": the box is empty or leaves the shape");
        }
        count *= extents[at + d];
      }
      BlockLayout& block = (*blocks)[tensor.first_block + s];
      block.first_box_value = at;
      block.element_count = static_cast<uint64_t>(count);
      covered += count;
    }
    // The count first, which is cheap; then the tiling, without comparing
    // every pair (boxes.cpp).
    if (must_tile && covered != tensor.element_count) {
      Fail(Category::kInvalid, "R-SLICE-002", Tensor(index, i) + ": the slices do not cover the shape");
    }
    if (must_tile && !BoxesTile(starts + box_at, extents + box_at, slices, rank, tensor.shape.data())) {
      Fail(Category::kInvalid, "R-SLICE-002",
           Tensor(index, i) + ": the slices overlap (their element counts add up to the shape's)");
    }
    size_t a = 0, b = 0;
    if (!must_tile && !BoxesDisjoint(starts + box_at, extents + box_at, slices, rank, &a, &b)) {
      Fail(Category::kInvalid, "R-SLICE-002",
           Tensor(index, i) + ": slices " + std::to_string(a) + " and " + std::to_string(b) + " overlap");
    }
    box_at += uint64_t(slices) * rank;
  }
}

uint64_t ShardEnd(const v1::Index& index, uint32_t shard, uint64_t index_offset) {
  const auto& entry = index.shards(static_cast<int>(shard));
  return entry.path().empty() ? index_offset : entry.length();
}

void CheckBlockPlacement(const v1::Index& index, uint64_t index_offset) {
  const auto& blocks = index.blocks();
  const uint64_t m = blocks.shards_size();
  for (uint64_t j = 0; j < m; ++j) {                                       // T14
    if (blocks.shards(j) >= uint64_t(index.shards_size())) {
      Fail(Category::kInvalid, "R-SHARD-001",
           Block(j) + " names shard " + std::to_string(blocks.shards(j)) + " of " +
               std::to_string(index.shards_size()));
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T15
    if (blocks.offsets(j) % 64 != 0) {
      Fail(Category::kInvalid, "R-DATA-001", Block(j) + " starts at " + std::to_string(blocks.offsets(j)) + ", not a multiple of 64");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T16
    uint64_t end = ShardEnd(index, blocks.shards(j), index_offset);
    uint64_t offset = blocks.offsets(j);
    if (offset < 64 || offset > end || blocks.stored_lengths(j) > end - offset) {
      Fail(Category::kInvalid, "R-DATA-002", Block(j) + " lies outside its shard's data region");
    }
  }
}

void CheckBlockSizes(const v1::Index& index, const std::vector<BlockLayout>& layout) {
  const auto& blocks = index.blocks();
  const uint64_t m = layout.size();
  for (uint64_t j = 0; j < m; ++j) {                                       // T17
    uint64_t item = ItemSize(index.tensors().dtypes(layout[j].tensor));
    if (item != 0 && u128(layout[j].element_count) * item != blocks.raw_lengths(j)) {
      Fail(Category::kInvalid, "R-TENSOR-005",
           Block(j) + ": raw length " + std::to_string(blocks.raw_lengths(j)) + " is not " +
               std::to_string(layout[j].element_count) + " elements of " + std::to_string(item) + " bytes");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T18
    if (index.tensors().dtypes(layout[j].tensor) == v1::DTYPE_BYTES &&
        blocks.raw_lengths(j) < u128(layout[j].element_count) * 8) {
      Fail(Category::kInvalid, "R-DTYPE-003", Block(j) + ": raw length is shorter than its length table");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T19
    int codec = blocks.codecs(j);
    if (codec != v1::CODEC_NONE && codec != v1::CODEC_ZSTD) {
      Fail(Category::kInvalid, "R-CHUNK-003", Block(j) + " has the undefined codec " + std::to_string(codec));
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T20
    if (blocks.codecs(j) == v1::CODEC_NONE &&
        (blocks.stored_lengths(j) != blocks.raw_lengths(j) || blocks.byte_shuffles(j))) {
      Fail(Category::kInvalid, "R-CHUNK-003",
           Block(j) + ": CODEC_NONE needs stored length = raw length and no byte shuffle");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T21
    if (blocks.byte_shuffles(j) && ItemSize(index.tensors().dtypes(layout[j].tensor)) == 0) {
      Fail(Category::kInvalid, "R-CODEC-002", Block(j) + ": byte shuffle needs a fixed-size dtype");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T22
    uint64_t size = blocks.chunk_sizes(j);
    if (size != 0 && (size % 64 != 0 || size < 4096 || size > (uint64_t(1) << 30))) {
      Fail(Category::kInvalid, "R-CHUNK-001",
           Block(j) + " has chunk size " + std::to_string(size) + ", not 0 nor a multiple of 64 in [4096, 2^30]");
    }
  }
}

uint64_t ChunkCount(uint64_t raw_length, uint64_t chunk_size) {
  if (raw_length == 0) return 0;
  if (chunk_size == 0) return 1;
  return raw_length / chunk_size + (raw_length % chunk_size != 0);
}

void CheckChunks(const v1::Index& index, std::vector<BlockLayout>* layout) {
  const auto& blocks = index.blocks();
  const uint64_t m = layout->size();
  for (uint64_t j = 0; j < m; ++j) {                                       // T23
    uint64_t chunks = ChunkCount(blocks.raw_lengths(j), blocks.chunk_sizes(j));
    if (chunks > kMaxChunks) {
      Fail(Category::kLimitExceeded, "R-CHUNK-001", Block(j) + " has " + std::to_string(chunks) + " chunks, over 2^24");
    }
    (*layout)[j].chunk_count = chunks;
  }
  uint64_t crcs = 0, zstd_lengths = 0;  // at most 2^36 blocks of 2^24 chunks
  for (uint64_t j = 0; j < m; ++j) {
    BlockLayout& block = (*layout)[j];
    block.first_crc = crcs;
    block.first_zstd_length = zstd_lengths;
    crcs += block.chunk_count;
    if (blocks.codecs(j) == v1::CODEC_ZSTD) zstd_lengths += block.chunk_count;
  }
  if (uint64_t(blocks.chunk_crcs_size()) != crcs) {                        // T24
    Fail(Category::kInvalid, "R-CHUNK-002",
         "chunk_crcs holds " + std::to_string(blocks.chunk_crcs_size()) + " values, the blocks have " +
             std::to_string(crcs) + " chunks");
  }
  if (uint64_t(blocks.chunk_stored_lengths_size()) != zstd_lengths) {      // T25
    Fail(Category::kInvalid, "R-CHUNK-004",
         "chunk_stored_lengths holds " + std::to_string(blocks.chunk_stored_lengths_size()) +
             " values, the CODEC_ZSTD blocks have " + std::to_string(zstd_lengths) + " chunks");
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T26
    if (blocks.codecs(j) != v1::CODEC_ZSTD) continue;
    const BlockLayout& block = (*layout)[j];
    u128 sum = 0;
    for (uint64_t c = 0; c < block.chunk_count; ++c) {
      uint64_t stored = blocks.chunk_stored_lengths(block.first_zstd_length + c);
      if (stored == 0) {
        Fail(Category::kInvalid, "R-CHUNK-004", Block(j) + ", chunk " + std::to_string(c) + " has stored length 0");
      }
      sum += stored;
    }
    if (sum != blocks.stored_lengths(j)) {
      Fail(Category::kInvalid, "R-CHUNK-004", Block(j) + ": its chunks' stored lengths do not add up to its stored length");
    }
  }
  for (uint64_t j = 0; j < m; ++j) {                                       // T27
    if (blocks.codecs(j) != v1::CODEC_ZSTD) continue;
    const BlockLayout& block = (*layout)[j];
    uint64_t raw = blocks.raw_lengths(j), size = blocks.chunk_sizes(j);
    for (uint64_t c = 0; c < block.chunk_count; ++c) {
      uint64_t chunk_raw = size == 0 ? raw : std::min<uint64_t>(size, raw - c * size);
      if (chunk_raw > u128(32768) * blocks.chunk_stored_lengths(block.first_zstd_length + c)) {
        Fail(Category::kLimitExceeded, "R-CHUNK-004",
             Block(j) + ", chunk " + std::to_string(c) + " claims over 32768 raw bytes per stored byte");
      }
    }
  }
}

void CheckOverlaps(const v1::Index& index) {                               // T28
  const auto& blocks = index.blocks();
  struct Range { uint32_t shard; uint64_t offset; uint64_t length; uint64_t block; };
  std::vector<Range> ranges;
  for (int j = 0; j < blocks.shards_size(); ++j) {
    if (blocks.stored_lengths(j) > 0) {
      ranges.push_back({blocks.shards(j), blocks.offsets(j), blocks.stored_lengths(j), uint64_t(j)});
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.offset < b.offset;
  });
  for (size_t r = 1; r < ranges.size(); ++r) {
    const Range& before = ranges[r - 1];
    const Range& after = ranges[r];
    // T16 keeps every block inside its shard, so offset + length cannot wrap.
    if (before.shard == after.shard && after.offset < before.offset + before.length) {
      Fail(Category::kInvalid, "R-DATA-003",
           Block(before.block) + " and " + Block(after.block) + " share bytes of shard " + std::to_string(after.shard));
    }
  }
}

void CheckValueDepth(const v1::Value& value, int level, const std::string& where) {
  if (level > kMaxMetadataLevel) {
    Fail(Category::kLimitExceeded, "R-META-002", where + ": a metadata value lies above level 32");
  }
  if (value.kind_case() == v1::Value::kListValue) {
    for (const auto& item : value.list_value().values()) CheckValueDepth(item, level + 1, where);
  } else if (value.kind_case() == v1::Value::kMapValue) {
    for (const auto& entry : value.map_value().entries()) CheckValueDepth(entry.second, level + 1, where);
  }
}

}  // namespace

uint64_t MaxSlices(uint64_t rank) { return rank <= 4 ? 65536 : 4096; }

void CheckMetadataDepth(const google::protobuf::Map<std::string, v1::Value>& metadata,
                        const std::string& where) {
  for (const auto& entry : metadata) CheckValueDepth(entry.second, 0, where);
}

void CheckIndexContent(const v1::Index& index, uint64_t index_offset,
                       std::vector<TensorLayout>* tensors, std::vector<BlockLayout>* blocks,
                       IndexKind kind, const MapEntryFaults& faults) {
  CheckRequiredFeatures(index, kind);                     // step 10
  CheckShards(index);                                     // steps 11 to 13
  CheckTensorColumns(index);                              // T1 to T10
  *tensors = LayOutTensors(index);
  CheckBlockColumnLengths(index, *tensors);               // T11, T12
  blocks->assign(index.blocks().shards_size(), BlockLayout{});
  for (size_t i = 0; i < tensors->size(); ++i) {
    for (uint64_t s = 0; s < (*tensors)[i].block_count; ++s) (*blocks)[(*tensors)[i].first_block + s].tensor = i;
  }
  CheckSlices(index, *tensors, blocks, kind);             // T13
  CheckBlockPlacement(index, index_offset);               // T14 to T16
  CheckBlockSizes(index, *blocks);                        // T17 to T22
  CheckChunks(index, blocks);                             // T23 to T27
  CheckOverlaps(index);                                   // T28
  if (faults.index_metadata) {                            // step 15
    Fail(Category::kInvalid, "R-META-001", "a map entry of Index.metadata holds a field other than its key and value");
  }
  CheckMetadataDepth(index.metadata(), "Index.metadata"); // step 15
}


std::vector<File> OpenShardFiles(const v1::Index& index, const std::string& directory,
                                 const std::string& index_name) {
  std::vector<File> files(index.shards_size());
  for (int s = 0; s < index.shards_size(); ++s) {
    const v1::Shard& shard = index.shards(s);
    if (shard.path().empty()) continue;
    const bool pooled = !shard.pool_sha256().empty();
    const std::string requirement = pooled ? "R-POOL-003" : "R-SHARD-002";
    if (!pooled && AsciiLower(shard.path()) == AsciiLower(index_name)) {
      Fail(Category::kInvalid, "R-SHARD-006", "shard '" + shard.path() + "' names the index file itself");
    }
    File file = pooled ? OpenPoolObject(directory, index_name, shard.path())
                       : OpenFileInDirectory(directory, shard.path(), requirement);
    if (file.size() != shard.length()) {
      Fail(Category::kMalformed, requirement,
           file.name() + ": " + std::to_string(file.size()) + " bytes, the index records " +
               std::to_string(shard.length()));
    }
    if (!HasPreambleMagic(file)) {
      Fail(Category::kMalformed, requirement, file.name() + ": no OCF preamble magic");
    }
    files[s] = std::move(file);
  }
  return files;
}

void CheckPoolIdentities(const v1::Index& index, const std::vector<File>& files) {
  constexpr uint64_t kPiece = uint64_t(16) << 20;
  for (int s = 0; s < index.shards_size(); ++s) {
    const v1::Shard& shard = index.shards(s);
    if (shard.pool_sha256().empty()) continue;
    Sha256 hash;
    for (uint64_t at = 0; at < files[s].size(); at += kPiece) {
      hash.Update(files[s].Read(at, std::min(kPiece, files[s].size() - at)));
    }
    if (hash.Digest() != shard.pool_sha256()) {
      Fail(Category::kIntegrity, "R-POOL-004",
           files[s].name() + ": its SHA-256 is not the pool_sha256 the index records");
    }
  }
}

}  // namespace ocf
