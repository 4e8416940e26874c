// Agreement over raw MPI ([Note: environment agreement] in collectives/mpi_agreement.h): the
// environment's settings, MpiCommunicator's protocol options and make_node_topology()'s
// fake_nodes, each differing on the last rank, are refused on every rank naming the setting and
// both values, with no hang (run at 1, 2 and 4 ranks; at 1 rank everything agrees with itself).
#include "collectives/mpi_agreement.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi_communicator.h"
#include "collectives/topology.h"
#include "core/error.h"
#include "core/settings.h"

namespace zs {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Runs fn on every rank and returns its error message ("" when none); every rank must agree on
// whether it failed, and fail with `code`.
std::string error_of(const std::function<void()>& fn,
                     ErrorCode code = ErrorCode::kInvalidArgument) {
  std::string msg;
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    msg = e.what();
  }
  int failed = msg.empty() ? 0 : 1, all = 0;
  MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_TRUE(all == 0 || all == world_size()) << "only some ranks failed";
  // Every rank must also report the same message: compare hashes of it via its length and bytes.
  int len = static_cast<int>(msg.size()), lo = 0, hi = 0;
  MPI_Allreduce(&len, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks report different messages; this one: " << msg;
  return msg;
}

TEST(SettingsAgreement, EqualSettingsPass) {
  EXPECT_EQ(error_of([] { check_settings_agreement(MPI_COMM_WORLD, Settings{}); }), "");
  Settings s;
  s.collectives_shm = false;
  s.watchdog_s = 5.0;
  s.onednn_max_cpu_isa = "AVX2";
  EXPECT_EQ(error_of([&] { check_settings_agreement(MPI_COMM_WORLD, s); }), "");
}

// Every field of the table but the ISA caps, changed on the last rank alone, is named with both
// values.
TEST(SettingsAgreement, EveryFieldNamedWithBothValues) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world_size() - 1;
  struct Case {
    std::function<void(Settings&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](Settings& s) { s.collectives_shm = false; }, "ZS_COLLECTIVES_SHM: 1 on rank 0, 0"},
      {[](Settings& s) { s.collectives_shm_pass = 65536; },
       "ZS_COLLECTIVES_SHM_PASS: 524288 on rank 0, 65536"},
      {[](Settings& s) { s.check_collectives = true; }, "ZS_CHECK_COLLECTIVES: 0 on rank 0, 1"},
      {[](Settings& s) { s.fake_nodes = 2; }, "ZS_FAKE_NODES: 0 on rank 0, 2"},
      {[](Settings& s) { s.watchdog_s = 0.5; }, "ZS_WATCHDOG_S: unset on rank 0, 0.5"},
      {[](Settings& s) { s.onednn_max_cpu_isa = "AVX2"; },
       "ONEDNN_MAX_CPU_ISA: unset on rank 0, AVX2"},
  };
  for (const Case& c : cases) {
    Settings s;
    if (world_rank() == last) c.change(s);
    EXPECT_EQ(error_of([&] { check_settings_agreement(MPI_COMM_WORLD, s); }),
              fmt::format("environment: ranks disagree on {} on rank {}", c.expected, last));
  }
  // Two values of one optional field, and the first of two differences is the one named.
  Settings s;
  s.watchdog_s = world_rank() == last ? 300.0 : 5.0;
  if (world_rank() == last) s.fake_nodes = 2;
  EXPECT_EQ(
      error_of([&] { check_settings_agreement(MPI_COMM_WORLD, s); }),
      fmt::format("environment: ranks disagree on ZS_FAKE_NODES: 0 on rank 0, 2 on rank {}", last));
}

