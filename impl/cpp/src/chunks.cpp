#include "chunks.h"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader and ZSTD_frameHeader
#include <zstd.h>

#include <memory>

#include "errors.h"

namespace ocf {
namespace {

[[noreturn]] void NotAFrame(const std::string& what, const std::string& why) {
  Fail(Category::kMalformed, "R-CODEC-001", what + ": " + why);
}

}  // namespace

std::string DecodeZstdFrame(const std::string& stored, uint64_t raw_length, const std::string& what) {
  ZSTD_frameHeader header{};
  if (ZSTD_getFrameHeader(&header, stored.data(), stored.size()) != 0) {
    NotAFrame(what, "the stored bytes do not begin with a complete Zstandard frame header");
  }
  if (header.frameType != ZSTD_frame) NotAFrame(what, "a skippable frame, not a Zstandard frame");
  if (header.dictID != 0) NotAFrame(what, "the frame needs a dictionary");
  if (header.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN && header.frameContentSize != raw_length) {
    NotAFrame(what, "the frame declares " + std::to_string(header.frameContentSize) + " bytes, the chunk holds " +
                        std::to_string(raw_length));
  }
  size_t frame_size = ZSTD_findFrameCompressedSize(stored.data(), stored.size());
  if (ZSTD_isError(frame_size)) NotAFrame(what, std::string("the frame is damaged: ") + ZSTD_getErrorName(frame_size));
  if (frame_size != stored.size()) NotAFrame(what, "bytes follow the frame");
  // One byte of room beyond raw_length tells a frame that decodes too long;
  // [R-CHUNK-004] bounded raw_length by the stored length already.
  std::string raw(raw_length + 1, '\0');
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context) throw std::bad_alloc();
  size_t decoded = ZSTD_decompressDCtx(context.get(), &raw[0], raw.size(), stored.data(), stored.size());
  if (ZSTD_isError(decoded)) NotAFrame(what, std::string("the frame does not decode: ") + ZSTD_getErrorName(decoded));
  if (decoded != raw_length) {
    NotAFrame(what, "the frame decodes to " + std::string(decoded > raw_length ? "more" : "fewer") + " than " +
                        std::to_string(raw_length) + " bytes");
  }
  raw.resize(raw_length);
  return raw;
}

std::string Unshuffle(const std::string& shuffled, uint64_t item_size) {
  const uint64_t count = shuffled.size() / item_size;
  std::string raw(shuffled.size(), '\0');
  for (uint64_t i = 0; i < count; ++i) {
    for (uint64_t j = 0; j < item_size; ++j) raw[i * item_size + j] = shuffled[j * count + i];
  }
  return raw;
}

}  // namespace ocf
