#include "planner/comm_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "collectives/hierarchical_communicator.h"
#include "core/error.h"
#include "core/exact_sum.h"
#include "runtime/gather_path.h"
#include "runtime/reduce_path.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"

namespace zs {
namespace {

// MpiCommunicator::kPairDirectBytes ([Note: two-rank sums] in collectives/mpi_collectives.cc).
constexpr int64_t kPairDirectBytes = int64_t{4} << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t esize(DType d) { return static_cast<int64_t>(dtype_size(d)); }
DType acc_type(DType d) { return d == DType::kF64 ? DType::kF64 : DType::kF32; }

LinkParams link_params(const nlohmann::json& j, const char* key, const std::string& what) {
  ZS_CHECK(j.is_object() && j.contains(key) && j[key].is_object(), ErrorCode::kInvalidArgument,
           "{}: no \"{}\" object with alpha_s and beta_s_per_byte", what, key);
  LinkParams p;
  double* fields[2] = {&p.alpha_s, &p.beta_s_per_byte};
  const char* names[2] = {"alpha_s", "beta_s_per_byte"};
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& v = j[key].contains(names[i]) ? j[key][names[i]] : nlohmann::json();
    ZS_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0.0,
             ErrorCode::kInvalidArgument, "{}: {}.{} is missing or not a finite number >= 0 ({})",
             what, key, names[i], v.dump());
    *fields[i] = v.get<double>();
  }
  return p;
}

// One call of a collective, as every rank issues it.
struct Call {
  CollectiveKind kind;
  CommScope scope;
  int64_t count;  // per rank (all-gather, reduce-scatter) or in all (all-reduce)
  DType dtype;
  bool blocking;
};

struct CallResult {
  int64_t intra_rank = 0, inter_rank = 0, intra_all = 0, inter_all = 0;
  int64_t counted_intra_all = 0, counted_inter_all = 0;  // -1: unknown
  double time_s = 0.0;
};

class Algorithms {
 public:
  Algorithms(const CommConfig& c, const LinkModel* links)
      : c_(c),
        links_(links),
        n_(c.world),
        N_(c.nodes),
        L_(c.ranks_per_node()),
        s_(c.shard_size()) {}

  bool hierarchical(CommScope scope) const {
    return scope == CommScope::kWorld && c_.hierarchical && N_ > 1 && L_ > 1;
  }
  CallResult run(const Call& call) const {
    return hierarchical(call.scope) ? run_hier(call) : run_flat(call);
  }

 private:
  int node(int r) const { return r / L_; }

  // Rank r's group, by world rank ([Note: hybrid sharding] in runtime/engine_config.h).
  std::vector<int> group(CommScope scope, int r) const {
    std::vector<int> g;
    if (scope == CommScope::kWorld) {
      for (int i = 0; i < n_; ++i) g.push_back(i);
    } else if (scope == CommScope::kShardGroup) {
      for (int i = 0; i < s_; ++i) g.push_back(s_ * (r / s_) + i);
    } else if (scope == CommScope::kHpzGroup) {
      const int K = c_.zeropp.hpz_partition_size;
      for (int i = 0; i < K; ++i) g.push_back(K * (r / K) + i);
    } else if (scope == CommScope::kNodeLocal) {
      for (int i = 0; i < L_; ++i) g.push_back(L_ * node(r) + i);
    } else if (scope == CommScope::kCrossNode) {
      for (int k = 0; k < N_; ++k) g.push_back(r % L_ + k * L_);
    } else {
      for (int j = 0; j < n_ / s_; ++j) g.push_back(r % s_ + j * s_);
    }
    return g;
  }

