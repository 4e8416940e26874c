// Error paths of MpiCommunicator and the node topology (run at 1, 2 and 4 ranks). Argument errors
// throw before any communication, on every rank alike, so no rank is left waiting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/mpi_communicator.h"
#include "collectives/topology.h"
#include "core/error.h"

namespace zs {
namespace {

// Runs f, expects zs::Error with `code` whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no zs::Error thrown (expected " << error_code_name(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

TEST(CollectiveErrors, IntegerReductionsAreRejected) {
  auto c = MpiCommunicator::world();
  std::vector<uint8_t> a(64), b(64);
  const std::string r = "rank " + std::to_string(c->rank());
  for (DType dt : {DType::kI8, DType::kU8}) {
    const std::string name(dtype_name(dt));
    expect_error([&] { c->reduce_scatter(a.data(), b.data(), 4, dt, ReduceOp::kSum); },
                 ErrorCode::kInvalidArgument, {"reduce_scatter", name, r});
    expect_error([&] { c->all_reduce(a.data(), b.data(), 4, dt, ReduceOp::kMax); },
                 ErrorCode::kInvalidArgument, {"all_reduce", name, "max", r});
    expect_error([&] { c->start_reduce_scatter(a.data(), b.data(), 4, dt, ReduceOp::kAvg); },
                 ErrorCode::kInvalidArgument, {"reduce_scatter", name});
    expect_error([&] { c->start_all_reduce(a.data(), b.data(), 4, dt, ReduceOp::kSum); },
                 ErrorCode::kInvalidArgument, {"all_reduce", name});
  }
  // The same types are fine for moving data.
  c->all_gather(a.data(), b.data(), 1, DType::kI8);
  c->broadcast(a.data(), 4, DType::kU8, 0);
}

TEST(CollectiveErrors, BadArgumentsNameOpRankAndSizes) {
  auto c = MpiCommunicator::world();
  std::vector<float> a(64), b(64);
  const std::string r = "rank " + std::to_string(c->rank());
  expect_error([&] { c->all_gather(nullptr, b.data(), 3, DType::kF32); },
               ErrorCode::kInvalidArgument, {"all_gather", "null send", "count 3", r});
  expect_error([&] { c->all_reduce(a.data(), nullptr, 5, DType::kBF16, ReduceOp::kSum); },
               ErrorCode::kInvalidArgument, {"all_reduce", "null receive", "count 5", "bf16"});
  expect_error([&] { c->start_all_gather(a.data(), nullptr, 2, DType::kF32); },
               ErrorCode::kInvalidArgument, {"all_gather", "null receive"});
  const size_t huge = SIZE_MAX / 2;
  expect_error([&] { c->reduce_scatter(a.data(), b.data(), huge, DType::kF32, ReduceOp::kSum); },
               ErrorCode::kInvalidArgument, {"reduce_scatter", "overflows", std::to_string(huge)});
  expect_error([&] { c->all_gather(a.data(), b.data(), huge, DType::kF64); },
               ErrorCode::kInvalidArgument, {"all_gather", "overflows"});
  expect_error([&] { c->broadcast(a.data(), 4, DType::kF32, c->size()); },
               ErrorCode::kInvalidArgument, {"broadcast", "root " + std::to_string(c->size())});
  expect_error([&] { c->broadcast(a.data(), 4, DType::kF32, -1); }, ErrorCode::kInvalidArgument,
               {"broadcast", "root -1"});
  // Null buffers with count 0 are fine.
  c->all_gather(nullptr, nullptr, 0, DType::kF32);
  c->all_reduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum);
}

// With ZS_CHECK_COLLECTIVES=1 every rank learns of a mismatch and throws together.
TEST(CollectiveErrors, CheckedMismatchThrowsOnEveryRank) {
  setenv("ZS_CHECK_COLLECTIVES", "1", 1);
  auto c = MpiCommunicator::world();
  unsetenv("ZS_CHECK_COLLECTIVES");
  EXPECT_TRUE(c->checking());
  const int me = c->rank(), n = c->size();
  std::vector<float> a(64 * 4), b(64 * 4);
  // Matching calls pass the check.
  c->all_gather(a.data(), b.data(), 8, DType::kF32);
  c->start_all_reduce(a.data(), b.data(), 8, DType::kF32, ReduceOp::kSum)->wait();
  if (n == 1) return;  // a single rank cannot disagree with itself
  expect_error([&] { c->all_gather(a.data(), b.data(), 4 + me, DType::kF32); },
               ErrorCode::kCommunication, {"all_gather", "disagree", "count", "min 4"});
  expect_error(
      [&] {
        c->reduce_scatter(a.data(), b.data(), 8, DType::kF32, me ? ReduceOp::kSum : ReduceOp::kMax);
      },
      ErrorCode::kCommunication, {"reduce_scatter", "reduce op"});
  expect_error([&] { c->broadcast(a.data(), 8, DType::kF32, me % 2); }, ErrorCode::kCommunication,
               {"broadcast", "root"});
  expect_error(
      [&] {
        c->start_all_reduce(a.data(), b.data(), 8, me ? DType::kF32 : DType::kBF16, ReduceOp::kSum);
      },
      ErrorCode::kCommunication, {"all_reduce", "dtype"});
  c->barrier();  // still in step
}

// [Note: environment settings]: a bad ZS_* value is refused by the constructor that reads the
// environment, on every rank alike and before anything is communicated; a communicator given its
// options explicitly does not read the environment.
TEST(CollectiveErrors, BadSettingRefusedAtConstruction) {
  const std::pair<const char*, const char*> bad[] = {{"ZS_CHECK_COLLECTIVES", "yes"},
                                                     {"ZS_COLLECTIVES_SHM", "off"},
                                                     {"ZS_COLLECTIVES_SHM_PASS", "64k"},
                                                     {"ZS_MAX_ISA", "avx9"}};
  for (const auto& [name, value] : bad) {
    const char* old = std::getenv(name);
    const std::string saved = old ? old : "";
    setenv(name, value, 1);
    expect_error([] { MpiCommunicator::world(); }, ErrorCode::kInvalidArgument,
                 {std::string(name) + "=" + value + ": ", "(allowed: "});
    MpiCommunicatorOptions o;
    o.check_collectives = true;
    auto c = MpiCommunicator::world(o);
    if (old) {
      setenv(name, saved.c_str(), 1);
    } else {
      unsetenv(name);
    }
    EXPECT_TRUE(c->checking());
    c->barrier();
  }
}

// Without the check, a mismatch is reported where MPI sees it: a truncated receive. Pairs of
// ranks, so the failing rank forwards nothing that another rank waits for.
TEST(CollectiveErrors, TruncationReportedByMpi) {
  auto world = MpiCommunicator::world();
  const int me = world->rank();
  auto pair = world->split(me / 2, me);
  if (pair->size() == 2) {
    std::vector<float> buf(8, 1.0f);
    const size_t count = pair->rank() == 0 ? 8 : 4;
    if (pair->rank() == 1) {
      expect_error([&] { pair->broadcast(buf.data(), count, DType::kF32, 0); },
                   ErrorCode::kCommunication, {"broadcast", "MPI_Bcast", "rank 1", "count 4"});
    } else {
      pair->broadcast(buf.data(), count, DType::kF32, 0);
    }
    pair->barrier();
    // The communicator remains usable afterwards.
    float x = 1.0f, y = 0.0f;
    pair->all_reduce(&x, &y, 1, DType::kF32, ReduceOp::kSum);
    EXPECT_EQ(y, 2.0f);
  }
  world->barrier();
}

TEST(NodeTopology, RealSplitOneHost) {
  unsetenv("ZS_FAKE_NODES");
  auto c = MpiCommunicator::world();
  NodeTopology t = make_node_topology(*c);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.node_index, 0);
  EXPECT_EQ(t.local_size, c->size());
  EXPECT_EQ(t.local_rank, c->rank());
  EXPECT_EQ(t.cross->size(), 1);
  EXPECT_EQ(local_rank_from_env(), c->rank());
}

