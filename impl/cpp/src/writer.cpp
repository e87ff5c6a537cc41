#include "writer.h"

#include <errno.h>
#include <sys/stat.h>

#include <cstring>
#include <stdexcept>

#include "checkpoint.h"
#include "commit.h"
#include "crc32c.h"
#include "dtypes.h"
#include "errors.h"
#include "graph.h"
#include "index_checks.h"

namespace ocf {
namespace {

constexpr uint64_t kAlignment = 64;

// Lays the tensors out in one data region from file offset 64 on, each
// block at the next multiple of 64, and fills the tensor and block tables.
std::string PackBlocks(const Source& source, v1::Index* index) {
  std::string data;
  v1::TensorTable* tensors = index->mutable_tensors();
  v1::BlockTable* blocks = index->mutable_blocks();
  for (const SourceTensor& tensor : source.tensors) {
    tensors->add_keys(tensor.key);
    tensors->add_dtypes(static_cast<v1::Dtype>(tensor.dtype));
    tensors->add_ranks(static_cast<uint32_t>(tensor.shape.size()));
    for (uint64_t dim : tensor.shape) tensors->add_dims(dim);
    tensors->add_slice_counts(0);
    data.append((kAlignment - data.size() % kAlignment) % kAlignment, '\0');
    blocks->add_shards(0);
    blocks->add_offsets(kAlignment + data.size());
    blocks->add_stored_lengths(tensor.bytes.size());
    blocks->add_raw_lengths(tensor.bytes.size());
    blocks->add_codecs(v1::CODEC_NONE);
    blocks->add_byte_shuffles(false);
    blocks->add_chunk_sizes(0);  // one chunk, none when the block is empty
    if (!tensor.bytes.empty()) blocks->add_chunk_crcs(Crc32c(tensor.bytes.data(), tensor.bytes.size()));
    data += tensor.bytes;
  }
  data.append((kAlignment - data.size() % kAlignment) % kAlignment, '\0');
  return data;
}

// What a reader checks of the index alone, the byte-string tables and the
// bool bytes, so that the writer never commits a checkpoint a reader would
// refuse.
void CheckBeforeWriting(const Source& source, const v1::Index& index, uint64_t index_offset) {
  std::vector<TensorLayout> tensors;
  std::vector<BlockLayout> blocks;
  CheckIndexContent(index, index_offset, &tensors, &blocks);
  if (index.has_object_graph()) CheckGraph(index);
  for (size_t i = 0; i < source.tensors.size(); ++i) {
    const SourceTensor& tensor = source.tensors[i];
    if (tensor.dtype == v1::DTYPE_BYTES) SplitByteStrings(tensor.bytes, blocks[i].element_count, "'" + tensor.key + "'");
    if (tensor.dtype == v1::DTYPE_BOOL && tensor.bytes.find_first_not_of(std::string("\0\1", 2)) != std::string::npos) {
      Fail(Category::kInvalid, "R-DTYPE-002", "'" + tensor.key + "': a bool element is neither 00 nor 01");
    }
  }
}

void WriteSingleFile(const Source& source, v1::Index index, const std::string& output) {
  const std::string data = PackBlocks(source, &index);
  if (!source.tensors.empty()) index.add_shards();  // the index file itself, length 0
  CheckBeforeWriting(source, index, kAlignment + data.size());
  const std::string directory = ParentDirectory(output);
  const std::string name = output.substr(output.rfind('/') + 1);
  const std::string temporary = directory + "/." + name + ".ocf-tmp-" + NewWriteId();
  try {
    WriteNewFile(temporary, IndexFileBytes(data, SerializeIndex(index)));  // steps 1 to 3
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  RenameFile(temporary, output);                                          // step 4
  FsyncDirectory(directory);                                              // step 5
}

void WriteDirectory(const Source& source, v1::Index index, const std::string& output) {
  if (::mkdir(output.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create " + output + ": " + std::strerror(errno));
  }
  FsyncDirectory(ParentDirectory(output));                                // step 1
  const std::string write_id = NewWriteId();                              // step 2
  const std::string data = PackBlocks(source, &index);
  std::string shard_bytes;
  if (!source.tensors.empty()) {
    shard_bytes = Preamble() + data;
    v1::Shard* shard = index.add_shards();
    shard->set_path("data-" + write_id + "-00000.ocfd");
    shard->set_length(shard_bytes.size());
  }
  CheckBeforeWriting(source, index, kAlignment);
  if (!source.tensors.empty()) {
    WriteNewFile(output + "/" + index.shards(0).path(), shard_bytes);     // steps 3, 4
  }
  const std::string temporary = output + "/.index.ocf.ocf-tmp-" + write_id;
  WriteNewFile(temporary, IndexFileBytes("", SerializeIndex(index)));    // step 5
  FsyncDirectory(output);                                                 // step 6
  RenameFile(temporary, output + "/index.ocf");                           // step 7
  FsyncDirectory(output);                                                 // step 8
}

}  // namespace

void WriteCheckpoint(Source source, const std::string& output, Layout layout) {
  v1::Index index = source.index;
  index.mutable_header()->set_writer("ocf-cpp 0.1.0");
  if (layout == Layout::kFile) {
    struct stat info {};
    if (::stat(output.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      throw std::runtime_error(output + " is a directory; a single-file checkpoint cannot go there");
    }
    WriteSingleFile(source, std::move(index), output);
  } else {
    WriteDirectory(source, std::move(index), output);
  }
}

}  // namespace ocf