  // The group's members per node and nodes spanned, when every node holds the same number of
  // contiguous members (as zs_train's LinkMeter classes them); {0, 0} otherwise.
  std::pair<int, int> group_shape(CommScope scope) const {
    const int g = scope == CommScope::kWorld ? n_ : scope == CommScope::kShardGroup ? s_ : n_ / s_;
    if (scope == CommScope::kWorld) return {L_, N_};
    if (scope == CommScope::kHpzGroup) {  // within a node: K divides L ([Note: hpZ])
      const int K = c_.zeropp.hpz_partition_size;
      return L_ % K == 0 ? std::pair<int, int>{K, 1} : std::pair<int, int>{0, 0};
    }
    if (scope == CommScope::kNodeLocal) return {L_, 1};
    if (scope == CommScope::kCrossNode) return {1, N_};
    if (scope == CommScope::kShardGroup) {
      if (L_ % s_ == 0) return {s_, 1};
      if (s_ % L_ == 0) return {L_, s_ / L_};
      return {0, 0};
    }
    if (s_ % L_ == 0) return {1, g};
    if (L_ % s_ == 0) return {L_ / s_, g / (L_ / s_)};
    return {0, 0};
  }

  double class_time(const LinkParams& p, int phases, int64_t bytes) const {
    return bytes > 0 || phases > 0 ? phases * p.alpha_s + p.beta_s_per_byte * bytes : 0.0;
  }

  CallResult run_flat(const Call& call) const {
    CallResult res;
    const int64_t e = esize(call.dtype);
    std::vector<int64_t> node_inter(static_cast<size_t>(N_), 0);
    int phases = 1;
    const auto [per_node, spanned] = group_shape(call.scope);
    for (int r = 0; r < n_; ++r) {
      const std::vector<int> g = group(call.scope, r);
      const int64_t size = static_cast<int64_t>(g.size());
      if (size == 1) continue;
      int64_t off = 0;
      for (int m : g) off += m != r && node(m) != node(r);
      const int64_t on = size - 1 - off;
      int64_t unit = call.count * e;  // what goes to each other member
      int64_t ring = (size - 1) * unit;
      if (call.kind == CollectiveKind::kAllReduce) {
        ring = 2 * (size - 1) * ceil_div(call.count, size) * e;
        const bool pair = call.blocking && size == 2 &&
                          (call.dtype == DType::kF32 || call.dtype == DType::kF64) &&
                          call.count * e <= kPairDirectBytes;
        if (!pair) {
          unit = 2 * ceil_div(call.count, size) * e;  // all-to-all, then all-gather
          phases = 2;
        }
      }
      const int64_t intra = on * unit, inter = off * unit;
      res.intra_rank = std::max(res.intra_rank, intra);
      res.inter_rank = std::max(res.inter_rank, inter);
      res.intra_all += intra;
      res.inter_all += inter;
      node_inter[static_cast<size_t>(node(r))] += inter;
      if (per_node == 0) {
        res.counted_intra_all = res.counted_inter_all = -1;
      } else if (res.counted_intra_all >= 0) {
        // record_flat_links: the ring in node-major order leaves each node from its last member.
        const int pos = static_cast<int>(std::find(g.begin(), g.end(), r) - g.begin());
        const bool crosses = spanned > 1 && pos % per_node == per_node - 1;
        (crosses ? res.counted_inter_all : res.counted_intra_all) += ring;
      }
    }
    if (links_ != nullptr) {
      const int64_t node_max = *std::max_element(node_inter.begin(), node_inter.end());
      const double t_inter = node_max > 0 ? class_time(links_->inter, phases, node_max) : 0.0;
      const double t_intra =
          res.intra_rank > 0 ? class_time(links_->intra, phases, res.intra_rank) : 0.0;
      res.time_s = std::max(t_inter, t_intra);
    }
    return res;
  }

