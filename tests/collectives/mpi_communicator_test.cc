// Multi-rank tests of MpiCommunicator (run at 1, 2 and 4 ranks). Every reduction result must equal,
// bit for bit, the reference of the determinism contract recomputed locally in rank order.
// EXPECT_ (not ASSERT_) before any collective, so one failure never leaves a rank behind.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "collective_test_util.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "core/memory_tracker.h"
#include "core/settings.h"

namespace zs {
namespace {

using test::fill;
using test::first_mismatch;
using test::reference;

constexpr size_t kLarge = 3'000'000;
const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                           DType::kF64, DType::kI8,  DType::kU8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

std::vector<size_t> gather_counts(DType dt) {
  std::vector<size_t> c = {0, 1, 7, 1000};
  if (dt == DType::kF32 || dt == DType::kBF16) c.push_back(kLarge / 4 + 3);
  return c;
}

std::string trace(const char* what, DType dt, size_t count, bool async, bool in_place,
                  ReduceOp op = ReduceOp::kSum) {
  return std::string(what) + " " + std::string(dtype_name(dt)) + " " +
         std::string(reduce_op_name(op)) + " count=" + std::to_string(count) +
         (async ? " async" : " sync") + (in_place ? " in-place" : " out-of-place");
}

// ---------------------------------------------------------------------------------------------

void check_all_gather(MpiCommunicator& c, DType dt, size_t count, bool async, bool in_place,
                      uint32_t seed) {
  SCOPED_TRACE(trace("all_gather", dt, count, async, in_place));
  const int n = c.size(), me = c.rank();
  const size_t e = dtype_size(dt);
  std::vector<uint8_t> send(count * e + 1), recv(n * count * e + 1), want(n * count * e + 1);
  // Global index of rank r's element i: r * count + i, so rank r fills from r * count.
  for (int r = 0; r < n; ++r) fill(want.data() + r * count * e, dt, r, r * count, count, seed);
  uint8_t* mine = in_place ? recv.data() + me * count * e : send.data();
  fill(mine, dt, me, me * count, count, seed);
  if (async) {
    auto w = c.start_all_gather(mine, recv.data(), count, dt);
    w->wait();
  } else {
    c.all_gather(mine, recv.data(), count, dt);
  }
  EXPECT_EQ(first_mismatch(recv.data(), want.data(), n * count, dt), -1);
}

TEST(MpiCommunicator, AllGatherEveryDtype) {
  auto c = MpiCommunicator::world();
  for (DType dt : kAllTypes)
    for (size_t count : gather_counts(dt))
      for (bool async : {false, true})
        for (bool in_place : {false, true}) check_all_gather(*c, dt, count, async, in_place, 11);
}

void check_reduce_scatter(MpiCommunicator& c, DType dt, ReduceOp op, size_t count, bool async,
                          bool in_place, uint32_t seed) {
  SCOPED_TRACE(trace("reduce_scatter", dt, count, async, in_place, op));
  const int n = c.size(), me = c.rank();
  const size_t e = dtype_size(dt);
  std::vector<uint8_t> send(n * count * e + 1), out(count * e + 1), want(count * e + 1);
  fill(send.data(), dt, me, 0, n * count, seed);
  reference(want.data(), dt, op, n, me * count, count, seed);
  void* recv = in_place ? send.data() + me * count * e : out.data();
  if (async) {
    auto w = c.start_reduce_scatter(send.data(), recv, count, dt, op);
    while (!w->test()) {
    }
  } else {
    c.reduce_scatter(send.data(), recv, count, dt, op);
  }
  EXPECT_EQ(first_mismatch(recv, want.data(), count, dt), -1);
}

TEST(MpiCommunicator, ReduceScatterBitwiseRankOrder) {
  auto c = MpiCommunicator::world();
  for (DType dt : kFloatTypes)
    for (ReduceOp op : kOps)
      for (size_t count : gather_counts(dt))
        for (bool async : {false, true})
          for (bool in_place : {false, true})
            check_reduce_scatter(*c, dt, op, count, async, in_place, 23);
}

void check_all_reduce(MpiCommunicator& c, DType dt, ReduceOp op, size_t count, bool async,
                      bool in_place, uint32_t seed) {
  SCOPED_TRACE(trace("all_reduce", dt, count, async, in_place, op));
  const size_t e = dtype_size(dt);
  std::vector<uint8_t> send(count * e + 1), out(count * e + 1), want(count * e + 1);
  fill(send.data(), dt, c.rank(), 0, count, seed);
  reference(want.data(), dt, op, c.size(), 0, count, seed);
  void* recv = in_place ? send.data() : out.data();
  if (async) {
    auto w = c.start_all_reduce(send.data(), recv, count, dt, op);
    w->wait();
  } else {
    c.all_reduce(send.data(), recv, count, dt, op);
  }
  EXPECT_EQ(first_mismatch(recv, want.data(), count, dt), -1);
}

TEST(MpiCommunicator, AllReduceBitwiseRankOrderAnyCount) {
  auto c = MpiCommunicator::world();
  const size_t n = c->size();
  for (DType dt : kFloatTypes)
    for (ReduceOp op : kOps) {
      // Counts that do and do not divide by n, including 0, 1 and n-1.
      std::vector<size_t> counts = {0, 1, n + 1, 4 * n, 1001};
      if (n > 1) counts.push_back(n - 1);
      // The large count once per dtype (sum): the reference recomputation dominates the run time.
      if ((dt == DType::kF32 || dt == DType::kBF16) && op == ReduceOp::kSum) {
        counts.push_back(kLarge + 1);
      }
      for (size_t count : counts)
        for (bool async : {false, true})
          for (bool in_place : {false, true})
            check_all_reduce(*c, dt, op, count, async, in_place, 37);
    }
}

// The same inputs give the same bits whatever the message size: one big call vs. pieces.
TEST(MpiCommunicator, SameBitsWhateverTheMessageSize) {
  auto c = MpiCommunicator::world();
  const size_t count = 100'003;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const size_t e = dtype_size(dt);
    std::vector<uint8_t> send(count * e), whole(count * e), parts(count * e);
    fill(send.data(), dt, c->rank(), 0, count, 5);
    c->all_reduce(send.data(), whole.data(), count, dt, ReduceOp::kSum);
    for (size_t off = 0, len = 1; off < count; off += len, len = len * 3 + 1) {
      len = std::min(len, count - off);
      c->all_reduce(send.data() + off * e, parts.data() + off * e, len, dt, ReduceOp::kSum);
    }
    EXPECT_EQ(first_mismatch(whole.data(), parts.data(), count, dt), -1) << dtype_name(dt);
  }
}

// Rank r's piece for rank p is the elements with global index (r * n + p) * count + i.
void check_all_to_all(MpiCommunicator& c, DType dt, size_t count, bool async, uint32_t seed) {
  SCOPED_TRACE(trace("all_to_all", dt, count, async, false));
  const int n = c.size(), me = c.rank();
  const size_t e = dtype_size(dt);
  std::vector<uint8_t> send(n * count * e + 1), recv(n * count * e + 1), want(n * count * e + 1);
  for (int p = 0; p < n; ++p) {
    fill(send.data() + p * count * e, dt, me, (me * n + p) * count, count, seed);
    fill(want.data() + p * count * e, dt, p, (p * n + me) * count, count, seed);
  }
  if (async) {
    auto w = c.start_all_to_all(send.data(), recv.data(), count, dt);
    w->wait();
  } else {
    c.all_to_all(send.data(), recv.data(), count, dt);
  }
  EXPECT_EQ(first_mismatch(recv.data(), want.data(), n * count, dt), -1);
}

TEST(MpiCommunicator, AllToAllEveryDtype) {
  auto c = MpiCommunicator::world();
  for (DType dt : kAllTypes) {
    for (size_t count : gather_counts(dt)) {
      for (bool async : {false, true}) check_all_to_all(*c, dt, count, async, 11);
    }
  }
  // Bytes: (n-1) * count * e each way; overlapping buffers are refused.
  c->reset_counters();
  std::vector<float> buf(4 * c->size());
  c->all_to_all(buf.data(), buf.data() + 2 * c->size(), 2, DType::kF32);
  const int k = static_cast<int>(CollectiveKind::kAllToAll);
  EXPECT_EQ(c->counters().sent[k], (c->size() - 1) * 2 * 4);
  EXPECT_EQ(c->counters().received[k], (c->size() - 1) * 2 * 4);
  EXPECT_EQ(c->counters().calls[k], 1);
  EXPECT_THROW(c->all_to_all(buf.data(), buf.data() + 1, 2, DType::kF32), Error);
}

// Counts above the chunk limit go through several MPI calls over derived datatypes.
TEST(MpiCommunicator, ChunkedPathGivesTheSameResults) {
  auto c = MpiCommunicator::world();
  c->set_chunk_limit(7);
  for (bool async : {false, true})
    for (bool in_place : {false, true}) {
      check_all_gather(*c, DType::kF16, 100, async, in_place, 3);
      check_reduce_scatter(*c, DType::kBF16, ReduceOp::kSum, 100, async, in_place, 4);
      check_all_reduce(*c, DType::kF32, ReduceOp::kAvg, 103, async, in_place, 5);
      if (!in_place) check_all_to_all(*c, DType::kU8, 100, async, 6);
    }
  std::vector<uint8_t> buf(50), want(50);
  fill(want.data(), DType::kU8, 0, 0, 50, 9);
  if (c->rank() == 0) buf = want;
  c->broadcast(buf.data(), 50, DType::kU8, 0);
  EXPECT_EQ(buf, want);
}

TEST(MpiCommunicator, BroadcastEveryDtypeAndRoot) {
  auto c = MpiCommunicator::world();
  for (DType dt : kAllTypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}})
      for (int root = 0; root < c->size(); ++root) {
        const size_t e = dtype_size(dt);
        std::vector<uint8_t> buf(count * e + 1, 0), want(count * e + 1, 0);
        fill(want.data(), dt, root, 0, count, 17);
        if (c->rank() == root) buf = want;
        c->broadcast(buf.data(), count, dt, root);
        EXPECT_EQ(first_mismatch(buf.data(), want.data(), count, dt), -1)
            << dtype_name(dt) << " count " << count << " root " << root;
      }
}

