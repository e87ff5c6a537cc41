// Decodes an OCF index file with the C++ classes protoc generates from
// proto/ and prints the summary of bindings/appendix_a.expected. A binding
// example, not a reader: it runs none of the checks of spec/format.md.
//
//   decode_appendix_a spec/examples/minimal.ocf
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "ocf/v1/index.pb.h"

namespace {

uint64_t LittleEndian(const std::string& bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

void PrintTables(const ocf::v1::Index& index, const std::string& file) {
  const auto& tensors = index.tensors();
  std::printf("tensors count=%d\n", tensors.keys_size());
  for (int i = 0, dim = 0; i < tensors.keys_size(); ++i) {
    std::string shape;
    for (uint32_t d = 0; d < tensors.ranks(i); ++d, ++dim) {
      shape += (d ? ", " : "") + std::to_string(tensors.dims(dim));
    }
    std::printf("tensor %d key=\"%s\" dtype=%s shape=[%s] slice_count=%u\n", i, tensors.keys(i).c_str(),
                ocf::v1::Dtype_Name(tensors.dtypes(i)).c_str(), shape.c_str(), tensors.slice_counts(i));
  }
  const auto& blocks = index.blocks();
  std::printf("blocks count=%d\n", blocks.offsets_size());
  for (int j = 0; j < blocks.offsets_size(); ++j) {
    std::printf("block %d shard=%u offset=%" PRIu64 " stored_length=%" PRIu64 " raw_length=%" PRIu64
                " codec=%s byte_shuffle=%s chunk_size=%" PRIu64 "\n",
                j, blocks.shards(j), blocks.offsets(j), blocks.stored_lengths(j), blocks.raw_lengths(j),
                ocf::v1::Codec_Name(blocks.codecs(j)).c_str(), blocks.byte_shuffles(j) ? "true" : "false",
                blocks.chunk_sizes(j));
  }
  std::string crcs;
  for (uint32_t crc : blocks.chunk_crcs()) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", crc);
    crcs += (crcs.empty() ? "" : ", ") + std::string(hex);
  }
  std::printf("chunk_crcs [%s]\n", crcs.c_str());
  // The first tensor's values, read as little-endian float32 from its first
  // block (the example's tensor is float32, stored whole with CODEC_NONE).
  std::string values;
  for (uint64_t at = 0; at < blocks.raw_lengths(0); at += 4) {
    uint32_t bits = static_cast<uint32_t>(LittleEndian(file, blocks.offsets(0) + at, 4));
    float value;
    std::memcpy(&value, &bits, 4);
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", value);
    values += (values.empty() ? "" : ", ") + std::string(text);
  }
  std::printf("data %s=[%s]\n", tensors.keys(0).c_str(), values.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.ocf\n", argv[0]);
    return 2;
  }
  std::ifstream stream(argv[1], std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  const std::string footer = file.substr(file.size() - 32);
  const uint64_t index_offset = LittleEndian(footer, 0, 8), index_length = LittleEndian(footer, 8, 8);
  ocf::v1::Index index;
  if (!index.ParseFromString(file.substr(index_offset, index_length))) {
    std::fprintf(stderr, "the index does not parse\n");
    return 1;
  }
  std::printf("footer index_offset=%" PRIu64 " index_length=%" PRIu64 " index_crc32c=0x%08" PRIx64
              " format=%" PRIu64 ".%" PRIu64 "\n",
              index_offset, index_length, LittleEndian(footer, 16, 4), LittleEndian(footer, 20, 2),
              LittleEndian(footer, 22, 2));
  std::printf("header required_features=%d writer=\"%s\"\n", index.header().required_features_size(),
              index.header().writer().c_str());
  std::printf("shards count=%d\n", index.shards_size());
  for (int s = 0; s < index.shards_size(); ++s) {
    std::printf("shard %d path=\"%s\" length=%" PRIu64 "\n", s, index.shards(s).path().c_str(),
                index.shards(s).length());
  }
  PrintTables(index, file);
  for (const auto& [key, value] : index.metadata()) {
    if (value.kind_case() == ocf::v1::Value::kIntValue) {
      std::printf("metadata %s int_value=%" PRId64 "\n", key.c_str(), value.int_value());
    } else {
      std::printf("metadata %s kind=%d\n", key.c_str(), static_cast<int>(value.kind_case()));
    }
  }
  std::printf("object_graph %s\n", index.has_object_graph() ? "present" : "absent");
  return 0;
}