// The ISA caps may differ between ranks (every level gives the same bits, [Note: ISA cap]): each
// rank a level of its own, and with the scalar switch on some; another setting that differs is
// still named.
TEST(SettingsAgreement, IsaCapsMayDiffer) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const SimdLevel levels[] = {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512};
  Settings s;
  s.max_isa = levels[world_rank() % 3];
  s.force_scalar = world_rank() % 2 == 1;
  EXPECT_EQ(error_of([&] { check_settings_agreement(MPI_COMM_WORLD, s); }), "");
  const int last = world_size() - 1;
  if (world_rank() == last) s.collectives_shm = false;
  EXPECT_EQ(error_of([&] { check_settings_agreement(MPI_COMM_WORLD, s); }),
            fmt::format("environment: ranks disagree on ZS_COLLECTIVES_SHM: 1 on rank 0, 0 on "
                        "rank {}",
                        last));
}

TEST(SettingsAgreement, ListsOfDifferentLengthsNamed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<Setting> s = {{"A", "1"}};
  if (world_rank() == 1) s.push_back({"B", "2"});
  EXPECT_EQ(error_of([&] { check_agreement(MPI_COMM_WORLD, s, "test"); }),
            "test: ranks disagree on the list of settings: at position 1 rank 0 has nothing and "
            "rank 1 has 'B'");
}

// MpiCommunicator's constructor compares its protocol options; the refused construction leaks
// no communicator (a later one works) and leaves no rank behind.
TEST(CommunicatorAgreement, ProtocolOptionsNamed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world_size() - 1;
  const bool me = world_rank() == last;
  struct Case {
    std::function<void(MpiCommunicatorOptions&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](MpiCommunicatorOptions& o) { o.shared_memory = false; },
       "shared_memory (ZS_COLLECTIVES_SHM): 1 on rank 0, 0"},
      {[](MpiCommunicatorOptions& o) { o.shm_pass_bytes = 4096; },
       "shm_pass_bytes (ZS_COLLECTIVES_SHM_PASS): 524288 on rank 0, 4096"},
      {[](MpiCommunicatorOptions& o) { o.check_collectives = true; },
       "check_collectives (ZS_CHECK_COLLECTIVES): 0 on rank 0, 1"},
  };
  for (const Case& c : cases) {
    MpiCommunicatorOptions o;
    if (me) c.change(o);
    EXPECT_EQ(error_of([&] { MpiCommunicator comm(MPI_COMM_WORLD, o); }),
              fmt::format("MpiCommunicator: ranks disagree on {} on rank {}", c.expected, last));
  }
  // The watchdog's timeout is not a protocol option: it may differ.
  MpiCommunicatorOptions o;
  o.watchdog_timeout_s = 0;
  MpiCommunicator comm(MPI_COMM_WORLD, o);
  float v = 1.0f;
  comm.all_reduce(&v, &v, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(v, static_cast<float>(world_size()));
  // A split's options are its parent's; differing ones passed explicitly are refused there too.
  o.shared_memory = !me;
  EXPECT_EQ(error_of([&] { MpiCommunicator sub(comm.handle(), o); }),
            fmt::format("MpiCommunicator: ranks disagree on shared_memory (ZS_COLLECTIVES_SHM): 1 "
                        "on rank 0, 0 on rank {}",
                        last));
}

// make_node_topology() compares fake_nodes before any split, also when the value is bad on one
// rank only (validating first would let that rank throw while the others split).
TEST(TopologyAgreement, FakeNodesNamed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world_size() - 1;
  MpiCommunicator comm(MPI_COMM_WORLD, MpiCommunicatorOptions{});
  const int mine = world_rank() == last ? 2 : 0;
  EXPECT_EQ(error_of([&] { make_node_topology(comm, mine); }),
            fmt::format("node topology: ranks disagree on ZS_FAKE_NODES: 0 on rank 0, 2 on rank {}",
                        last));
  const int bad = world_rank() == last ? 3 : 1;  // 3 does not divide 2 or 4
  EXPECT_EQ(error_of([&] { make_node_topology(comm, bad); }),
            fmt::format("node topology: ranks disagree on ZS_FAKE_NODES: 1 on rank 0, 3 on rank {}",
                        last));
  // Agreeing ranks still get their topology.
  NodeTopology t = make_node_topology(comm, world_size());
  EXPECT_EQ(t.num_nodes, world_size());
  EXPECT_EQ(t.local_size, 1);
}

}  // namespace
}  // namespace zs