TEST(NodeTopology, FakeNodesContiguousBlocks) {
  auto c = MpiCommunicator::world();
  const int n = c->size(), me = c->rank();
  for (int k = 1; k <= n; ++k) {
    if (n % k != 0) continue;
    setenv("ZS_FAKE_NODES", std::to_string(k).c_str(), 1);
    NodeTopology t = make_node_topology(*c);
    unsetenv("ZS_FAKE_NODES");
    const int block = n / k;
    EXPECT_EQ(t.num_nodes, k);
    EXPECT_EQ(t.node_index, me / block);
    EXPECT_EQ(t.local_rank, me % block);
    EXPECT_EQ(t.local_size, block);
    EXPECT_EQ(t.local->size(), block);
    EXPECT_EQ(t.cross->size(), k);
    EXPECT_EQ(t.cross->rank(), me / block);
    // Cross-node sum of world ranks with my local rank: sum over nodes of node*block + local.
    double x = me, s = 0, want = 0;
    t.cross->all_reduce(&x, &s, 1, DType::kF64, ReduceOp::kSum);
    for (int node = 0; node < k; ++node) want += node * block + me % block;
    EXPECT_EQ(s, want);
  }
}

// fake_nodes given explicitly: the environment is not read (a bad ZS_FAKE_NODES is ignored), and
// the same checks apply.
TEST(NodeTopology, FakeNodesExplicit) {
  auto c = MpiCommunicator::world();
  const int n = c->size(), me = c->rank();
  setenv("ZS_FAKE_NODES", "x", 1);
  NodeTopology one_each = make_node_topology(*c, n);
  NodeTopology real = make_node_topology(*c, 0);
  expect_error([&] { make_node_topology(*c, n + 1); }, ErrorCode::kInvalidArgument,
               {"ZS_FAKE_NODES=" + std::to_string(n + 1), "divide the world size"});
  expect_error([&] { make_node_topology(*c, -1); }, ErrorCode::kInvalidArgument,
               {"ZS_FAKE_NODES=-1"});
  unsetenv("ZS_FAKE_NODES");
  EXPECT_EQ(one_each.num_nodes, n);
  EXPECT_EQ(one_each.node_index, me);
  EXPECT_EQ(one_each.local_size, 1);
  EXPECT_EQ(one_each.cross->size(), n);
  EXPECT_EQ(real.num_nodes, 1);
  EXPECT_EQ(real.local_size, n);
}

TEST(NodeTopology, FakeNodesMustDivideTheWorld) {
  auto c = MpiCommunicator::world();
  const int n = c->size();
  for (const std::string& bad : {std::to_string(n + 1), std::string("0"), std::string("x")}) {
    setenv("ZS_FAKE_NODES", bad.c_str(), 1);
    expect_error([&] { make_node_topology(*c); }, ErrorCode::kInvalidArgument, {"ZS_FAKE_NODES"});
  }
  if (n == 4) {
    setenv("ZS_FAKE_NODES", "3", 1);
    expect_error([&] { make_node_topology(*c); }, ErrorCode::kInvalidArgument,
                 {"ZS_FAKE_NODES=3", "divide the world size 4"});
  }
  unsetenv("ZS_FAKE_NODES");
}

}  // namespace
}  // namespace zs
