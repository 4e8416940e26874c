// Multi-rank tests of HierarchicalCommunicator ([Note: hierarchical collectives]). Run at 4 ranks
// as 2 fake nodes on one host (ZS_FAKE_NODES=2) and at 2 nodes x 2 ranks on the simulated cluster
// (scripts/sim_cluster.sh: real namespaces, shared memory within a node, TCP between nodes).
// * all-gather: bit for bit the flat (world) all-gather, every dtype;
// * reductions: bit for bit the documented order (node-local partials in local-rank order, summed
//   over nodes in cross-rank order, fp32/fp64 accumulator, one rounding), recomputed here from
//   world_rank_of(); bit for bit the flat result on integer-valued data; within fp32 rounding of
//   the flat result on random data (the max difference is printed);
// * byte counters by link class against the formulas of [Note: link counters].
// ZS_TEST_EXPECT_NODES=K (set by the ctest entries) makes the layout test check the node count.
// EXPECT_ (not ASSERT_) before any collective, so one failure never leaves a rank behind.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collective_test_util.h"
#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_communicator.h"
#include "core/convert.h"
#include "core/error.h"

namespace zs {
namespace {

using test::fill;
using test::first_mismatch;
using test::input_value;

const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                           DType::kF64, DType::kI8,  DType::kU8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

std::string trace(const char* what, DType dt, size_t count, bool async, bool in_place,
                  ReduceOp op = ReduceOp::kSum) {
  return std::string(what) + " " + std::string(dtype_name(dt)) + " " +
         std::string(reduce_op_name(op)) + " count=" + std::to_string(count) +
         (async ? " async" : " sync") + (in_place ? " in-place" : " out-of-place");
}

// Small integers (|x| <= 8), exactly representable everywhere: every partial sum is exact.
double int_value(int r, size_t g, uint32_t seed) {
  return static_cast<double>(
             test::mix(seed * 7919u + static_cast<uint32_t>(r) * 131u + static_cast<uint32_t>(g)) %
             17) -
         8.0;
}

// Rank r's input at global index g: seeded random (test::input_value) or small integers.
double value(DType dt, int r, size_t g, uint32_t seed, bool integers) {
  return integers ? int_value(r, g, seed) : input_value(dt, r, g, seed);
}

void fill_values(void* buf, DType dt, int r, size_t first, size_t count, uint32_t seed,
                 bool integers) {
  for (size_t i = 0; i < count; ++i) {
    test::store_value(buf, dt, i, value(dt, r, first + i, seed, integers));
  }
}

// The documented hierarchical order: per node (cross rank k), local ranks 0..L-1 left to right;
// then the nodes' partials 0..N-1 left to right; fp32 (fp64) accumulator; kAvg divides by n;
// one rounding to dt.
void hier_reference(void* out, DType dt, ReduceOp op, const HierarchicalCommunicator& h,
                    size_t first, size_t count, uint32_t seed, bool integers) {
  const int N = h.num_nodes(), L = h.local_size(), n = h.size();
  auto combine = [op](auto acc, auto x) {
    return op == ReduceOp::kMax ? ((x > acc || x != x) ? x : acc) : acc + x;
  };
  for (size_t i = 0; i < count; ++i) {
    const size_t g = first + i;
    if (dt == DType::kF64) {
      double total = 0;
      for (int k = 0; k < N; ++k) {
        double part = value(dt, h.world_rank_of(k, 0), g, seed, integers);
        for (int l = 1; l < L; ++l)
          part = combine(part, value(dt, h.world_rank_of(k, l), g, seed, integers));
        total = k == 0 ? part : combine(total, part);
      }
      if (op == ReduceOp::kAvg) total /= static_cast<double>(n);
      static_cast<double*>(out)[i] = total;
    } else {
      float total = 0;
      for (int k = 0; k < N; ++k) {
        float part = static_cast<float>(value(dt, h.world_rank_of(k, 0), g, seed, integers));
        for (int l = 1; l < L; ++l) {
          part = combine(part,
                         static_cast<float>(value(dt, h.world_rank_of(k, l), g, seed, integers)));
        }
        total = k == 0 ? part : combine(total, part);
      }
      if (op == ReduceOp::kAvg) total /= static_cast<float>(n);
      store_from_fp32(out, dt, i, total);
    }
  }
}

double load(const void* p, DType dt, size_t i) {
  return dt == DType::kF64 ? static_cast<const double*>(p)[i] : load_as_fp32(p, dt, i);
}

// One unit in the last place of dt at magnitude |v| (dt's precision: fp32 24 bits, fp16 11, bf16
// 8, fp64 53).
double ulp(DType dt, double v) {
  const int bits = dt == DType::kF64 ? 53 : dt == DType::kF32 ? 24 : dt == DType::kF16 ? 11 : 8;
  const double a = std::max(std::fabs(v), dt == DType::kF16 ? 6.1e-5 : 1e-30);
  return std::ldexp(1.0, std::ilogb(a) - bits + 1);
}

// Max over elements of |hier - flat| / bound, where bound = 2(n-1)u sum|x| (/n for kAvg) plus one
// ulp of dt at the flat value: the two orders' sums are each within (n-1)u sum|x| of the exact
// sum, and the final rounding to dt may then differ by one ulp. <= 1 passes.
double max_relative_gap(const void* hier, const void* flat, DType dt, ReduceOp op, int n,
                        size_t first, size_t count, uint32_t seed, double* max_abs) {
  const double u = dt == DType::kF64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double sum_abs = 0;
    for (int r = 0; r < n; ++r) sum_abs += std::fabs(input_value(dt, r, first + i, seed));
    if (op == ReduceOp::kAvg) sum_abs /= n;
    const double f = load(flat, dt, i), h = load(hier, dt, i);
    const double gap = std::fabs(h - f);
    *max_abs = std::max(*max_abs, gap);
    const double bound = 2.0 * (n - 1) * u * sum_abs * 1.0001 + ulp(dt, f);
    worst = std::max(worst, gap / bound);
  }
  return worst;
}

struct Fixture {
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  HierarchicalCommunicator h{*world};
};

// ---------------------------------------------------------------------------------------------

TEST(HierarchicalCommunicator, Layout) {
  Fixture f;
  auto& h = f.h;
  const int n = h.size(), N = h.num_nodes(), L = h.local_size();
  EXPECT_EQ(N * L, n);
  EXPECT_EQ(h.rank(), f.world->rank());
  EXPECT_EQ(h.hierarchical(), N > 1 && L > 1);
  if (const char* want = std::getenv("ZS_TEST_EXPECT_NODES")) {
    EXPECT_EQ(N, std::atoi(want)) << "nodes found: " << N << " of " << L << " ranks";
  }
  // W(k, l) is a permutation of the world ranks, and this rank is at its own (k, l).
  std::vector<int> seen(n, 0);
  bool found_me = false;
  for (int k = 0; k < N; ++k)
    for (int l = 0; l < L; ++l) {
      const int r = h.world_rank_of(k, l);
      ASSERT_TRUE(r >= 0 && r < n);
      seen[r] += 1;
      found_me = found_me || (r == h.rank() && l == h.local_rank());
    }
  EXPECT_TRUE(found_me);
  for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], 1);
  EXPECT_EQ(h.world_rank_of(N, 0), -1);
  if (h.rank() == 0) {
    std::printf("layout: %d node(s) x %d rank(s), hierarchical %s\n", N, L,
                h.hierarchical() ? "on" : "off (flat)");
  }
}