  CallResult run_hier(const Call& call) const {
    CallResult res;
    const int64_t N = N_, L = L_, c = call.count, e = esize(call.dtype);
    const int64_t a = esize(acc_type(call.dtype));
    int inter_phases = 1, intra_phases = 1;
    int64_t counted_inter = 0;
    switch (call.kind) {
      case CollectiveKind::kAllGather:
        res.intra_rank = (L - 1) * N * c * e;
        res.inter_rank = (N - 1) * c * e;
        counted_inter = res.inter_rank;
        break;
      case CollectiveKind::kReduceScatter:
        res.intra_rank = (L - 1) * N * c * a;
        res.inter_rank = (N - 1) * c * a;
        counted_inter = res.inter_rank;
        break;
      default: {  // all-reduce: node-local reduce-scatter, cross-node all-reduce, local all-gather
        const int64_t p = ceil_div(c, L);
        res.intra_rank = (L - 1) * p * (a + e);
        intra_phases = 2;
        counted_inter = 2 * (N - 1) * ceil_div(p, N) * a;
        const bool pair = call.blocking && N == 2 && p * a <= kPairDirectBytes;
        res.inter_rank = pair ? p * a : counted_inter;
        inter_phases = pair ? 1 : 2;
        break;
      }
    }
    res.intra_all = res.intra_rank * N * L;
    res.inter_all = res.inter_rank * N * L;
    res.counted_intra_all = res.intra_all;
    res.counted_inter_all = counted_inter * N * L;
    if (links_ != nullptr) {  // the steps run one after the other
      res.time_s = class_time(links_->inter, inter_phases, L * res.inter_rank) +
                   class_time(links_->intra, intra_phases, res.intra_rank);
    }
    return res;
  }

  const CommConfig& c_;
  const LinkModel* links_;
  int n_, N_, L_, s_;
};

void add(CommItem& item, const CallResult& r) {
  item.calls += 1;
  item.intra_rank += r.intra_rank;
  item.inter_rank += r.inter_rank;
  item.intra_all += r.intra_all;
  item.inter_all += r.inter_all;
  if (item.counted_intra_all >= 0 && r.counted_intra_all >= 0) {
    item.counted_intra_all += r.counted_intra_all;
    item.counted_inter_all += r.counted_inter_all;
  } else {
    item.counted_intra_all = item.counted_inter_all = -1;
  }
  item.time_s += r.time_s;
}

}  // namespace

std::string_view comm_scope_name(CommScope s) {
  switch (s) {
    case CommScope::kWorld:
      return "world";
    case CommScope::kShardGroup:
      return "shard group";
    case CommScope::kHpzGroup:
      return "hpZ group";
    case CommScope::kNodeLocal:
      return "node-local";
    case CommScope::kCrossNode:
      return "cross-node";
    default:
      return "replica group";
  }
}

LinkModel link_model_from_json(const nlohmann::json& j, const std::string& what) {
  LinkModel m;
  m.intra = link_params(j, "intra_node", what);
  m.inter = link_params(j, "inter_node", what);
  m.source = j;
  return m;
}

LinkModel load_link_model(const std::string& path) {
  std::ifstream in(path);
  ZS_CHECK(in.good(), ErrorCode::kNotFound, "links file '{}' cannot be opened", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& ex) {
    fail(ErrorCode::kCorruptData, "links file '{}' is not JSON: {}", path, ex.what());
  }
  return link_model_from_json(j, fmt::format("links file '{}'", path));
}

