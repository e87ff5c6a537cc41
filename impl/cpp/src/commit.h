// Writing files the way spec/commit.md's commit protocol needs them:
// exclusive creation, fsync of files and directories, atomic rename, write
// ids, and the bytes of an index file.
#pragma once

#include <string>

#include "ocf/v1/index.pb.h"

namespace ocf {

// 16 lowercase hexadecimal digits from the kernel's random source
// (64 bits of entropy, [R-COMMIT-002] step 2).
std::string NewWriteId();

// Creates `path` (failing if it exists, O_CREAT | O_EXCL), writes `bytes`
// and fsyncs it. Throws std::runtime_error on any failure.
void WriteNewFile(const std::string& path, const std::string& bytes);

// fsync of a directory, so that creations and renames in it are durable.
void FsyncDirectory(const std::string& directory);

// Atomic rename within one directory, replacing any target.
void RenameFile(const std::string& from, const std::string& to);

// The directory holding `path` ("." for a bare name).
std::string ParentDirectory(const std::string& path);

// `index` serialized deterministically (fields in number order, map
// entries sorted by key), as [R-FILE-007] recommends.
std::string SerializeIndex(const v1::Index& index);

// The 64-byte preamble every OCF file begins with ([R-FILE-002], [R-FILE-003]).
std::string Preamble();

// A complete index file: preamble, `data_region` (the bytes from offset 64
// on, its length a multiple of 64), the index bytes and the footer of a
// format 1.1 file.
std::string IndexFileBytes(const std::string& data_region, const std::string& index_bytes);

}  // namespace ocf
