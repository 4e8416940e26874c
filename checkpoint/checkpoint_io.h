// Internal helpers of the checkpoint and safetensors modules: POSIX files with checksums and
// fsync, positional reads and directory sync (every rank fails together through
// collectives/fail_together.h). Not a public header.
//
// Thread-safety: objects are used by one thread at a time.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/file_writer.h"

namespace zs::ckpt {

// A file being written (core/file_writer.h): every byte also goes through an XXH3 state. Errors
// are zs::Error naming the path. The destructor closes (without sync) a file that was not
// finished.
class OutFile {
 public:
  explicit OutFile(std::string path);  // creates or truncates
  ~OutFile();
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  void write(const void* data, size_t bytes);
  // fsync and close; afterwards size() and hash() are final.
  void finish();
  int64_t size() const { return size_; }
  uint64_t hash() const;
  const std::string& path() const { return file_.path(); }

 private:
  FileWriter file_;
  int64_t size_ = 0;
  XXH3_state_t* state_ = nullptr;
};

// A file being read. Open throws zs::Error(kNotFound) when it does not exist.
class InFile {
 public:
  explicit InFile(std::string path);
  ~InFile();
  InFile(InFile&& o) noexcept;
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  int64_t size() const { return size_; }
  // Reads exactly `bytes` at `offset`; zs::Error(kCorruptData) when the file is shorter.
  void read_at(int64_t offset, void* data, size_t bytes) const;
  // XXH3_64bits of the whole file, read in large chunks.
  uint64_t hash() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

std::string read_whole_file(const std::string& path, int64_t max_bytes);

// The index of the first element of v[0, n) that is not finite (with `non_negative`: or is below
// zero), or -1. The one check of the values a checkpoint load or an import reads.
int64_t first_nonfinite(const float* v, size_t n, bool non_negative = false);

}  // namespace zs::ckpt