void CommConfig::validate() const {
  ZS_CHECK(world >= 1 && nodes >= 1 && world % nodes == 0, ErrorCode::kInvalidArgument,
           "{} node(s) do not divide {} rank(s): the model needs the same ranks on every node",
           nodes, world);
  ZS_CHECK(shard_group_size >= 0 && shard_group_size <= world &&
               world % std::max(shard_group_size, 1) == 0,
           ErrorCode::kInvalidArgument,
           "shard group size {} does not divide the {} ranks (0 = all ranks)", shard_group_size,
           world);
  ZS_CHECK(micro_batches >= 1, ErrorCode::kInvalidArgument, "micro_batches {} < 1", micro_batches);
  ZS_CHECK(align >= 1, ErrorCode::kInvalidArgument, "align {} < 1", align);
  const int64_t qwz = zeropp.quantized_weights ? zeropp.quantized_weights_block : 0;
  ZS_CHECK(
      qwz == 0 || (stage == ZeroStage::k3 && qwz > 0 && align % qwz == 0),
      ErrorCode::kInvalidArgument,
      "zero_quantized_weights_block {} needs stage 3 (not {}) and must divide the alignment {}",
      qwz, static_cast<int>(stage), align);
  const int K = zeropp.hpz_partition_size;
  ZS_CHECK(K == 1 || (K > 1 && stage == ZeroStage::k3 && world % K == 0 && shard_size() == world),
           ErrorCode::kInvalidArgument,
           "hpz_partition_size {} needs stage 3 (not {}), no hybrid sharding and must divide the "
           "{} ranks",
           K, static_cast<int>(stage), world);
  const int64_t qgz = zeropp.quantized_gradients ? zeropp.quantized_gradients_block : 0;
  ZS_CHECK(
      qgz == 0 || (stage >= ZeroStage::k2 && qgz > 0 && align % qgz == 0 && shard_size() == world),
      ErrorCode::kInvalidArgument,
      "zero_quantized_gradients_block {} needs stage 2 or 3 (not {}), no hybrid sharding "
      "(shard group {} of {}) and must divide the alignment {}",
      qgz, static_cast<int>(stage), shard_size(), world, align);
  ZS_CHECK(dtype_is_float(param_dtype) && dtype_is_float(grad_dtype), ErrorCode::kInvalidArgument,
           "parameter and gradient dtypes must be float types, not {} and {}",
           dtype_name(param_dtype), dtype_name(grad_dtype));
}

