#include "collectives/flight_recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/settings.h"

namespace zs {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

thread_local char t_tag[48] = {};

std::atomic<bool> g_usr1{false};
std::atomic<bool> g_watchdog_started{false};  // the thread runs
std::mutex g_watchdog_mu;                     // orders the setters below
bool g_watchdog_set = false;                  // a timeout was set (guarded by g_watchdog_mu)
std::atomic<double> g_watchdog_timeout{0.0};  // seconds; 0: do not fire
std::atomic<bool> g_stopping{false};  // the process is exiting normally: publish nothing more
std::string* g_dump_path = nullptr;   // this rank's dump file, removed at a normal exit

// At a normal exit, this rank's file and (when it is the last) the directory go: a finished job
// leaves nothing behind. A watchdog exit (std::_Exit) keeps them.
void remove_dump_at_exit() {
  g_stopping.store(true);
  if (g_dump_path == nullptr) return;
  std::remove(g_dump_path->c_str());
  const size_t slash = g_dump_path->rfind('/');
  if (slash != std::string::npos) ::rmdir(g_dump_path->substr(0, slash).c_str());
}

void on_sigusr1(int) { g_usr1.store(true); }

std::string describe(const FlightEntry& e) {
  std::string s = "seq " + std::to_string(e.seq) + " " + std::string(collective_kind_name(e.kind)) +
                  " " + std::to_string(e.bytes) + " B " + std::string(dtype_name(e.dtype));
  if (e.tag[0] != '\0') s += " [" + std::string(e.tag) + "]";
  return s;
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

CollectiveKind kind_from_name(const std::string& n, bool* ok) {
  for (int k = 0; k < static_cast<int>(CollectiveKind::kCount); ++k) {
    if (collective_kind_name(static_cast<CollectiveKind>(k)) == n) {
      return static_cast<CollectiveKind>(k);
    }
  }
  *ok = false;
  return CollectiveKind::kBarrier;
}

DType dtype_from_name(const std::string& n, bool* ok) {
  for (int d = 0; d <= static_cast<int>(DType::kF64); ++d) {
    const auto t = static_cast<DType>(d);
    if (dtype_name(t) == n) return t;
  }
  *ok = false;
  return DType::kU8;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The ring

uint64_t FlightRecorder::begin(CollectiveKind kind, uint64_t bytes, DType dtype) {
  const double t = now_seconds();
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t seq = next_++;
  FlightEntry& e = ring_[seq % kCapacity];
  e = FlightEntry{};
  e.seq = seq;
  e.kind = kind;
  e.bytes = bytes;
  e.dtype = dtype;
  std::memcpy(e.tag, t_tag, sizeof e.tag);
  e.start_s = t;
  ++version_;
  return seq;
}

void FlightRecorder::finish(uint64_t seq) {
  const double t = now_seconds();
  std::lock_guard<std::mutex> lock(mu_);
  FlightEntry& e = ring_[seq % kCapacity];
  if (e.seq != seq) return;
  e.finish_s = t;
  ++version_;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  const uint64_t first = next_ > kCapacity ? next_ - kCapacity : 1;
  for (uint64_t s = first; s < next_; ++s) out.push_back(ring_[s % kCapacity]);
  return out;
}

uint64_t FlightRecorder::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

FlightRecorder& flight_recorder() {
  static FlightRecorder* r = new FlightRecorder();  // never destroyed: the watchdog reads it
  return *r;
}

void set_flight_tag(const char* tag) {
  size_t i = 0;
  for (; tag != nullptr && tag[i] != '\0' && i + 1 < sizeof t_tag; ++i) {
    const char c = tag[i];
    t_tag[i] = (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? '_' : c;
  }
  t_tag[i] = '\0';
}

const char* flight_tag() { return t_tag; }

// ---------------------------------------------------------------------------------------------
// The dump: one entry per line, fields in a fixed order (parse_flight_json relies on it).

std::string flight_json(int rank, int size, double now_s, const std::vector<FlightEntry>& entries) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "{\"rank\": %d, \"size\": %d, \"written\": %.6f, \"entries\": [\n",
                rank, size, now_s);
  out += buf;
  for (size_t i = 0; i < entries.size(); ++i) {
    const FlightEntry& e = entries[i];
    std::snprintf(
        buf, sizeof buf,
        "{\"seq\": %llu, \"op\": \"%s\", \"bytes\": %llu, \"dtype\": \"%s\", \"start\": "
        "%.6f, \"finish\": %.6f, \"tag\": \"%s\"}%s\n",
        static_cast<unsigned long long>(e.seq), std::string(collective_kind_name(e.kind)).c_str(),
        static_cast<unsigned long long>(e.bytes), std::string(dtype_name(e.dtype)).c_str(),
        e.start_s, e.finish_s, e.tag, i + 1 < entries.size() ? "," : "");
    out += buf;
  }
  out += "]}\n";
  return out;
}

bool parse_flight_json(const std::string& text, RankFlight* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return false;
  int rank = -1, size = 0;
  double written = 0;
  if (std::sscanf(line.c_str(), "{\"rank\": %d, \"size\": %d, \"written\": %lf", &rank, &size,
                  &written) != 3) {
    return false;
  }
  RankFlight r;
  r.rank = rank;
  r.present = true;
  r.written_s = written;
  bool closed = false;
  while (std::getline(in, line)) {
    if (line.rfind("]}", 0) == 0) {
      closed = true;
      break;
    }
    unsigned long long seq = 0, nbytes = 0;
    char op[32] = {}, dt[16] = {}, tag[48] = {};
    FlightEntry e;
    const int n = std::sscanf(line.c_str(),
                              "{\"seq\": %llu, \"op\": \"%31[^\"]\", \"bytes\": %llu, \"dtype\": "
                              "\"%15[^\"]\", \"start\": %lf, \"finish\": %lf, \"tag\": \"%47[^\"]",
                              &seq, op, &nbytes, dt, &e.start_s, &e.finish_s, tag);
    if (n < 6) return false;
    bool ok = true;
    e.seq = seq;
    e.bytes = nbytes;
    e.kind = kind_from_name(op, &ok);
    e.dtype = dtype_from_name(dt, &ok);
    if (!ok) return false;
    std::memcpy(e.tag, tag, sizeof e.tag);
    r.entries.push_back(e);
  }
  if (!closed) return false;
  *out = std::move(r);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The report

namespace {

// The oldest collective some rank is stuck in; null when none is.
const FlightEntry* oldest_in_flight(const std::vector<RankFlight>& ranks) {
  const FlightEntry* stuck = nullptr;
  for (const auto& r : ranks) {
    for (const auto& e : r.entries) {
      if (e.in_flight() && (stuck == nullptr || e.seq < stuck->seq)) stuck = &e;
    }
  }
  return stuck;
}

// The line naming the first sequence number at which two ranks' records differ; "" when they
// agree over the range every present rank recorded.
std::string divergence(const std::vector<RankFlight>& ranks) {
  uint64_t lo = 0, hi = UINT64_MAX;
  bool any = false;
  for (const auto& r : ranks) {
    if (!r.present || r.entries.empty()) continue;
    lo = std::max(lo, r.entries.front().seq);
    hi = std::min(hi, r.entries.back().seq);
    any = true;
  }
  for (uint64_t s = lo; any && s <= hi; ++s) {
    const FlightEntry* ref = nullptr;
    int ref_rank = -1;
    for (const auto& r : ranks) {
      if (!r.present || r.entries.empty()) continue;
      const FlightEntry& e = r.entries[s - r.entries.front().seq];
      if (ref == nullptr) {
        ref = &e;
        ref_rank = r.rank;
      } else if (e.kind != ref->kind || e.bytes != ref->bytes || e.dtype != ref->dtype) {
        return "ranks diverge at seq " + std::to_string(s) + ": rank " + std::to_string(ref_rank) +
               " called " + describe(*ref) + ", rank " + std::to_string(r.rank) + " called " +
               describe(e);
      }
    }
  }
  return "";
}

// One line per present rank that never arrived at `stuck`, naming its last collective.
void stragglers(const std::vector<RankFlight>& ranks, const FlightEntry& stuck, double now_s,
                std::string& out) {
  for (const auto& r : ranks) {
    if (!r.present) continue;
    const uint64_t last = r.entries.empty() ? 0 : r.entries.back().seq;
    if (last >= stuck.seq) continue;
    std::string s = "rank " + std::to_string(r.rank) + " never arrived at " + describe(stuck) +
                    ": its last collective is ";
    if (r.entries.empty()) {
      s += "none";
    } else {
      const FlightEntry& e = r.entries.back();
      s += describe(e) + (e.in_flight() ? ", in flight"
                                        : ", finished " + fmt_seconds(now_s - e.finish_s) + " ago");
    }
    out += s + "\n";
  }
}

// Rank r's line: its last completed collective and the one in flight, or why it has no dump.
std::string rank_summary(const RankFlight& r, double now_s) {
  std::string s = "rank " + std::to_string(r.rank) + ": ";
  if (!r.present) return s + "no dump (another node, not started, or exited)";
  const FlightEntry* done = nullptr;
  const FlightEntry* flying = nullptr;
  for (const auto& e : r.entries) {
    if (e.in_flight()) {
      if (flying == nullptr) flying = &e;
    } else {
      done = &e;
    }
  }
  s += "last completed " + (done ? describe(*done) : std::string("none"));
  if (flying != nullptr) {
    s += "; in flight " + describe(*flying) + " for " + fmt_seconds(now_s - flying->start_s);
  } else {
    s += "; not in a collective";
  }
  return s + " (dump " + fmt_seconds(now_s - r.written_s) + " old)";
}

}  // namespace

std::string flight_report(const std::vector<RankFlight>& ranks, double now_s) {
  std::string out = divergence(ranks);
  const bool diverged = !out.empty();
  if (diverged) out += "\n";
  if (const FlightEntry* stuck = oldest_in_flight(ranks)) {
    stragglers(ranks, *stuck, now_s, out);
  } else if (!diverged) {
    out += "no rank is in a collective\n";
  }
  for (const auto& r : ranks) out += rank_summary(r, now_s) + "\n";
  return out;
}

// ---------------------------------------------------------------------------------------------
// The watchdog

std::string flight_dump_dir() {
  const LaunchEnvironment env = LaunchEnvironment::from_environment();
  std::string id = env.job_id.value_or(std::to_string(getppid()));
  for (char& c : id) {
    if (c == '/' || c == ' ') c = '_';
  }
  const std::string base = env.tmpdir.empty() ? "/tmp" : env.tmpdir;
  return base + "/zeroshard-flight-" + id;
}

namespace {

void write_dump(const std::string& dir, int rank, int size) {
  if (g_stopping.load()) return;
  ::mkdir(dir.c_str(), 0777);
  const std::string path = dir + "/rank-" + std::to_string(rank) + ".json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << flight_json(rank, size, now_seconds(), flight_recorder().snapshot());
    if (!f) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::string read_all(const std::string& dir, int size) {
  std::vector<RankFlight> ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::ifstream f(dir + "/rank-" + std::to_string(r) + ".json");
    std::stringstream ss;
    ss << f.rdbuf();
    RankFlight rf;
    if (f && parse_flight_json(ss.str(), &rf) && rf.rank == r) ranks[r] = std::move(rf);
    ranks[r].rank = r;
  }
  return flight_report(ranks, now_seconds());
}

void print_prefixed(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out += "zeroshard watchdog: " + l + "\n";
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void watchdog_loop(int rank, int size) {
  const std::string dir = flight_dump_dir();
  uint64_t published = UINT64_MAX;
  double last_publish = 0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double now = now_seconds();
    FlightRecorder& fr = flight_recorder();
    if (g_usr1.exchange(false)) {
      write_dump(dir, rank, size);
      published = fr.version();
      last_publish = now;
      print_prefixed("rank " + std::to_string(rank) + ": SIGUSR1 dump (" + dir + ")\n" +
                     read_all(dir, size));
      continue;
    }
    const uint64_t v = fr.version();
    if (v != published && now - last_publish >= 1.0) {
      write_dump(dir, rank, size);
      published = v;
      last_publish = now;
    }
    const double timeout_s = g_watchdog_timeout.load();
    if (timeout_s <= 0) continue;
    const auto entries = fr.snapshot();
    for (const auto& e : entries) {
      if (!e.in_flight() || now - e.start_s <= timeout_s) continue;
      write_dump(dir, rank, size);
      print_prefixed("rank " + std::to_string(rank) + ": " + describe(e) +
                     " has not completed after " + fmt_seconds(now - e.start_s) + " (timeout " +
                     fmt_seconds(timeout_s) + "); reading the ranks' dumps in " + dir);
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      print_prefixed(read_all(dir, size));
      print_prefixed("rank " + std::to_string(rank) + ": ending the job (exit 3)");
      std::_Exit(3);
    }
  }
}

}  // namespace

namespace {

// Sets the timeout and starts the thread when it is on and not running yet; under g_watchdog_mu.
void set_watchdog_locked(double timeout_s, int rank, int size) {
  g_watchdog_set = true;
  g_watchdog_timeout.store(std::max(timeout_s, 0.0));
  if (timeout_s <= 0 || g_watchdog_started.exchange(true)) return;
  g_dump_path = new std::string(flight_dump_dir() + "/rank-" + std::to_string(rank) + ".json");
  std::atexit(remove_dump_at_exit);
  struct sigaction sa = {};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  std::thread(watchdog_loop, rank, size).detach();
}

}  // namespace

void start_watchdog(double timeout_s, int rank, int size) {
  std::lock_guard<std::mutex> lock(g_watchdog_mu);
  set_watchdog_locked(timeout_s, rank, size);
}

bool start_watchdog_if_unset(double timeout_s, int rank, int size) {
  std::lock_guard<std::mutex> lock(g_watchdog_mu);
  if (timeout_s <= 0 || g_watchdog_set) return false;
  set_watchdog_locked(timeout_s, rank, size);
  return true;
}

double watchdog_timeout() { return g_watchdog_timeout.load(); }

}  // namespace zs
