// The communication model: the bytes one engine step sends, per rank and per link class, by the
// algorithms zeroshard actually runs, and their time by an alpha-beta model per link class
// (docs/scaling.md, "The communication model"). A pure function of the model's unit sizes and the
// configuration: no communication, testable to the byte.
//
// [Note: communication model]
// Ranks: n = N nodes x L ranks per node, block placement (world rank r on node r / L). Each
// unit's trainable parameters are laid out by compute_group_layout over the shard group (s ranks;
// s = n without hybrid sharding): padded numel P_u, shard c_u = P_u / s; its frozen bytes by
// compute_frozen_layout (stage 3 gathers their byte shard f_u). k micro-batches, e_P / e_G the
// parameter / gradient dtype's bytes. What one step issues (runtime/engine.cc, param_group.cc):
//   param all-gather     stage 3: 2k per unit (forward, backward), c_u of P   shard group, async
//                        (qwZ: "qwZ all-gather", c_u + 4 c_u / B bytes: int8 codes, fp32 scales)
//                        (hpZ, K ranks: the first of a step over the world, the other 2k - 1
//                        "hpZ all-gather" of P_u / K elements of P over the K-rank group)
//   frozen all-gather    stage 3: 2k per unit with frozen params, f_u bytes   shard group, async
//   grad reduce-scatter  stages 2-3: k per unit; 0-1: 1 per unit, c_u of G    shard group, async
//                        (qgZ, stages 2-3, chunk q_u = c_u + 4 c_u / B bytes, instead:
//                        "qgZ intra-node all-to-all" (L > 1) k per unit, N q_u bytes per peer,
//                        node-local, blocking; "qgZ cross-node all-to-all" (N > 1) k per unit,
//                        q_u bytes per peer, cross-node, async)
//                        (world-invariant mode: k per unit at every stage)
//   replica all-reduce   s < n: 1 per unit, c_u of G (sum)                    replica group, async
//   grad all-gather      stage 0: 1 per unit, c_u of G                        shard group, async
//   param re-gather      stages 1-2: 1 per unit, c_u of P                     shard group, async
//   muon u all-gather    Muon, stages 1-3: 1 per unit with Muon matrices,     shard group,
//                        c_u of fp32 (runtime/muon_update.h)                   blocking
//   muon NS reduce-      Muon, stages 1-3: 1 per unit with Muon matrices,     shard group,
//     scatter            c_u of fp32 (the owners' results, [Note: Muon owners]) blocking
//   step statistics      1 all-reduce of U + 2 fp64 (loss, norm, flags)      world, blocking
//                        (world-invariant mode: U + 2 * ExactSum::kWords fp64)
//   update check         1 all-reduce of one fp64 per trainable parameter    world, blocking
//                        (padded to a multiple of the ranks)
// Bytes sent by one rank for one call, c per-rank elements (all-reduce: c in all) of e bytes,
// g group members, of which `off` sit on other nodes than this rank and on = g - 1 - off:
//   MpiCommunicator (flat; the world without --collectives hierarchical, and every sub-group):
//     all-gather     MPI_Iallgather, Open MPI's libnbc linear algorithm: c*e to every member
//                    -> intra on*c*e, inter off*c*e (the blocking MPI_Allgather is not used by
//                    a step)
//     reduce-scatter MPI_Ialltoall (a rank-order sum after): the same bytes as the all-gather
//     all-to-all     MPI_(I)alltoall, c*e to every member: the same bytes again
//     all-reduce     all-to-all of q = ceil(c/g) then all-gather of q: 2*on*q*e, 2*off*q*e; the
//                    blocking form with g = 2, a fp32/fp64 sum and c*e <= 4 MiB is MPI_Allreduce
//                    itself: c*e to the other member
//   HierarchicalCommunicator, when N > 1 and L > 1 (world collectives in hierarchical mode;
//   [Note: link counters] in collectives/hierarchical_communicator.h), a = 4 (8 for fp64),
//   p = ceil(c/L):
//     all-gather     intra (L-1)*N*c*e      inter (N-1)*c*e
//     reduce-scatter intra (L-1)*N*c*a      inter (N-1)*c*a
//     all-reduce     intra (L-1)*p*(a+e)    inter 2(N-1)*ceil(p/N)*a (blocking, N = 2, p*a <=
//                                           4 MiB: p*a, MPI_Allreduce)
// CommItem::counted_* is what zeroshard's link counters report for the same calls (zs_train's
// comm_bytes_intra/inter): for flat collectives the ring lower bound of record_flat_links, which
// is not what MPI sends (it puts (n-1)*c*e on the last rank of each node, where the linear
// algorithms send (n-L)*c*e from every rank); the table above for hierarchical ones; a sub-group's
// ring bound classed as zs_train's LinkMeter does (-1 where it cannot: groups not aligned with
// nodes).
//
// Time of one call: every rank issues it at once; a node's link carries what all L of its ranks
// send across nodes (tbf shapes each node's link), shared memory what one rank sends. With
// bytes_node = the most any node sends across nodes and bytes_rank = the most any rank sends
// within its node, and `phases` the collective's sequential steps (all-reduce 2, else 1):
//   flat, one link class used          phases*alpha + beta * bytes
//   flat, both classes (linear)        max(phases*alpha_inter + beta_inter*bytes_node,
//                                          phases*alpha_intra + beta_intra*bytes_rank)
//   hierarchical                       the sum of its node-local and cross-node steps
// CommPlan::time_s sums every call of the step: no overlap with compute, an upper bound on the
// communication a step exposes. The engine starts most collectives asynchronously (stage 3's
// prefetched gathers, stage 2-3 reduce-scatters in backward, the replica all-reduces, the stage
// 1-2 re-gathers behind the updates); CommPlan::overlappable_s is their share, which a backend
// with asynchronous progress (NCCL) can hide behind compute, so time_s - overlappable_s is the
// lower bound. On the CPU, Open MPI (no progress thread) advances a non-blocking collective only
// inside MPI calls, but what it has handed to the kernel's socket buffers drains over the link
// while the rank computes, so CPU runs land between the two (docs/scaling.md, measured).
//
// Thread-safety: pure functions; LinkModel values are immutable once loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/communicator.h"
#include "core/dtype.h"
#include "planner/memory_plan.h"
#include "runtime/comm_path.h"
#include "runtime/engine_config.h"

