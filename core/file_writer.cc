#include "core/file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace zs {
namespace {

FaultInjector* g_faults = nullptr;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void install_fault_injector(FaultInjector* f) { g_faults = f; }

bool inject_fault(const char* op, const std::string& path, Fault* kind) {
  if (g_faults == nullptr) return false;
  const Fault f = g_faults->at(op, path);
  if (kind) *kind = f;
  if (f == Fault::kNoSpace || f == Fault::kShortWrite) errno = ENOSPC;
  if (f == Fault::kIo) errno = EIO;
  return f == Fault::kNoSpace || f == Fault::kIo;
}

FileWriter::FileWriter(std::string path, Mode mode) : path_(std::move(path)) {
  const bool append = mode == Mode::kAppend;
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  fd_ = inject_fault(append ? "open" : "create", path_) ? -1 : ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0) fail(ErrorCode::kInvalidArgument, "{}: cannot create: {}", path_, errno_text());
}

FileWriter::FileWriter(FileWriter&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), written_(o.written_) {}

FileWriter& FileWriter::operator=(FileWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    written_ = o.written_;
  }
  return *this;
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, size_t bytes) {
  ZS_CHECK(fd_ >= 0, ErrorCode::kInvalidArgument, "{}: write to a file that is not open", path_);
  const char* p = static_cast<const char*>(data);
  bool short_done = false;
  while (bytes > 0) {
    size_t chunk = std::min<size_t>(bytes, size_t{1} << 30);
    Fault f = Fault::kNone;
    const bool fails = !short_done && inject_fault("write", path_, &f);
    if (f == Fault::kShortWrite && chunk > 1) {
      chunk /= 2;  // half is stored; the next attempt fails with ENOSPC
      short_done = true;
    } else if (short_done) {
      errno = ENOSPC;
      fail(ErrorCode::kInvalidArgument, "{}: write failed: {}", path_, errno_text());
    }
    const ssize_t n = fails ? -1 : ::write(fd_, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(ErrorCode::kInvalidArgument, "{}: write failed: {}", path_, errno_text());
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += n;
  }
}

void FileWriter::sync() {
  if (inject_fault("fsync", path_) || ::fsync(fd_) != 0)
    fail(ErrorCode::kInvalidArgument, "{}: fsync failed: {}", path_, errno_text());
}

void FileWriter::close() {
  sync();
  const int fd = std::exchange(fd_, -1);
  const bool fails = inject_fault("close", path_);
  if (::close(fd) != 0 || fails)
    fail(ErrorCode::kInvalidArgument, "{}: close failed: {}", path_, errno_text());
}

void rename_path(const std::string& from, const std::string& to) {
  if (inject_fault("rename", to) || ::rename(from.c_str(), to.c_str()) != 0)
    fail(ErrorCode::kInvalidArgument, "{}: cannot rename to {}: {}", from, to, errno_text());
}

void sync_dir(const std::string& path) {
  if (inject_fault("sync_dir", path))
    fail(ErrorCode::kInvalidArgument, "{}: fsync failed: {}", path, errno_text());
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    fail(ErrorCode::kInvalidArgument, "{}: cannot open directory: {}", path, errno_text());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(ErrorCode::kInvalidArgument, "{}: fsync failed: {}", path, errno_text());
}

}  // namespace zs
