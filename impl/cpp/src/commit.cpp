#include "commit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "crc32c.h"

namespace ocf {
namespace {

[[noreturn]] void IoError(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

void AppendLittleEndian(std::string* out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

std::string NewWriteId() {
  unsigned char random[8];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
  }
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char byte : random) {
    id += kHex[byte >> 4];
    id += kHex[byte & 0xF];
  }
  return id;
}

void WriteNewFile(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) IoError("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      ::close(fd);
      IoError("cannot write", path);
    }
    done += static_cast<size_t>(wrote);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    IoError("cannot fsync", path);
  }
  if (::close(fd) != 0) IoError("cannot close", path);
}

void FsyncDirectory(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) IoError("cannot open directory", directory);
  int synced = ::fsync(fd);
  ::close(fd);
  if (synced != 0) IoError("cannot fsync directory", directory);
}

void RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) IoError("cannot rename " + from + " to", to);
}

std::string ParentDirectory(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string SerializeIndex(const v1::Index& index) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    index.SerializeToCodedStream(&coded);
  }
  return bytes;
}

std::string Preamble() {
  static const char kMagic[8] = {'\x89', 'O', 'C', 'F', '\r', '\n', '\x1a', '\n'};
  std::string preamble(kMagic, 8);
  preamble.append(56, '\0');
  return preamble;
}

std::string IndexFileBytes(const std::string& data_region, const std::string& index_bytes) {
  static const char kFooterMagic[8] = {'\x89', 'O', 'C', 'F', 'E', 'N', 'D', '\n'};
  std::string file = Preamble() + data_region;
  const uint64_t index_offset = file.size();
  file += index_bytes;
  AppendLittleEndian(&file, index_offset, 8);
  AppendLittleEndian(&file, index_bytes.size(), 8);
  AppendLittleEndian(&file, Crc32c(index_bytes.data(), index_bytes.size()), 4);
  AppendLittleEndian(&file, 1, 2);  // format_major
  AppendLittleEndian(&file, 2, 2);  // format_minor: this writer implements 1.2 [R-VER-003]
  file.append(kFooterMagic, 8);
  return file;
}

}  // namespace ocf
