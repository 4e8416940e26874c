// Writing files with every failure reported: the one file layer under the checkpoint writer
// (checkpoint/checkpoint_io.h), the safetensors export and zs_train's run log. POSIX calls; a
// short write is retried until every byte is stored or write(2) fails; each failure is a zs::Error
// naming the path and errno's text.
//
// [Note: fault injection] Every write point (creating or opening a file, each write(2), fsync,
// close, a directory sync, a rename) asks the process's FaultInjector, when one is installed,
// whether to fail there and how — leveldb's fault-injection environment is the model. kNoSpace
// and kIo fail the call with ENOSPC / EIO; kShortWrite makes a write(2) store only half its bytes
// (a disk filling up mid-write), after which the next attempt fails with ENOSPC. The error then
// takes the same path as a real one. For tests only; install_fault_injector(nullptr) removes it.
//
// Thread-safety: a FileWriter is used by one thread at a time; install the injector while no file
// is being written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zs {

enum class Fault { kNone, kNoSpace, kIo, kShortWrite };

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // `op`: "create", "open", "write", "fsync", "close", "sync_dir" or "rename"; `path`: the file.
  virtual Fault at(const char* op, const std::string& path) = 0;
};
void install_fault_injector(FaultInjector* f);

// The installed injector's verdict for one write point: sets errno (ENOSPC or EIO) and returns
// true when the call must fail; `kind` receives the fault (kShortWrite does not fail the call).
bool inject_fault(const char* op, const std::string& path, Fault* kind = nullptr);

class FileWriter {
 public:
  enum class Mode {
    kTruncate,  // create, or cut an existing file to nothing ("create" write point)
    kAppend,    // create, or add after what the file holds ("open" write point)
  };
  FileWriter() = default;  // not open
  // Opens `path`. Throws zs::Error(kInvalidArgument) "<path>: cannot create: <errno text>".
  FileWriter(std::string path, Mode mode);
  FileWriter(FileWriter&& o) noexcept;
  FileWriter& operator=(FileWriter&& o) noexcept;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  ~FileWriter();  // closes without sync a file that was not closed

  bool is_open() const { return fd_ >= 0; }
  // Stores every byte or throws "<path>: write failed: <errno text>" (the bytes written before
  // the failure stay in the file).
  void write(const void* data, size_t bytes);
  // fsync; throws "<path>: fsync failed: ...".
  void sync();
  // sync() and close(2); throws "<path>: close failed: ...". The writer is then not open.
  void close();
  int64_t bytes_written() const { return written_; }  // by this writer
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t written_ = 0;
};

// fsync of a directory (its entries: created, renamed files). Throws zs::Error naming it.
void sync_dir(const std::string& path);
// rename(2) of a file or directory (the commit point of a save or export). Throws zs::Error.
void rename_path(const std::string& from, const std::string& to);

}  // namespace zs
