// How much host memory this process may still take: the least of what the kernel reports as
// available (MemAvailable in /proc/meminfo), what its memory cgroup still allows (v2
// memory.max - memory.current along the cgroup's path, or v1 memory.limit_in_bytes -
// memory.usage_in_bytes) and what its address-space limit (RLIMIT_AS, ulimit -v) leaves beside
// its current virtual size. Used to refuse, before any work, a run whose memory plan does not fit
// (docs/reliability.md), instead of growing until the OOM killer ends it.
//
// Thread-safety: reads /proc and /sys at every call; safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>

namespace zs {

struct HostMemory {
  // Bytes available to the whole node's processes (MemAvailable and cgroup), and to this process
  // alone (RLIMIT_AS); -1 where unknown or unlimited.
  int64_t node_available = -1;
  int64_t process_available = -1;
  // What limits each: e.g. "MemAvailable", "cgroup /user.slice (memory.max)", "RLIMIT_AS".
  std::string node_source;
  std::string process_source;
};

// Never throws: a figure that cannot be read is left at -1.
HostMemory host_memory();

}  // namespace zs
