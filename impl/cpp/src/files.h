// Opening the files of a checkpoint: the index file from the path a user
// gives [R-FILE-008], and external shards by name in its directory
// [R-SHARD-001] [R-SHARD-002], never through a symbolic link.
#pragma once

#include <cstdint>
#include <string>

namespace ocf {

// An open file, closed when the object goes away.
class File {
 public:
  File() = default;
  File(int fd, std::string name, uint64_t size)
      : fd_(fd), name_(std::move(name)), size_(size) {}
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  // Exactly `length` bytes from `offset`; a file that ends early is
  // MALFORMED (it shrank after its checks, spec/errors.md).
  std::string Read(uint64_t offset, uint64_t length) const;

 private:
  int fd_ = -1;
  std::string name_;
  uint64_t size_ = 0;
};

// The index file of the checkpoint at `path`, the directory that holds it
// and its name there: `path` itself if it is a regular file, else
// `path`/index.ocf; NOT_FOUND when there is none [R-FILE-008].
File OpenIndexFile(const std::string& path, std::string* directory, std::string* name);

// The regular file `name` in `directory`, not followed through a symbolic
// link; NOT_FOUND, citing `requirement`, when there is no such regular
// file (a shard [R-SHARD-002], a part index [R-PART-004]).
File OpenFileInDirectory(const std::string& directory, const std::string& name,
                         const std::string& requirement);

// The pool object `name` of the managed root of the index file `directory`/
// `index_name` (spec/pool.md): in the directory ocf-pool of that root, with
// no symbolic link followed, neither at ocf-pool nor at `name`; NOT_FOUND
// otherwise [R-POOL-003].
File OpenPoolObject(const std::string& directory, const std::string& index_name,
                    const std::string& name);

}  // namespace ocf