namespace {

// Per unit: the shard's element count of the trainable parameters and the frozen bytes' shard
// (0: none), checked, and the layout of the trainable parameters (none: no layout).
struct UnitShards {
  std::vector<int64_t> shard, frozen_shard;
  std::vector<std::optional<GroupLayout>> layout;
};

UnitShards unit_shards(const ModelDesc& model, const CommConfig& config) {
  const size_t U = model.units.size();
  ZS_CHECK(U > 0, ErrorCode::kInvalidArgument, "the model has no units");
  ZS_CHECK(model.frozen.empty() || model.frozen.size() == U, ErrorCode::kInvalidArgument,
           "the model lists frozen parameters for {} units, not its {}", model.frozen.size(), U);
  const int s = config.shard_size();
  const DType storage = config.frozen_storage.value_or(config.param_dtype);
  UnitShards out{std::vector<int64_t>(U, 0), std::vector<int64_t>(U, 0),
                 std::vector<std::optional<GroupLayout>>(U)};
  for (size_t u = 0; u < U; ++u) {
    const bool has_frozen = !model.frozen.empty() && !model.frozen[u].empty();
    ZS_CHECK(!model.units[u].empty() || has_frozen, ErrorCode::kInvalidArgument,
             "unit {} has no parameters", u);
    if (!model.units[u].empty()) {
      out.layout[u] = compute_group_layout(model.units[u], s, config.align);
      out.shard[u] = out.layout[u]->shard_numel;
    }
    if (has_frozen) {
      out.frozen_shard[u] =
          compute_frozen_layout(model.frozen[u], storage, config.param_dtype, s).bytes.shard_numel;
    }
  }
  return out;
}

// The update's check ([Note: non-finite policy] in runtime/engine_config.h): one flag per
// trainable parameter, padded to a multiple of the ranks (P in all), summed.
CommItem update_check(const Algorithms& m, int64_t P) {
  CommItem it;
  it.what = "update check";
  it.kind = CollectiveKind::kAllReduce;
  it.scope = CommScope::kWorld;
  it.hierarchical = m.hierarchical(CommScope::kWorld);
  add(it,
      m.run({CollectiveKind::kAllReduce, CommScope::kWorld, P, DType::kF64, /*blocking=*/true}));
  return it;
}

// The step's statistics: loss, sum of squares, one non-finite flag per unit (U units).
CommItem step_statistics(const Algorithms& m, size_t U, bool world_invariant) {
  // [Note: world-invariant reduction]: the loss and the sum of squares as ExactSum words.
  const int64_t sums = world_invariant ? 2 * ExactSum::kWords : 2;
  CommItem it;
  it.what = "step statistics";
  it.kind = CollectiveKind::kAllReduce;
  it.scope = CommScope::kWorld;
  it.hierarchical = m.hierarchical(CommScope::kWorld);
  add(it, m.run({CollectiveKind::kAllReduce, CommScope::kWorld, static_cast<int64_t>(U) + sums,
                 DType::kF64, /*blocking=*/true}));
  return it;
}

// The step's blocking world all-reduces: its statistics, and the update check when there is
// something to update.
void add_world_items(CommPlan& plan, const Algorithms& m, const ModelDesc& model,
                     const CommConfig& config) {
  if (config.world <= 1) return;
  plan.items.push_back(step_statistics(m, model.units.size(), config.world_invariant));
  int64_t params = 0;
  for (const std::vector<int64_t>& unit : model.units) params += static_cast<int64_t>(unit.size());
  const int64_t W = config.world;  // padded to whole pieces per rank (runtime/engine.cc)
  if (params > 0) plan.items.push_back(update_check(m, (params + W - 1) / W * W));
}

// The plan's totals: the sums over its items.
void add_totals(CommPlan& plan) {
  for (const CommItem& it : plan.items) {
    plan.intra_rank += it.intra_rank;
    plan.inter_rank += it.inter_rank;
    plan.intra_all += it.intra_all;
    plan.inter_all += it.inter_all;
    if (plan.counted_intra_all >= 0 && it.counted_intra_all >= 0) {
      plan.counted_intra_all += it.counted_intra_all;
      plan.counted_inter_all += it.counted_inter_all;
    } else {
      plan.counted_intra_all = plan.counted_inter_all = -1;
    }
    plan.time_s += it.time_s;
    if (it.overlappable) plan.overlappable_s += it.time_s;
  }
}

// [Note: communication paths] in runtime/comm_path.h: the configuration the engine's paths are
// chosen from, as the planner describes it.
PathConfig comm_path_config(const CommConfig& config) {
  PathConfig p;
  p.stage = static_cast<int>(config.stage);
  p.param_dtype = config.param_dtype;
  p.grad_dtype = config.grad_dtype;
  p.micro_batches = config.micro_batches;
  p.world_invariant = config.world_invariant;
  p.zeropp = config.zeropp;
  p.node_size = config.ranks_per_node();
  p.hybrid = config.shard_size() < config.world;
  return p;
}

// The paths' calls of one phase (gathers or reductions) over the units, merged into one item per
// name in the order the names first appear. `calls(u, out)` appends unit u's.
template <typename Calls>
void add_path_items(CommPlan& plan, const Algorithms& m, size_t U, bool hsdp, const Calls& calls) {
  std::vector<CommItem> items;
  std::vector<PathCall> unit_calls;
  for (size_t u = 0; u < U; ++u) {
    unit_calls.clear();
    calls(u, unit_calls);
    for (const PathCall& c : unit_calls) {
      if (c.calls == 0 || c.count == 0) continue;
      const CommScope scope =
          hsdp && c.scope == CommScope::kWorld ? CommScope::kShardGroup : c.scope;
      auto it = std::find_if(items.begin(), items.end(),
                             [&](const CommItem& i) { return i.what == c.what; });
      if (it == items.end()) {
        CommItem n;
        n.what = c.what;
        n.kind = c.kind;
        n.scope = scope;
        n.hierarchical = m.hierarchical(scope);
        n.overlappable = c.overlappable;
        items.push_back(std::move(n));
        it = items.end() - 1;
      }
      const CallResult r = m.run({c.kind, scope, c.count, c.dtype, /*blocking=*/false});
      for (int64_t i = 0; i < c.calls; ++i) add(*it, r);
    }
  }
  for (CommItem& it : items) plan.items.push_back(std::move(it));
}

}  // namespace

