// Internal helpers of the checkpoint and safetensors modules: POSIX files with checksums and
// fsync, positional reads, directory sync, and the collective agreement that makes every rank
// fail together. Not a public header.
//
// Thread-safety: objects are used by one thread at a time.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "collectives/communicator.h"

namespace zs::ckpt {

// A file being written: every byte goes through an XXH3 state. Errors are zs::Error naming the
// path. The destructor closes (without sync) a file that was not finished.
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
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
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
// fsync of a directory (its entries: created, renamed files).
void sync_dir(const std::string& path);
// rename(2) of a file or directory (the commit point of a save or export).
void rename_path(const std::string& from, const std::string& to);

// [Note: fault injection] Every write point of the checkpoint and export I/O (creating a file,
// each write(2), fsync, close, a directory sync, the final rename) asks the process's
// FaultInjector, when one is installed, whether to fail there and how — leveldb's
// fault-injection environment is the model. kNoSpace and kIo fail the call with ENOSPC / EIO;
// kShortWrite makes a write(2) store only half its bytes (a disk filling up mid-write), after
// which the next attempt fails with ENOSPC. The error then takes the same path as a real one:
// a zs::Error naming the path and errno's text, agreed by every rank. For tests only;
// install_fault_injector(nullptr) removes it. Not thread-safe: install it between saves.
enum class Fault { kNone, kNoSpace, kIo, kShortWrite };
class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // `op`: "create", "write", "fsync", "close", "sync_dir" or "rename"; `path`: the file.
  virtual Fault at(const char* op, const std::string& path) = 0;
};
void install_fault_injector(FaultInjector* f);

// The index of the first element of v[0, n) that is not finite (with `non_negative`: or is below
// zero), or -1. The one check of the values a checkpoint load or an import reads.
int64_t first_nonfinite(const float* v, size_t n, bool non_negative = false);

// Runs fn() on this rank, then agrees with every rank of comm (one all-reduce, plus a broadcast
// on failure): when any rank threw, every rank throws the zs::Error of the lowest failing rank
// (its code and message, prefixed with that rank). Collective.
void agree(Communicator& comm, const std::function<void()>& fn);

}  // namespace zs::ckpt
