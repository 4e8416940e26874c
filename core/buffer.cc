#include "core/buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace zs {

std::string Device::to_string() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t align = bytes >= kHugePage ? kHugePage : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    ZS_CHECK(p != nullptr, ErrorCode::kOutOfMemory, "host allocation of {} bytes failed", bytes);
    // No MADV_HUGEPAGE: the system's transparent huge page policy decides. Advised huge pages
    // are compacted for at the first touch, which made LLaMA-7B's start-up 54.2 s instead of
    // 42.2 s (2 ranks, 4.5 GB each, Intel Xeon, 2 cores), while a training step and an Adam-shaped
    // stream ran at the same speed either way (docs/benchmarks/real-size.md).
    std::memset(p, 0, bytes);
    return p;
  }
  void deallocate(void* p, size_t) override { std::free(p); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

// Never destroyed: buffers owned by other statics (a program's world communicator, say) may be
// freed after every function-local static of this file is gone.
Allocator& cpu_allocator() {
  static CpuAllocator* alloc = new CpuAllocator;
  return *alloc;
}

Buffer::Buffer(size_t bytes, MemCategory category, MemoryTracker* tracker, Allocator* alloc)
    : bytes_(bytes),
      category_(category),
      tracker_(tracker ? tracker : &MemoryTracker::process()),
      alloc_(alloc ? alloc : &cpu_allocator()) {
  data_ = alloc_->allocate(bytes);
  tracker_->allocated(category_, static_cast<int64_t>(bytes_));
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (alloc_ != nullptr) {
    alloc_->deallocate(data_, bytes_);
    tracker_->freed(category_, static_cast<int64_t>(bytes_));
  }
  data_ = nullptr;
  bytes_ = 0;
  alloc_ = nullptr;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      category_(o.category_),
      tracker_(o.tracker_),
      alloc_(std::exchange(o.alloc_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    category_ = o.category_;
    tracker_ = o.tracker_;
    alloc_ = std::exchange(o.alloc_, nullptr);
  }
  return *this;
}

Device Buffer::device() const { return alloc_ ? alloc_->device() : Device::cpu(); }

}  // namespace zs
