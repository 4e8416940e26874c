#include "checkpoint/checkpoint_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "core/error.h"

namespace zs::ckpt {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

OutFile::OutFile(std::string path) : file_(std::move(path), FileWriter::Mode::kTruncate) {
  state_ = XXH3_createState();
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_);
}

OutFile::~OutFile() { XXH3_freeState(state_); }

void OutFile::write(const void* data, size_t bytes) {
  XXH3_64bits_update(state_, data, bytes);
  file_.write(data, bytes);
  size_ = file_.bytes_written();
}

void OutFile::finish() { file_.close(); }

uint64_t OutFile::hash() const { return XXH3_64bits_digest(state_); }

InFile::InFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) fail(ErrorCode::kNotFound, "{}: file not found", path_);
    fail(ErrorCode::kInvalidArgument, "{}: cannot open: {}", path_, errno_text());
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail(ErrorCode::kInvalidArgument, "{}: not a regular file", path_);
  }
  size_ = st.st_size;
}

InFile::~InFile() {
  if (fd_ >= 0) ::close(fd_);
}

InFile::InFile(InFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) {
  o.fd_ = -1;
}

void InFile::read_at(int64_t offset, void* data, size_t bytes) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, std::min<size_t>(bytes, size_t{1} << 30), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail(ErrorCode::kCorruptData, "{}: read failed at byte {}: {}", path_, offset, errno_text());
    if (n == 0)
      fail(ErrorCode::kCorruptData, "{}: truncated: no data at byte {} (file has {} bytes)", path_,
           offset, size_);
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += n;
  }
}

uint64_t InFile::hash() const {
  XXH3_state_t* st = XXH3_createState();
  if (st == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(st);
  std::vector<char> buf(size_t{4} << 20);
  int64_t off = 0;
  try {
    while (off < size_) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(buf.size(), size_ - off));
      read_at(off, buf.data(), n);
      XXH3_64bits_update(st, buf.data(), n);
      off += static_cast<int64_t>(n);
    }
  } catch (...) {
    XXH3_freeState(st);
    throw;
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string read_whole_file(const std::string& path, int64_t max_bytes) {
  InFile f(path);
  if (f.size() > max_bytes)
    fail(ErrorCode::kCorruptData, "{}: {} bytes, more than the {} allowed", path, f.size(),
         max_bytes);
  std::string s(static_cast<size_t>(f.size()), '\0');
  f.read_at(0, s.data(), s.size());
  return s;
}

int64_t first_nonfinite(const float* v, size_t n, bool non_negative) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i]) || (non_negative && v[i] < 0.0f)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace zs::ckpt