// Several operations in flight at once, waited in another order than started, with rank-dependent
// polling: the second phases of all_reduce must still match across ranks.
TEST(MpiCommunicator, SeveralAsyncInFlight) {
  auto c = MpiCommunicator::world();
  const int n = c->size(), me = c->rank();
  const size_t ca = 10'001, cb = 4'096;
  std::vector<float> a1(ca), a2(ca), rs(n * cb), rs_out(cb), g(n * cb), want(ca);
  std::vector<uint16_t> h(777), hwant(777);
  fill(a1.data(), DType::kF32, me, 0, ca, 1);
  fill(a2.data(), DType::kF32, me, 0, ca, 2);
  fill(h.data(), DType::kBF16, me, 0, 777, 3);
  fill(rs.data(), DType::kF32, me, 0, n * cb, 4);
  fill(g.data() + me * cb, DType::kF32, me, me * cb, cb, 6);

  auto w1 = c->start_all_reduce(a1.data(), a1.data(), ca, DType::kF32, ReduceOp::kSum);
  auto w2 = c->start_reduce_scatter(rs.data(), rs_out.data(), cb, DType::kF32, ReduceOp::kMax);
  auto w3 = c->start_all_reduce(a2.data(), a2.data(), ca, DType::kF32, ReduceOp::kAvg);
  auto w4 = c->start_all_gather(g.data() + me * cb, g.data(), cb, DType::kF32);
  auto w5 = c->start_all_reduce(h.data(), h.data(), 777, DType::kBF16, ReduceOp::kSum);
  if (me == 0) {
    for (int i = 0; i < 1000 && !w3->test(); ++i) {
    }
  }
  w5->wait();
  w4->wait();
  w3.reset();  // destroying an unfinished Work waits for it
  w2->wait();
  w1->wait();

  reference(want.data(), DType::kF32, ReduceOp::kSum, n, 0, ca, 1);
  EXPECT_EQ(first_mismatch(a1.data(), want.data(), ca, DType::kF32), -1);
  reference(want.data(), DType::kF32, ReduceOp::kAvg, n, 0, ca, 2);
  EXPECT_EQ(first_mismatch(a2.data(), want.data(), ca, DType::kF32), -1);
  reference(hwant.data(), DType::kBF16, ReduceOp::kSum, n, 0, 777, 3);
  EXPECT_EQ(first_mismatch(h.data(), hwant.data(), 777, DType::kBF16), -1);
  reference(want.data(), DType::kF32, ReduceOp::kMax, n, me * cb, cb, 4);
  EXPECT_EQ(first_mismatch(rs_out.data(), want.data(), cb, DType::kF32), -1);
  std::vector<float> gwant(n * cb);
  for (int r = 0; r < n; ++r) fill(gwant.data() + r * cb, DType::kF32, r, r * cb, cb, 6);
  EXPECT_EQ(g, gwant);
}

