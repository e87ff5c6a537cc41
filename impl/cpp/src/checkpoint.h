// An opened OCF checkpoint: the index file and shards checked as
// spec/format.md, "Reader's order of checks", steps 1 to 16 say, then the
// object graph as spec/objects.md, "Order of checks", says (the order of a
// full verification, [R-VERIFY-001]), and every tensor readable in full
// (steps 17 and 18).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "files.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// Where a tensor's rows start in the block table, with its shape.
struct TensorLayout {
  std::vector<uint64_t> shape;
  uint64_t first_block = 0;   // b_i
  uint64_t block_count = 0;   // max(1, slice_counts[i])
  unsigned __int128 element_count = 0;
};

// Where a block's values start in the variable-length columns.
struct BlockLayout {
  uint64_t tensor = 0;
  uint64_t chunk_count = 0;       // n_j
  uint64_t first_crc = 0;         // p_j
  uint64_t first_zstd_length = 0; // q_j (meaningful for CODEC_ZSTD)
  uint64_t first_box_value = 0;   // u_j (meaningful for a slice)
  uint64_t element_count = 0;     // c_j
};

class Checkpoint {
 public:
  // Opens the checkpoint at `path` (a file, or a directory holding
  // index.ocf) and runs every check of open time, the object graph's
  // included; throws FormatError for the first that fails.
  static std::unique_ptr<Checkpoint> Open(const std::string& path);

  const v1::Index& index() const { return index_; }
  const std::string& key(size_t tensor) const { return index_.tensors().keys(tensor); }
  int dtype(size_t tensor) const { return index_.tensors().dtypes(tensor); }
  const TensorLayout& tensor(size_t tensor) const { return tensors_[tensor]; }
  size_t tensor_count() const { return tensors_.size(); }

  // The tensor's canonical bytes (conformance/protocol.md, "Tensors"):
  // reads every chunk of every block, verifying checksums and decoding, and
  // checks each block's byte-string table or bool bytes before the next
  // block (steps 17 and 18).
  std::string CanonicalBytes(size_t tensor) const;

 private:
  Checkpoint() = default;
  std::string ReadBlock(uint64_t block) const;

  File index_file_;
  std::string directory_;
  std::string index_name_;  // the index file's name in directory_
  uint64_t index_offset_ = 0;
  v1::Index index_;
  std::vector<TensorLayout> tensors_;
  std::vector<BlockLayout> blocks_;
  std::vector<File> shard_files_;  // by shard number; the index file's slot is unused
};

}  // namespace ocf
