#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "errors.h"

namespace ocf {
namespace {

// A file that the environment would not let us open is not a format error
// (spec/errors.md, "Outside the categories").
[[noreturn]] void EnvironmentError(const std::string& what, const std::string& name) {
  throw std::runtime_error(what + " " + name + ": " + std::strerror(errno));
}

// Opens `name` read-only (O_NONBLOCK so that a FIFO cannot hang us) and
// returns the descriptor if it names a regular file, or -1.
int OpenRegular(const std::string& name, int extra_flags, uint64_t* size) {
  int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) return -1;
    EnvironmentError("cannot open", name);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    EnvironmentError("cannot stat", name);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return -1;
  }
  *size = static_cast<uint64_t>(info.st_size);
  return fd;
}

// The directory holding `path`, "/" for a file at the root.
std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

File::File(File&& other) noexcept
    : fd_(other.fd_), name_(std::move(other.name_)), size_(other.size_) {
  other.fd_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    name_ = std::move(other.name_);
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

std::string File::Read(uint64_t offset, uint64_t length) const {
  std::string bytes(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    ssize_t got = ::pread(fd_, &bytes[done], length - done, offset + done);
    if (got < 0) {
      if (errno == EINTR) continue;
      EnvironmentError("cannot read", name_);
    }
    if (got == 0) {
      Fail(Category::kMalformed, "R-SHARD-002",
           name_ + ": file ends at " + std::to_string(offset + done) +
               ", before byte " + std::to_string(offset + length));
    }
    done += static_cast<uint64_t>(got);
  }
  return bytes;
}

File OpenIndexFile(const std::string& path, std::string* directory, std::string* index_name) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
      Fail(Category::kNotFound, "R-FILE-008", path + ": nothing exists at this path");
    }
    EnvironmentError("cannot stat", path);
  }
  std::string name = path;
  if (S_ISDIR(info.st_mode)) {
    *directory = path;
    *index_name = "index.ocf";
    name = path + "/index.ocf";
  } else {
    size_t slash = path.rfind('/');
    *directory = slash == std::string::npos ? "." : path.substr(0, slash);
    if (directory->empty()) *directory = "/";
    *index_name = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  uint64_t size = 0;
  int fd = OpenRegular(name, 0, &size);
  if (fd < 0) {
    Fail(Category::kNotFound, "R-FILE-008",
         name + ": no regular file, so no committed checkpoint");
  }
  return File(fd, name, size);
}

File OpenPoolObject(const std::string& directory, const std::string& index_name,
                    const std::string& name) {
  // The managed root: the directory of a single file, the parent of a
  // checkpoint directory, after the links of the path the reader was given.
  char real[PATH_MAX];
  const std::string index_path = directory + "/" + index_name;
  if (::realpath(index_path.c_str(), real) == nullptr) EnvironmentError("cannot resolve", index_path);
  std::string root = Parent(real);
  if (index_name == "index.ocf") root = Parent(root);
  const std::string pool = (root == "/" ? "" : root) + "/ocf-pool";
  int dir = ::open(pool.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP) EnvironmentError("cannot open", pool);
    Fail(Category::kNotFound, "R-POOL-003",
         pool + ": no pool directory (nothing, a file, or a symbolic link, never followed)");
  }
  int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  const int open_errno = errno;
  ::close(dir);
  const std::string full = pool + "/" + name;
  struct stat info {};
  if (fd >= 0 && (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))) {
    ::close(fd);
    fd = -1;
  } else if (fd < 0 && open_errno != ENOENT && open_errno != ELOOP && open_errno != ENOTDIR) {
    errno = open_errno;
    EnvironmentError("cannot open", full);
  }
  if (fd < 0) Fail(Category::kNotFound, "R-POOL-003", full + ": no regular file has this name");
  return File(fd, full, static_cast<uint64_t>(info.st_size));
}

File OpenFileInDirectory(const std::string& directory, const std::string& name,
                         const std::string& requirement) {
  std::string full = directory + "/" + name;
  uint64_t size = 0;
  int fd = OpenRegular(full, O_NOFOLLOW, &size);
  if (fd < 0) {
    Fail(Category::kNotFound, requirement, full + ": no regular file has this name");
  }
  return File(fd, full, size);
}

}  // namespace ocf