// After reserve(), steps do not allocate: the scratch pool neither grows nor adds slots.
TEST(MpiCommunicator, ReserveMeansNoAllocationPerStep) {
  auto c = MpiCommunicator::world();
  const size_t count = 50'001;  // does not divide by 2 or 4: the padded all_reduce path
  const size_t need = c->scratch_bytes(CollectiveKind::kAllReduce, count, DType::kF32);
  c->reserve(need, 2);
  const size_t allocated = c->scratch_allocated();
  EXPECT_GE(allocated, 2 * need);
  auto& tracker = MemoryTracker::process();
  const int64_t comm_bytes = tracker.current(MemCategory::kCommBuffers);
  std::vector<float> a(count), b(count);
  for (int step = 0; step < 3; ++step) {
    auto w1 = c->start_all_reduce(a.data(), a.data(), count, DType::kF32, ReduceOp::kSum);
    auto w2 = c->start_all_reduce(b.data(), b.data(), count, DType::kF32, ReduceOp::kSum);
    c->reduce_scatter(a.data(), b.data(), count / c->size(), DType::kF32, ReduceOp::kSum);
    w2->wait();
    w1->wait();
    c->all_reduce(a.data(), a.data(), count, DType::kF32, ReduceOp::kSum);
  }
  // Two all_reduces in flight plus one reduce_scatter beside them: a third slot, once.
  const size_t after_first = c->scratch_allocated();
  for (int step = 0; step < 3; ++step) {
    auto w1 = c->start_all_reduce(a.data(), a.data(), count, DType::kF32, ReduceOp::kSum);
    auto w2 = c->start_all_reduce(b.data(), b.data(), count, DType::kF32, ReduceOp::kSum);
    c->reduce_scatter(a.data(), b.data(), count / c->size(), DType::kF32, ReduceOp::kSum);
  }
  EXPECT_EQ(c->scratch_allocated(), after_first);
  EXPECT_EQ(tracker.current(MemCategory::kCommBuffers) - comm_bytes,
            static_cast<int64_t>(after_first - allocated));
}