namespace zs {

// time = alpha + beta * bytes for one link class.
struct LinkParams {
  double alpha_s = 0.0;          // seconds per message step
  double beta_s_per_byte = 0.0;  // seconds per byte
};

// alpha-beta of both link classes and where they came from. The JSON form (data/links/*.json):
//   {"intra_node": {"alpha_s": 3.9e-06, "beta_s_per_byte": 3.3e-10, ...},
//    "inter_node": {"alpha_s": 5.4e-05, "beta_s_per_byte": 8.5e-09, ...}, "note": "..."}
// (other keys in a class object are kept as provenance and ignored here).
struct LinkModel {
  LinkParams intra;
  LinkParams inter;
  nlohmann::json source;  // the whole file, for printing its provenance
};

// Throws zs::Error(kInvalidArgument) naming the file and the key when a class or a number is
// missing, negative or not finite; kIo when the file cannot be read or parsed.
LinkModel load_link_model(const std::string& path);
LinkModel link_model_from_json(const nlohmann::json& j, const std::string& what = "links");

// CommScope: runtime/comm_path.h.
std::string_view comm_scope_name(CommScope s);

struct CommConfig {
  int world = 1;
  int nodes = 1;  // must divide world; L = world / nodes, block placement
  ZeroStage stage = ZeroStage::k3;
  int shard_group_size = 0;  // 0 = world; else divides world ([Note: hybrid sharding])
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  std::optional<DType> frozen_storage;  // unset: the parameter dtype
  int micro_batches = 1;
  bool hierarchical = false;  // the world's collectives through a HierarchicalCommunicator
  int64_t align = 32;         // EngineConfig::align
  // ZeRO++ (runtime/engine_config.h): qwZ's int8 parameter gathers (stage 3), hpZ's secondary
  // group, qgZ's int8 gradient all-to-alls (stages 2-3); the engine's paths plan their calls.
  ZeroPPConfig zeropp;
  // [Note: world-invariant reduction]: every stage reduce-scatters each micro-batch.
  bool world_invariant = false;
  // [Note: Muon parameters]: Muon's u all-gather and its owners' reduce-scatter, for the units
  // with Muon matrices (by the model's unit names and shapes).
  bool muon = false;

  int ranks_per_node() const { return world / nodes; }
  int shard_size() const { return shard_group_size > 0 ? shard_group_size : world; }
  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
};

// One kind of communication of the step, summed over its calls.
struct CommItem {
  std::string what;  // "param all-gather", ... ([Note: communication model])
  CollectiveKind kind = CollectiveKind::kAllGather;
  CommScope scope = CommScope::kWorld;
  bool hierarchical = false;  // runs the two-level algorithms
  bool overlappable = false;  // started asynchronously and not waited for at once
  int64_t calls = 0;          // per rank per step
  // Bytes sent per step by the algorithms used: per rank (the most any rank sends; every rank
  // sends the same in the layouts where groups align with nodes) and all ranks together.
  int64_t intra_rank = 0, inter_rank = 0;
  int64_t intra_all = 0, inter_all = 0;
  // What zeroshard's link counters report, all ranks together (-1: unknown, see the Note).
  int64_t counted_intra_all = 0, counted_inter_all = 0;
  double time_s = 0.0;  // alpha-beta, the sum over calls
};

struct CommPlan {
  std::vector<CommItem> items;  // in step order; kinds with no call are left out
  int64_t intra_rank = 0, inter_rank = 0, intra_all = 0, inter_all = 0;
  int64_t counted_intra_all = 0, counted_inter_all = 0;  // -1 when any item's is unknown
  double time_s = 0.0;                                   // every call serialized with compute
  double overlappable_s = 0.0;  // of which the engine issues ahead of or behind compute
};

// The step's communication ([Note: communication model]). `links` may be null: times are 0.
// Throws zs::Error(kInvalidArgument) for an invalid config or model (no units, a unit without
// parameters, a shard group size that does not divide the world).
CommPlan plan_communication(const ModelDesc& model, const CommConfig& config,
                            const LinkModel* links);

}  // namespace zs
