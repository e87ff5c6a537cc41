#include "checkpoint.h"

#include <cstring>
#include <string_view>

#include "chunks.h"
#include "container.h"
#include "crc32c.h"
#include "dtypes.h"
#include "errors.h"
#include "graph.h"
#include "index_checks.h"

namespace ocf {
namespace {


// Calls run(global element, box element, count) for each run of elements
// that a box of a tensor of `shape` holds contiguously in both C orders:
// one run per position of the box's dimensions but the last.
template <typename Run>
void ForEachRun(const std::vector<uint64_t>& shape, const uint64_t* start, const uint64_t* extent, Run run) {
  const size_t rank = shape.size();
  if (rank == 0) {
    run(0, 0, 1);
    return;
  }
  std::vector<uint64_t> position(rank - 1, 0);  // within the box, outer dimensions
  const uint64_t length = extent[rank - 1];
  uint64_t box_element = 0;
  while (true) {
    uint64_t global = 0;
    for (size_t d = 0; d + 1 < rank; ++d) global = global * shape[d] + start[d] + position[d];
    global = global * shape[rank - 1] + start[rank - 1];
    run(global, box_element, length);
    box_element += length;
    size_t d = rank - 1;  // advance the outer dimensions like an odometer
    while (true) {
      if (d == 0) return;
      --d;
      if (++position[d] < extent[d]) break;
      position[d] = 0;
    }
  }
}

std::string JoinByteStrings(const std::vector<std::string_view>& elements) {
  std::string canonical;
  for (std::string_view element : elements) {
    uint64_t length = element.size();
    for (int i = 0; i < 8; ++i) canonical += static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  for (std::string_view element : elements) canonical.append(element);
  return canonical;
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::Open(const std::string& path) {
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  Checkpoint& c = *checkpoint;
  c.index_file_ = OpenIndexFile(path, &c.directory_, &c.index_name_);          // step 1
  MapEntryFaults faults;
  c.index_offset_ = ReadIndex(c.index_file_, &c.index_, &faults);              // steps 2 to 9
  CheckIndexContent(c.index_, c.index_offset_, &c.tensors_, &c.blocks_,        // steps 10 to 15
                    IndexKind::kCheckpoint, faults);
  c.shard_files_ = OpenShardFiles(c.index_, c.directory_, c.index_name_);      // step 16
  CheckPoolIdentities(c.index_, c.shard_files_);                               // step 16b
  // The adapter uses the graph, so it checks it now, before any tensor
  // byte ([R-GRAPH-001]; presence is field presence).
  if (c.index_.has_object_graph()) CheckGraph(c.index_, faults);
  return checkpoint;
}

std::string Checkpoint::ReadBlock(uint64_t j) const {
  const v1::BlockTable& table = index_.blocks();
  const BlockLayout& block = blocks_[j];
  const TensorLayout& tensor = tensors_[block.tensor];
  const uint32_t shard = table.shards(j);
  const File& file = index_.shards(shard).path().empty() ? index_file_ : shard_files_[shard];
  const uint64_t raw_length = table.raw_lengths(j), chunk_size = table.chunk_sizes(j);
  const bool zstd = table.codecs(j) == v1::CODEC_ZSTD;
  std::string name = "tensor '" + key(block.tensor) + "'";
  if (index_.tensors().slice_counts(block.tensor) > 0) name += ", slice " + std::to_string(j - tensor.first_block);
  std::string raw;
  raw.reserve(raw_length);
  uint64_t stored_at = table.offsets(j);
  for (uint64_t c = 0; c < block.chunk_count; ++c) {
    const uint64_t chunk_raw = chunk_size == 0 ? raw_length : std::min(chunk_size, raw_length - c * chunk_size);
    const uint64_t chunk_stored = zstd ? table.chunk_stored_lengths(block.first_zstd_length + c) : chunk_raw;
    const std::string stored = file.Read(stored_at, chunk_stored);
    stored_at += chunk_stored;
    const std::string what = file.name() + ": " + name + ", chunk " + std::to_string(c);
    const uint32_t expected = table.chunk_crcs(block.first_crc + c);
    const uint32_t actual = Crc32c(stored.data(), stored.size());
    if (actual != expected) {
      Fail(Category::kIntegrity, "R-CRC-001",
           what + " has CRC-32C " + std::to_string(actual) + ", the index says " + std::to_string(expected));
    }
    if (!zstd) {
      raw += stored;
      continue;
    }
    std::string decoded = DecodeZstdFrame(stored, chunk_raw, what);
    if (table.byte_shuffles(j)) decoded = Unshuffle(decoded, ItemSize(dtype(block.tensor)));
    raw += decoded;
  }
  return raw;
}

std::string Checkpoint::CanonicalBytes(size_t i) const {
  const TensorLayout& tensor = tensors_[i];
  const bool sliced = index_.tensors().slice_counts(i) > 0;
  const std::string what = "tensor '" + key(i) + "'";
  std::vector<std::string> raws;
  std::vector<std::vector<std::string_view>> byte_strings;  // per block, for DTYPE_BYTES
  for (uint64_t s = 0; s < tensor.block_count; ++s) {
    const uint64_t j = tensor.first_block + s;
    raws.push_back(ReadBlock(j));                                              // step 17
    const std::string block = sliced ? what + ", slice " + std::to_string(s) : what;
    if (dtype(i) == v1::DTYPE_BYTES) {                                         // step 18
      byte_strings.push_back(SplitByteStrings(raws.back(), blocks_[j].element_count, block));
    } else if (dtype(i) == v1::DTYPE_BOOL &&
               raws.back().find_first_not_of(std::string("\0\1", 2)) != std::string::npos) {
      Fail(Category::kInvalid, "R-DTYPE-002", block + ": a bool element is neither 00 nor 01");
    }
  }
  if (!sliced) return raws[0];
  std::vector<std::string_view> elements;
  std::string canonical;
  const uint64_t item = ItemSize(dtype(i));
  if (dtype(i) == v1::DTYPE_BYTES) {
    elements.resize(static_cast<uint64_t>(tensor.element_count));
  } else {
    canonical.assign(static_cast<uint64_t>(tensor.element_count) * item, '\0');
  }
  for (uint64_t s = 0; s < tensor.block_count; ++s) {
    const uint64_t at = blocks_[tensor.first_block + s].first_box_value;
    ForEachRun(tensor.shape, index_.blocks().slice_starts().data() + at, index_.blocks().slice_extents().data() + at,
               [&](uint64_t global, uint64_t local, uint64_t count) {
                 if (dtype(i) == v1::DTYPE_BYTES) {
                   for (uint64_t e = 0; e < count; ++e) elements[global + e] = byte_strings[s][local + e];
                 } else {
                   std::memcpy(&canonical[global * item], raws[s].data() + local * item, count * item);
                 }
               });
  }
  return dtype(i) == v1::DTYPE_BYTES ? JoinByteStrings(elements) : canonical;
}

}  // namespace ocf