TEST(MpiCommunicator, ByteCountersMatchTheRingFormulas) {
  auto c = MpiCommunicator::world();
  const int64_t n = c->size(), me = c->rank();
  std::vector<uint8_t> a(1 << 16), b(1 << 16);
  c->reset_counters();
  c->all_gather(a.data(), b.data(), 10, DType::kF32);
  c->start_all_gather(a.data(), b.data(), 3, DType::kBF16)->wait();
  c->reduce_scatter(a.data(), b.data(), 6, DType::kBF16, ReduceOp::kSum);
  c->all_reduce(a.data(), b.data(), 10, DType::kF32, ReduceOp::kSum);
  c->start_all_reduce(a.data(), b.data(), 13, DType::kF64, ReduceOp::kMax)->wait();
  c->broadcast(a.data(), 5, DType::kF64, static_cast<int>(n - 1));
  c->barrier();
  const auto& k = c->counters();
  auto at = [](CollectiveKind kind) { return static_cast<int>(kind); };
  const int64_t ag = (n - 1) * (10 * 4 + 3 * 2);
  const int64_t rs = (n - 1) * 6 * 2;
  const int64_t ar = 2 * (n - 1) * ((10 + n - 1) / n * 4 + (13 + n - 1) / n * 8);
  const int64_t bc_sent = me == n - 1 ? 5 * 8 * (n - 1) : 0;
  const int64_t bc_recv = (me == n - 1 || n == 1) ? 0 : 5 * 8;
  EXPECT_EQ(k.sent[at(CollectiveKind::kAllGather)], ag);
  EXPECT_EQ(k.received[at(CollectiveKind::kAllGather)], ag);
  EXPECT_EQ(k.sent[at(CollectiveKind::kReduceScatter)], rs);
  EXPECT_EQ(k.received[at(CollectiveKind::kReduceScatter)], rs);
  EXPECT_EQ(k.sent[at(CollectiveKind::kAllReduce)], ar);
  EXPECT_EQ(k.received[at(CollectiveKind::kAllReduce)], ar);
  EXPECT_EQ(k.sent[at(CollectiveKind::kBroadcast)], bc_sent);
  EXPECT_EQ(k.received[at(CollectiveKind::kBroadcast)], bc_recv);
  EXPECT_EQ(k.calls[at(CollectiveKind::kAllGather)], 2);
  EXPECT_EQ(k.calls[at(CollectiveKind::kAllReduce)], 2);
  EXPECT_EQ(k.calls[at(CollectiveKind::kBarrier)], 1);
  EXPECT_EQ(k.total_sent(), ag + rs + ar + bc_sent);
  EXPECT_EQ(k.total_received(), ag + rs + ar + bc_recv);
  c->reset_counters();
  EXPECT_EQ(c->counters().total_sent(), 0);
}

