#include "core/host_memory.h"

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace zs {
namespace {

// The first number in `path` (a /sys or /proc file), or -1 ("max", missing, unreadable).
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word[0] < '0' || word[0] > '9') return -1;
  return std::strtoll(word.c_str(), nullptr, 10);
}

// "<key>: <value> kB" of /proc/<self>/<file> in bytes, or -1.
int64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream v(line.substr(key.size() + 1));
    int64_t kb = -1;
    v >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

void take_min(int64_t bytes, const std::string& source, int64_t& best, std::string& best_source) {
  if (bytes < 0) return;
  if (best < 0 || bytes < best) {
    best = bytes;
    best_source = source;
  }
}

// limit - usage of the cgroup at `path` under `root` and of each ancestor, the least into best.
// v1 reports "no limit" as a page-rounded LONG_MAX, v2 as "max" (read as -1).
void walk_cgroup(const std::string& root, std::string path, const char* max_file,
                 const char* cur_file, int64_t& best, std::string& source) {
  for (;;) {
    const std::string dir = root + (path == "/" ? std::string() : path);
    const int64_t max = read_number(dir + "/" + max_file);
    const int64_t cur = read_number(dir + "/" + cur_file);
    if (max >= 0 && cur >= 0 && max < (int64_t{1} << 60))
      take_min(max > cur ? max - cur : 0, fmt::format("cgroup {} ({})", path, max_file), best,
               source);
    if (path == "/" || path.empty()) break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// The memory cgroup's headroom, v2 ("0::<path>") or v1 ("N:memory:<path>").
void cgroup_headroom(int64_t& best, std::string& source) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) {
      walk_cgroup("/sys/fs/cgroup", line.substr(3), "memory.max", "memory.current", best, source);
    } else if (const size_t at = line.find(":memory:"); at != std::string::npos) {
      walk_cgroup("/sys/fs/cgroup/memory", line.substr(at + 8), "memory.limit_in_bytes",
                  "memory.usage_in_bytes", best, source);
    }
  }
}

}  // namespace

HostMemory host_memory() {
  HostMemory m;
  take_min(proc_kb("/proc/meminfo", "MemAvailable"), "MemAvailable", m.node_available,
           m.node_source);
  cgroup_headroom(m.node_available, m.node_source);
  struct rlimit rl {};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const int64_t used = proc_kb("/proc/self/status", "VmSize");
    const int64_t limit = static_cast<int64_t>(rl.rlim_cur);
    if (used >= 0) {
      m.process_available = limit > used ? limit - used : 0;
      m.process_source = "RLIMIT_AS (ulimit -v)";
    }
  }
  return m;
}

}  // namespace zs