CommPlan plan_communication(const ModelDesc& model, const CommConfig& config,
                            const LinkModel* links) {
  config.validate();
  const size_t U = model.units.size();
  const UnitShards shards = unit_shards(model, config);
  const std::vector<int64_t>& shard = shards.shard;
  const int k = config.micro_batches;
  const int stage = static_cast<int>(config.stage);
  const DType P = config.param_dtype, G = config.grad_dtype;
  const Algorithms m(config, links);
  const bool hsdp = config.shard_size() < config.world;
  CommPlan plan;
  // [Note: tied parameters]: an owner unit stays gathered from its forward to its backward, so
  // stage 3 gathers it once per micro-batch, not twice.
  std::vector<char> held(U, 0);
  for (int o : tied_owner_units(model.ties)) held[static_cast<size_t>(o)] = 1;
  // `per_unit_calls` calls of `kind` per unit u (half as many for a held unit when
  // `once_if_held`), each of counts[u] elements of dt.
  auto item = [&](const char* what, CollectiveKind kind, CommScope scope, bool overlappable,
                  int64_t per_unit_calls, const std::vector<int64_t>& counts, DType dt,
                  bool once_if_held = false) {
    CommItem it;
    it.what = what;
    it.kind = kind;
    it.scope = scope;
    it.hierarchical = m.hierarchical(scope);
    it.overlappable = overlappable;
    for (size_t u = 0; u < U; ++u) {
      if (counts[u] == 0) continue;
      const CallResult r = m.run({kind, scope, counts[u], dt, /*blocking=*/false});
      const int64_t calls = once_if_held && held[u] ? per_unit_calls / 2 : per_unit_calls;
      for (int64_t i = 0; i < calls; ++i) add(it, r);
    }
    if (it.calls > 0) plan.items.push_back(std::move(it));
  };
  const CommScope sg = hsdp ? CommScope::kShardGroup : CommScope::kWorld;
  // [Note: communication paths]: the gathers and reductions are the engine's paths'.
  const PathConfig paths = comm_path_config(config);
  const FrozenLayout no_frozen;
  if (stage == 3) {
    add_path_items(plan, m, U, hsdp, [&](size_t u, std::vector<PathCall>& out) {
      if (!shards.layout[u]) return;
      make_gather_path(paths, *shards.layout[u], no_frozen, 0)
          ->step_calls(held[u] ? k : 2 * k, out);
    });
    item("frozen all-gather", CollectiveKind::kAllGather, sg, true, 2 * k, shards.frozen_shard,
         DType::kU8, true);
  }
  add_path_items(plan, m, U, hsdp, [&](size_t u, std::vector<PathCall>& out) {
    if (shards.layout[u]) make_reduce_path(paths, *shards.layout[u], 0)->step_calls(out);
  });
  if (hsdp) {
    item("replica all-reduce", CollectiveKind::kAllReduce, CommScope::kReplicaGroup, stage >= 2, 1,
         shard, G);
  }
  if (stage == 0) item("grad all-gather", CollectiveKind::kAllGather, sg, false, 1, shard, G);
  if (stage == 1 || stage == 2) {
    item("param re-gather", CollectiveKind::kAllGather, sg, true, 1, shard, P);
  }
  if (config.muon && stage >= 1 && !model.shapes.empty()) {
    OptimizerConfig muon;
    muon.kind = OptimizerKind::kMuon;
    const MuonMatrices mm = muon_matrices(muon, model.unit_names, model.shapes);
    std::vector<int64_t> counts(U, 0);
    for (size_t u = 0; u < U; ++u)
      for (const MuonMatrix& x : mm[u])
        if (x.muon()) counts[u] = shard[u];
    item("muon u all-gather", CollectiveKind::kAllGather, sg, false, 1, counts, DType::kF32);
    // [Note: Muon owners]: the owners' results, one reduce-scatter of the same size.
    item("muon NS reduce-scatter", CollectiveKind::kReduceScatter, sg, false, 1, counts,
         DType::kF32);
  }
  add_world_items(plan, m, model, config);
  add_totals(plan);
  return plan;
}

}  // namespace zs