// The shared-memory window path and the MPI path give the same bits, whatever the pass size.
TEST(MpiCommunicator, SharedPathMatchesMpiPathBitwise) {
  auto shm = MpiCommunicator::world();
  auto mpi = MpiCommunicator::world();
  mpi->set_shared_memory(false);
  EXPECT_FALSE(mpi->shared_memory());
  // The tests run on one node: the window path is available wherever there is a peer.
  shm->set_shared_memory(true);
  EXPECT_EQ(shm->shared_memory(), shm->size() > 1);
  const int n = shm->size(), me = shm->rank();
  for (size_t limit : {size_t{0}, size_t{8} * n, size_t{200}, size_t{4096}}) {
    if (limit != 0) shm->set_shm_pass_limit(limit);
    for (DType dt : kFloatTypes)
      for (ReduceOp op : kOps)
        for (size_t count : {size_t{1}, static_cast<size_t>(n) + 1, size_t{1001}, size_t{20'000}}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(reduce_op_name(op)) +
                       " count=" + std::to_string(count) + " limit=" + std::to_string(limit));
          const size_t e = dtype_size(dt);
          std::vector<uint8_t> send(n * count * e), a(n * count * e), b(n * count * e);
          fill(send.data(), dt, me, 0, n * count, 71);
          shm->all_reduce(send.data(), a.data(), count, dt, op);
          mpi->all_reduce(send.data(), b.data(), count, dt, op);
          EXPECT_EQ(first_mismatch(a.data(), b.data(), count, dt), -1);
          shm->start_reduce_scatter(send.data(), a.data(), count, dt, op)->wait();
          mpi->reduce_scatter(send.data(), b.data(), count, dt, op);
          EXPECT_EQ(first_mismatch(a.data(), b.data(), count, dt), -1);
        }
  }
}

// Multi-pass window operations, sync and async, in and out of place, against the reference.
TEST(MpiCommunicator, SharedPathSmallPasses) {
  auto c = MpiCommunicator::world();
  c->set_shared_memory(true);
  c->set_shm_pass_limit(8 * c->size() + 8);
  for (bool async : {false, true})
    for (bool in_place : {false, true}) {
      check_reduce_scatter(*c, DType::kBF16, ReduceOp::kSum, 100, async, in_place, 4);
      check_reduce_scatter(*c, DType::kF64, ReduceOp::kMax, 33, async, in_place, 7);
      check_all_reduce(*c, DType::kF32, ReduceOp::kAvg, 103, async, in_place, 5);
      check_all_reduce(*c, DType::kF16, ReduceOp::kSum, 1, async, in_place, 8);
    }
}

// Window operations started before a synchronous one, waited in another order: they still run in
// start order on every rank, and the window is not clobbered by the later calls.
TEST(MpiCommunicator, SharedPathAsyncThenSync) {
  auto c = MpiCommunicator::world();
  const int n = c->size(), me = c->rank();
  const size_t ca = 30'001;
  std::vector<float> a1(ca), a2(ca), rs(n * ca), out(ca), want(ca);
  fill(a1.data(), DType::kF32, me, 0, ca, 1);
  fill(a2.data(), DType::kF32, me, 0, ca, 2);
  fill(rs.data(), DType::kF32, me, 0, n * ca, 3);
  auto w1 = c->start_all_reduce(a1.data(), a1.data(), ca, DType::kF32, ReduceOp::kSum);
  auto w2 = c->start_all_reduce(a2.data(), a2.data(), ca, DType::kF32, ReduceOp::kMax);
  c->reduce_scatter(rs.data(), out.data(), ca, DType::kF32, ReduceOp::kSum);  // runs w1, w2 first
  if (me % 2 == 0) {
    w2->wait();
    w1->wait();
  } else {
    w1.reset();
    while (!w2->test()) {
    }
  }
  reference(want.data(), DType::kF32, ReduceOp::kSum, n, 0, ca, 1);
  EXPECT_EQ(first_mismatch(a1.data(), want.data(), ca, DType::kF32), -1);
  reference(want.data(), DType::kF32, ReduceOp::kMax, n, 0, ca, 2);
  EXPECT_EQ(first_mismatch(a2.data(), want.data(), ca, DType::kF32), -1);
  reference(want.data(), DType::kF32, ReduceOp::kSum, n, me * ca, ca, 3);
  EXPECT_EQ(first_mismatch(out.data(), want.data(), ca, DType::kF32), -1);
}

// ZS_COLLECTIVES_SHM=0 (read at construction) keeps the MPI path.
TEST(MpiCommunicator, SharedPathDisabledByEnvironment) {
  const char* old = std::getenv("ZS_COLLECTIVES_SHM");
  const std::string saved = old ? old : "";
  setenv("ZS_COLLECTIVES_SHM", "0", 1);
  auto off = MpiCommunicator::world();
  EXPECT_FALSE(off->shared_memory());
  setenv("ZS_COLLECTIVES_SHM", "1", 1);
  auto on = MpiCommunicator::world();
  EXPECT_EQ(on->shared_memory(), on->size() > 1);
  if (old) {
    setenv("ZS_COLLECTIVES_SHM", saved.c_str(), 1);
  } else {
    unsetenv("ZS_COLLECTIVES_SHM");
  }
  check_all_reduce(*off, DType::kBF16, ReduceOp::kSum, 1001, false, false, 9);
  check_reduce_scatter(*off, DType::kF32, ReduceOp::kAvg, 1001, true, true, 10);
}

// Sets an environment variable for a scope and puts back what the process had.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) saved_ = old;
    setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (had_) {
      setenv(name_.c_str(), saved_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_, saved_;
  bool had_ = false;
};

// [Note: environment settings]: the options' defaults are the settings' defaults; the
// constructor without options reads ZS_COLLECTIVES_SHM, ZS_COLLECTIVES_SHM_PASS and
// ZS_CHECK_COLLECTIVES; explicit options win over them and split() passes them on.
TEST(MpiCommunicator, OptionsFromSettingsOrExplicit) {
  const MpiCommunicatorOptions d;
  const Settings s;
  EXPECT_EQ(d.shared_memory, s.collectives_shm);
  EXPECT_EQ(d.shm_pass_bytes, s.collectives_shm_pass);
  EXPECT_EQ(d.check_collectives, s.check_collectives);
  Settings t;
  t.collectives_shm = false;
  t.collectives_shm_pass = 123;
  t.check_collectives = true;
  const MpiCommunicatorOptions o = MpiCommunicatorOptions::from_settings(t);
  EXPECT_FALSE(o.shared_memory);
  EXPECT_EQ(o.shm_pass_bytes, 123u);
  EXPECT_TRUE(o.check_collectives);

  std::unique_ptr<MpiCommunicator> env, expl;
  {
    EnvGuard shm("ZS_COLLECTIVES_SHM", "1");
    EnvGuard pass("ZS_COLLECTIVES_SHM_PASS", "1048576");
    EnvGuard check("ZS_CHECK_COLLECTIVES", "1");
    env = MpiCommunicator::world();
    MpiCommunicatorOptions mine;
    mine.shared_memory = false;
    mine.shm_pass_bytes = 4096 + 63;  // rounded down to a multiple of 64
    mine.check_collectives = false;
    expl = MpiCommunicator::world(mine);
  }
  const int n = env->size();
  EXPECT_EQ(env->shared_memory(), n > 1);
  EXPECT_EQ(env->shm_pass_limit(), 1048576u);
  EXPECT_TRUE(env->checking());
  EXPECT_FALSE(expl->shared_memory());
  EXPECT_EQ(expl->shm_pass_limit(), 4096u);
  EXPECT_FALSE(expl->checking());
  for (MpiCommunicator* parent : {env.get(), expl.get()}) {
    auto child = parent->split(0, parent->rank());
    auto* c = dynamic_cast<MpiCommunicator*>(child.get());
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->shared_memory(), parent->shared_memory());
    EXPECT_EQ(c->checking(), parent->checking());
    EXPECT_EQ(c->options().shm_pass_bytes, parent->options().shm_pass_bytes);
    auto shared = parent->split_shared();
    EXPECT_EQ(shared->shared_memory(), parent->shared_memory());
    EXPECT_EQ(shared->checking(), parent->checking());
  }
  check_all_reduce(*env, DType::kF32, ReduceOp::kSum, 1001, false, false, 11);
  check_all_reduce(*expl, DType::kF32, ReduceOp::kSum, 1001, false, false, 11);
}

TEST(MpiCommunicator, SplitEvenOdd) {
  auto c = MpiCommunicator::world();
  const int n = c->size(), me = c->rank();
  auto sub = c->split(me % 2, me);
  ASSERT_NE(sub, nullptr);  // split is collective and done: no collective is left behind
  EXPECT_EQ(sub->size(), (n + 1 - me % 2) / 2);
  EXPECT_EQ(sub->rank(), me / 2);
  double x = me, sum = 0;
  sub->all_reduce(&x, &sum, 1, DType::kF64, ReduceOp::kSum);
  double want = 0;
  for (int r = me % 2; r < n; r += 2) want += r;
  EXPECT_EQ(sum, want);
  auto none = c->split(me == 0 ? -1 : 0, me);
  EXPECT_EQ(none == nullptr, me == 0);
  if (none) {
    EXPECT_EQ(none->size(), n - 1);
  }
}

}  // namespace
}  // namespace zs
