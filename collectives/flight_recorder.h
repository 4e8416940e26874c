// Hang forensics: a ring of each rank's recent collectives and a watchdog that reads it.
//
// [Note: flight recorder] (PyTorch's Flight Recorder is the model.) Every MpiCommunicator whose
// size is the world's records each collective into one process-wide ring of the last kCapacity
// (64) entries: sequence number (1, 2, ... in call order, the same on every rank when the ranks
// agree), op, bytes (count x element size, per rank), dtype, a caller's tag (set_flight_tag,
// thread-local, optional), start time and finish time (wall clock; -1 while in flight). An
// asynchronous collective starts when it is issued and finishes when its Work completes.
// Communicators over part of the world (split()) are not recorded: their sequences differ
// between ranks by design.
//
// The watchdog is one thread per process. Its timeout is set once per process: by the program
// (start_watchdog, e.g. zs_train's --watchdog-timeout), or else by the first world-sized
// MpiCommunicator made with MpiCommunicatorOptions::watchdog_timeout_s > 0 (ZS_WATCHDOG_S);
// communicators made later (split(), split_shared(), a HierarchicalCommunicator's, dups) never
// change it. A program call always sets it. The thread polls every 100 ms:
// * it publishes this rank's ring as JSON to <dir>/rank-<r>.json when it changed, at most once a
//   second, where <dir> = $TMPDIR (or /tmp)/zeroshard-flight-<job>, <job> being PMIX_NAMESPACE,
//   else OMPI_MCA_ess_base_jobid, else the parent process id: values every rank of one mpirun on
//   one node shares without communicating;
// * when the oldest in-flight collective is older than the timeout, it writes its ring, waits
//   1.5 s for the other ranks' files, prints the report (flight_report) to stderr, every line
//   prefixed "zeroshard watchdog:", and ends the process with std::_Exit(3) (MPI is stuck: no
//   MPI_Finalize; mpirun then ends the other ranks);
// * on SIGUSR1 (the handler only sets a flag) it prints the same report and goes on.
// At a normal exit (atexit) a rank removes its file, and the directory when it is empty.
// Ranks on other nodes are seen only if <dir> is on a shared file system.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/dtype.h"

namespace zs {

struct FlightEntry {
  uint64_t seq = 0;
  CollectiveKind kind = CollectiveKind::kBarrier;
  uint64_t bytes = 0;
  DType dtype = DType::kU8;
  char tag[48] = {};
  double start_s = 0;    // seconds since the epoch
  double finish_s = -1;  // -1: in flight
  bool in_flight() const { return finish_s < 0; }
};

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 64;
  // Records a collective as started now; returns its sequence number.
  uint64_t begin(CollectiveKind kind, uint64_t bytes, DType dtype);
  // Marks `seq` finished now (a no-op once it has left the ring).
  void finish(uint64_t seq);
  // The entries still in the ring, oldest first.
  std::vector<FlightEntry> snapshot() const;
  // Changes at every begin() and finish().
  uint64_t version() const;

 private:
  mutable std::mutex mu_;
  FlightEntry ring_[kCapacity];
  uint64_t next_ = 1;
  uint64_t version_ = 0;
};

// The process-wide ring the world's communicators record into. Never destroyed.
FlightRecorder& flight_recorder();
// A short label (e.g. "unit 3 gather") stored with this thread's next collectives; nullptr or ""
// clears it. Truncated to 47 characters; quotes and control characters become '_'.
void set_flight_tag(const char* tag);
const char* flight_tag();

// One rank's record as read from its dump.
struct RankFlight {
  int rank = -1;
  bool present = false;  // false: no dump file was found for this rank
  double written_s = 0;  // when the dump was written
  std::vector<FlightEntry> entries;
};

std::string flight_json(int rank, int size, double now_s, const std::vector<FlightEntry>& entries);
// Parses what flight_json wrote; false for anything else.
bool parse_flight_json(const std::string& text, RankFlight* out);

// The report over the ranks' records (ranks[r].rank == r), one line per finding, no prefix:
// the first sequence number at which the ranks' records differ (op, bytes or dtype), the ranks
// that never arrived at the oldest collective some rank is stuck in, and where each rank is.
std::string flight_report(const std::vector<RankFlight>& ranks, double now_s);

// The program's setting: sets the process's watchdog timeout (0: off; SIGUSR1 dumps go on once
// the thread runs) and starts the thread when it is > 0 (once per process). Every call sets it;
// no communicator changes it afterwards. rank/size: in the world.
void start_watchdog(double timeout_s, int rank, int size);
// What a world-sized MpiCommunicator calls: start_watchdog(timeout_s, rank, size) only when
// timeout_s > 0 and nothing has set the timeout in this process yet (neither start_watchdog nor
// an earlier communicator). Returns whether it set it.
bool start_watchdog_if_unset(double timeout_s, int rank, int size);
// The timeout in force, in seconds; 0: off or never set.
double watchdog_timeout();
// The dump directory of this job (see the Note).
std::string flight_dump_dir();

}  // namespace zs