void check_all_gather(HierarchicalCommunicator& h, MpiCommunicator& world, DType dt, size_t count,
                      bool async, bool in_place, uint32_t seed) {
  SCOPED_TRACE(trace("all_gather", dt, count, async, in_place));
  const int n = h.size(), me = h.rank();
  const size_t e = dtype_size(dt);
  std::vector<uint8_t> send(count * e + 1), recv(n * count * e + 1), flat(n * count * e + 1),
      want(n * count * e + 1);
  for (int r = 0; r < n; ++r) fill(want.data() + r * count * e, dt, r, r * count, count, seed);
  fill(send.data(), dt, me, me * count, count, seed);
  uint8_t* mine = in_place ? recv.data() + me * count * e : send.data();
  if (in_place) fill(mine, dt, me, me * count, count, seed);
  if (async) {
    auto w = h.start_all_gather(mine, recv.data(), count, dt);
    w->wait();
  } else {
    h.all_gather(mine, recv.data(), count, dt);
  }
  world.all_gather(send.data(), flat.data(), count, dt);
  EXPECT_EQ(first_mismatch(recv.data(), want.data(), n * count, dt), -1);
  EXPECT_EQ(first_mismatch(recv.data(), flat.data(), n * count, dt), -1);
}

TEST(HierarchicalCommunicator, AllGatherBitwiseEqualsFlat) {
  Fixture f;
  for (DType dt : kAllTypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100'003}})
      for (bool async : {false, true})
        for (bool in_place : {false, true})
          check_all_gather(f.h, *f.world, dt, count, async, in_place, 11);
}

// Reduce-scatter (per-rank count) or all-reduce (total count) through h and through the world:
// h's bits against the documented order; against flat bitwise on integers, else within rounding.
void check_reduction(HierarchicalCommunicator& h, MpiCommunicator& world, CollectiveKind kind,
                     DType dt, ReduceOp op, size_t count, bool async, bool in_place, uint32_t seed,
                     bool integers, double* worst, double* max_abs) {
  const bool rs = kind == CollectiveKind::kReduceScatter;
  SCOPED_TRACE(trace(rs ? "reduce_scatter" : "all_reduce", dt, count, async, in_place, op) +
               (integers ? " integers" : " random"));
  const int n = h.size(), me = h.rank();
  const size_t e = dtype_size(dt);
  const size_t in_count = rs ? n * count : count;
  const size_t first = rs ? me * count : 0;  // global index of this rank's first result
  std::vector<uint8_t> send(in_count * e + 1), out(count * e + 1), flat(count * e + 1),
      want(count * e + 1);
  fill_values(send.data(), dt, me, 0, in_count, seed, integers);
  hier_reference(want.data(), dt, op, h, first, count, seed, integers);
  std::vector<uint8_t> keep(send);  // the input again, for the flat call after an in-place one
  void* recv = in_place ? (rs ? send.data() + me * count * e : send.data()) : out.data();
  if (async) {
    auto w = rs ? h.start_reduce_scatter(send.data(), recv, count, dt, op)
                : h.start_all_reduce(send.data(), recv, count, dt, op);
    while (!w->test()) {
    }
  } else if (rs) {
    h.reduce_scatter(send.data(), recv, count, dt, op);
  } else {
    h.all_reduce(send.data(), recv, count, dt, op);
  }
  if (rs) {
    world.reduce_scatter(keep.data(), flat.data(), count, dt, op);
  } else {
    world.all_reduce(keep.data(), flat.data(), count, dt, op);
  }
  EXPECT_EQ(first_mismatch(recv, want.data(), count, dt), -1)
      << "differs from the documented order";
  if (integers || op == ReduceOp::kMax || !h.hierarchical()) {
    EXPECT_EQ(first_mismatch(recv, flat.data(), count, dt), -1) << "differs from flat";
  } else {
    const double gap = max_relative_gap(recv, flat.data(), dt, op, n, first, count, seed, max_abs);
    EXPECT_LE(gap, 1.0) << "outside the fp32 rounding bound";
    *worst = std::max(*worst, gap);
  }
}

void reductions(CollectiveKind kind, bool integers) {
  Fixture f;
  const size_t n = f.h.size();
  double worst = 0, max_abs = 0;
  const std::vector<size_t> counts =
      kind == CollectiveKind::kReduceScatter
          ? std::vector<size_t>{0, 1, 7, 1000, 30'001}
          : std::vector<size_t>{0, 1, n - 1, n + 1, 4 * n, 1001, 100'003};
  for (DType dt : kFloatTypes)
    for (ReduceOp op : kOps)
      for (size_t count : counts)
        for (bool async : {false, true})
          for (bool in_place : {false, true})
            check_reduction(f.h, *f.world, kind, dt, op, count, async, in_place, 23, integers,
                            &worst, &max_abs);
  double all[2] = {worst, max_abs};
  MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (f.h.rank() == 0 && !integers) {
    std::printf("%s vs flat, random data: max |hier - flat| = %.3g, max gap / bound = %.3g\n",
                kind == CollectiveKind::kReduceScatter ? "reduce_scatter" : "all_reduce", all[1],
                all[0]);
  }
}

TEST(HierarchicalCommunicator, ReduceScatterDocumentedOrder) {
  reductions(CollectiveKind::kReduceScatter, false);
}
TEST(HierarchicalCommunicator, ReduceScatterIntegersBitwiseEqualsFlat) {
  reductions(CollectiveKind::kReduceScatter, true);
}
TEST(HierarchicalCommunicator, AllReduceDocumentedOrder) {
  reductions(CollectiveKind::kAllReduce, false);
}
TEST(HierarchicalCommunicator, AllReduceIntegersBitwiseEqualsFlat) {
  reductions(CollectiveKind::kAllReduce, true);
}

// Several asynchronous operations started at once and waited in a different order on different
// ranks, with a synchronous one and a broadcast between them: each completes in call order.
TEST(HierarchicalCommunicator, AsyncAnyWaitOrder) {
  Fixture f;
  auto& h = f.h;
  const int n = h.size(), me = h.rank();
  const size_t c = 20'001;
  std::vector<float> a1(c), g(c), gall(n * c), rs(n * c), rs_out(c), want(n * c);
  std::vector<uint16_t> a2(c);
  fill(a1.data(), DType::kF32, me, 0, c, 1);
  fill(a2.data(), DType::kBF16, me, 0, c, 2);
  fill(g.data(), DType::kF32, me, me * c, c, 3);
  fill(rs.data(), DType::kF32, me, 0, n * c, 4);
  auto w1 = h.start_all_reduce(a1.data(), a1.data(), c, DType::kF32, ReduceOp::kSum);
  auto w2 = h.start_all_reduce(a2.data(), a2.data(), c, DType::kBF16, ReduceOp::kAvg);
  auto w3 = h.start_all_gather(g.data(), gall.data(), c, DType::kF32);
  h.reduce_scatter(rs.data(), rs_out.data(), c, DType::kF32, ReduceOp::kMax);
  double x = me == n - 1 ? 42.0 : 0.0;
  auto w4 = h.start_all_reduce(a1.data(), a1.data(), 0, DType::kF32, ReduceOp::kSum);
  h.broadcast(&x, 1, DType::kF64, n - 1);
  if (me % 2 == 0) {
    w3->wait();
    w2->wait();
    w1.reset();
  } else {
    while (!w1->test()) {
    }
    w2.reset();
    w3->wait();
  }
  w4->wait();
  EXPECT_EQ(x, 42.0);
  std::vector<float> ref(c);
  std::vector<uint16_t> ref16(c);
  hier_reference(ref.data(), DType::kF32, ReduceOp::kSum, h, 0, c, 1, false);
  EXPECT_EQ(first_mismatch(a1.data(), ref.data(), c, DType::kF32), -1);
  hier_reference(ref16.data(), DType::kBF16, ReduceOp::kAvg, h, 0, c, 2, false);
  EXPECT_EQ(first_mismatch(a2.data(), ref16.data(), c, DType::kBF16), -1);
  for (int r = 0; r < n; ++r) fill(want.data() + r * c, DType::kF32, r, r * c, c, 3);
  EXPECT_EQ(first_mismatch(gall.data(), want.data(), n * c, DType::kF32), -1);
  hier_reference(ref.data(), DType::kF32, ReduceOp::kMax, h, me * c, c, 4, false);
  EXPECT_EQ(first_mismatch(rs_out.data(), ref.data(), c, DType::kF32), -1);
}

// set_hierarchical(false): the world's flat collectives, the same bits as the world's.
TEST(HierarchicalCommunicator, FlatModeIsTheWorld) {
  Fixture f;
  auto& h = f.h;
  const bool possible = h.hierarchical_possible();
  h.set_hierarchical(false);
  EXPECT_FALSE(h.hierarchical());
  double worst = 0, max_abs = 0;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      const int n = h.size(), me = h.rank();
      const size_t c = 1001, e = dtype_size(dt);
      std::vector<uint8_t> send(n * c * e), a(n * c * e), b(n * c * e);
      fill(send.data(), dt, me, 0, n * c, 5);
      h.all_reduce(send.data(), a.data(), c, dt, op);
      f.world->all_reduce(send.data(), b.data(), c, dt, op);
      EXPECT_EQ(first_mismatch(a.data(), b.data(), c, dt), -1);
      h.start_reduce_scatter(send.data(), a.data(), c, dt, op)->wait();
      f.world->reduce_scatter(send.data(), b.data(), c, dt, op);
      EXPECT_EQ(first_mismatch(a.data(), b.data(), c, dt), -1);
    }
  h.set_hierarchical(true);
  EXPECT_EQ(h.hierarchical(), possible);
  check_reduction(h, *f.world, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, 999, false,
                  false, 6, false, &worst, &max_abs);
}

// all_to_all is the world's (flat) in both modes: the world's bytes, and the link counters of
// the flat model, (L-1)*c*e within the node and (n-L)*c*e across nodes.
TEST(HierarchicalCommunicator, AllToAllIsTheWorlds) {
  Fixture f;
  auto& h = f.h;
  const int n = h.size(), L = h.local_size();
  const size_t c = 37;
  std::vector<uint8_t> send(n * c * 2), a(n * c * 2), b(n * c * 2);
  fill(send.data(), DType::kBF16, h.rank(), 0, n * c, 8);
  h.reset_counters();
  h.all_to_all(send.data(), a.data(), c, DType::kBF16);
  f.world->all_to_all(send.data(), b.data(), c, DType::kBF16);
  EXPECT_EQ(a, b);
  h.start_all_to_all(send.data(), a.data(), c, DType::kBF16)->wait();
  EXPECT_EQ(a, b);
  const int k = static_cast<int>(CollectiveKind::kAllToAll);
  EXPECT_EQ(h.counters().sent[k], 2 * (n - 1) * int64_t{c} * 2);
  EXPECT_EQ(h.link_counters().intra_node.sent[k], 2 * (L - 1) * int64_t{c} * 2);
  EXPECT_EQ(h.link_counters().inter_node.received[k], 2 * (n - L) * int64_t{c} * 2);
}

// [Note: link counters], hierarchical mode: the sub-collectives' ring bytes by class.
TEST(HierarchicalCommunicator, LinkCountersHierarchical) {
  Fixture f;
  auto& h = f.h;
  const int64_t n = h.size(), N = h.num_nodes(), L = h.local_size();
  std::vector<uint8_t> a(1 << 18), b(1 << 18);
  h.reset_counters();
  h.all_gather(a.data(), b.data(), 10, DType::kF32);
  h.start_all_gather(a.data(), b.data(), 3, DType::kBF16)->wait();
  h.reduce_scatter(a.data(), b.data(), 6, DType::kBF16, ReduceOp::kSum);
  h.all_reduce(a.data(), b.data(), 10, DType::kF32, ReduceOp::kSum);
  h.start_all_reduce(a.data(), b.data(), 13, DType::kF64, ReduceOp::kMax)->wait();
  h.barrier();
  const auto& k = h.counters();
  const auto& lk = h.link_counters();
  auto at = [](CollectiveKind kind) { return static_cast<int>(kind); };
  auto cdiv = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  int64_t ag_intra, ag_inter, rs_intra, rs_inter, ar_intra, ar_inter;
  if (h.hierarchical()) {
    ag_intra = (L - 1) * N * (10 * 4 + 3 * 2);
    ag_inter = (N - 1) * (10 * 4 + 3 * 2);
    rs_intra = (L - 1) * N * 6 * 4;  // bf16 reduced as fp32 partials
    rs_inter = (N - 1) * 6 * 4;
    const int64_t p10 = cdiv(10, L), p13 = cdiv(13, L);
    ar_intra = (L - 1) * (p10 * (4 + 4) + p13 * (8 + 8));
    ar_inter = 2 * (N - 1) * (cdiv(p10, N) * 4 + cdiv(p13, N) * 8);
  } else {
    // Flat: the ring model (checked in detail by FlatLinkModel).
    const int64_t ag = (n - 1) * (10 * 4 + 3 * 2), rs = (n - 1) * 6 * 2;
    const int64_t ar = 2 * (n - 1) * (cdiv(10, n) * 4 + cdiv(13, n) * 8);
    const bool inter = N > 1 && h.local_rank() == L - 1;
    ag_intra = inter ? 0 : ag;
    ag_inter = inter ? ag : 0;
    rs_intra = inter ? 0 : rs;
    rs_inter = inter ? rs : 0;
    ar_intra = inter ? 0 : ar;
    ar_inter = inter ? ar : 0;
  }
  EXPECT_EQ(lk.intra_node.sent[at(CollectiveKind::kAllGather)], ag_intra);
  EXPECT_EQ(lk.inter_node.sent[at(CollectiveKind::kAllGather)], ag_inter);
  EXPECT_EQ(lk.intra_node.sent[at(CollectiveKind::kReduceScatter)], rs_intra);
  EXPECT_EQ(lk.inter_node.sent[at(CollectiveKind::kReduceScatter)], rs_inter);
  EXPECT_EQ(lk.intra_node.sent[at(CollectiveKind::kAllReduce)], ar_intra);
  EXPECT_EQ(lk.inter_node.sent[at(CollectiveKind::kAllReduce)], ar_inter);
  if (h.hierarchical()) {
    // Each way alike, and counters() is their sum.
    EXPECT_EQ(lk.inter_node.received[at(CollectiveKind::kAllReduce)], ar_inter);
    EXPECT_EQ(lk.intra_node.received[at(CollectiveKind::kAllGather)], ag_intra);
    EXPECT_EQ(k.sent[at(CollectiveKind::kAllGather)], ag_intra + ag_inter);
    EXPECT_EQ(k.received[at(CollectiveKind::kReduceScatter)], rs_intra + rs_inter);
    EXPECT_EQ(k.sent[at(CollectiveKind::kAllReduce)], ar_intra + ar_inter);
    EXPECT_EQ(lk.inter_node.calls[at(CollectiveKind::kAllReduce)], 2);
    EXPECT_EQ(lk.intra_node.calls[at(CollectiveKind::kReduceScatter)], 1);
  }
  EXPECT_EQ(k.calls[at(CollectiveKind::kAllGather)], 2);
  EXPECT_EQ(k.calls[at(CollectiveKind::kAllReduce)], 2);
  EXPECT_EQ(k.calls[at(CollectiveKind::kBarrier)], 1);
  // fp32 gathers and reductions move (n-1)c per rank in total, as the flat ring does.
  h.reset_counters();
  h.all_gather(a.data(), b.data(), 100, DType::kF32);
  h.reduce_scatter(a.data(), b.data(), 100, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(h.counters().sent[at(CollectiveKind::kAllGather)], (n - 1) * 400);
  EXPECT_EQ(h.counters().sent[at(CollectiveKind::kReduceScatter)], (n - 1) * 400);
  h.reset_counters();
  EXPECT_EQ(h.counters().total_sent(), 0);
  EXPECT_EQ(h.link_counters().inter_node.total_sent(), 0);
}

// The flat model, without communication: 2 nodes x 2 ranks, every rank's view.
TEST(HierarchicalCommunicator, FlatLinkModel) {
  auto at = [](CollectiveKind kind) { return static_cast<int>(kind); };
  const int64_t ag = 3 * 10 * 4;  // (n-1) c e
  for (int r = 0; r < 4; ++r) {
    RankPlace me{r, 4, r / 2, 2, r % 2, 2};
    LinkCounters lc;
    record_flat_links(lc, CollectiveKind::kAllGather, 10, DType::kF32, me, 0, 0);
    record_flat_links(lc, CollectiveKind::kBroadcast, 5, DType::kF64, me, 1, 0);
    const int kag = at(CollectiveKind::kAllGather), kb = at(CollectiveKind::kBroadcast);
    // Ring 0 -> 1 -> 2 -> 3 -> 0: ranks 1 and 3 send across, ranks 0 and 2 receive across.
    EXPECT_EQ(lc.inter_node.sent[kag], r % 2 == 1 ? ag : 0) << "rank " << r;
    EXPECT_EQ(lc.intra_node.sent[kag], r % 2 == 1 ? 0 : ag) << "rank " << r;
    EXPECT_EQ(lc.inter_node.received[kag], r % 2 == 0 ? ag : 0) << "rank " << r;
    EXPECT_EQ(lc.inter_node.calls[kag], 1);
    EXPECT_EQ(lc.intra_node.calls[kag], 1);
    // Broadcast from rank 1 (node 0): 40 bytes to rank 0 intra, to ranks 2 and 3 inter.
    EXPECT_EQ(lc.intra_node.sent[kb], r == 1 ? 40 : 0);
    EXPECT_EQ(lc.inter_node.sent[kb], r == 1 ? 80 : 0);
    EXPECT_EQ(lc.intra_node.received[kb], r == 0 ? 40 : 0);
    EXPECT_EQ(lc.inter_node.received[kb], r >= 2 ? 40 : 0);
  }
  // All-to-all of 6 bytes per peer: 6 to the other rank of the node, 12 to the other node.
  for (int r = 0; r < 4; ++r) {
    LinkCounters lc;
    record_flat_links(lc, CollectiveKind::kAllToAll, 6, DType::kU8,
                      RankPlace{r, 4, r / 2, 2, r % 2, 2}, 0, 0);
    const int k = at(CollectiveKind::kAllToAll);
    EXPECT_EQ(lc.intra_node.sent[k], 6);
    EXPECT_EQ(lc.intra_node.received[k], 6);
    EXPECT_EQ(lc.inter_node.sent[k], 12);
    EXPECT_EQ(lc.inter_node.received[k], 12);
  }
  // One node: everything intra-node; one rank per node: everything inter-node.
  LinkCounters one, spread;
  record_flat_links(one, CollectiveKind::kAllReduce, 8, DType::kF32, RankPlace{3, 4, 0, 1, 3, 4}, 0,
                    0);
  record_flat_links(spread, CollectiveKind::kAllReduce, 8, DType::kF32, RankPlace{3, 4, 3, 4, 0, 1},
                    0, 0);
  const int kar = at(CollectiveKind::kAllReduce);
  EXPECT_EQ(one.intra_node.sent[kar], 2 * 3 * 2 * 4);
  EXPECT_EQ(one.inter_node.sent[kar], 0);
  EXPECT_EQ(one.inter_node.calls[kar], 0);
  EXPECT_EQ(spread.inter_node.sent[kar], 2 * 3 * 2 * 4);
  EXPECT_EQ(spread.intra_node.received[kar], 0);
  EXPECT_EQ(spread.intra_node.calls[kar], 0);
}

TEST(HierarchicalCommunicator, ArgumentErrorsAreTheContract) {
  Fixture f;
  std::vector<uint8_t> a(64);
  EXPECT_THROW(f.h.all_reduce(a.data(), a.data(), 4, DType::kI8, ReduceOp::kSum), Error);
  EXPECT_THROW(f.h.all_gather(nullptr, a.data(), 4, DType::kF32), Error);
  EXPECT_THROW(f.h.broadcast(a.data(), 1, DType::kF32, f.h.size()), Error);
  // Nothing was started: the next collective still matches on every rank.
  f.h.barrier();
}

}  // namespace
}  // namespace zs
