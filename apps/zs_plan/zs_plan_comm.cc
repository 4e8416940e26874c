#include "zs_plan_comm.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "planner/comm_model.h"

namespace po = boost::program_options;

namespace zs::plan {
namespace {

std::string grouped(int64_t v) {
  if (v < 0) return "?";
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

nlohmann::json item_json(const CommItem& it) {
  return {{"what", it.what},
          {"collective", std::string(collective_kind_name(it.kind))},
          {"scope", std::string(comm_scope_name(it.scope))},
          {"hierarchical", it.hierarchical},
          {"overlappable", it.overlappable},
          {"calls", it.calls},
          {"intra_bytes_per_rank", it.intra_rank},
          {"inter_bytes_per_rank", it.inter_rank},
          {"intra_bytes_all_ranks", it.intra_all},
          {"inter_bytes_all_ranks", it.inter_all},
          {"counted_intra_bytes_all_ranks", it.counted_intra_all},
          {"counted_inter_bytes_all_ranks", it.counted_inter_all},
          {"time_s", it.time_s}};
}

}  // namespace

void add_comm_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      ("nodes", po::value<int>(), "nodes the ranks are spread over, in blocks (default: --ranks / "
       "--ranks-per-node); prints the communication per step")
      ("links", po::value<std::string>(), "alpha-beta per link class (bench_collectives "
       "--fit-out, e.g. data/links/sim_1gbit.json): predicts communication time");
  // clang-format on
}

bool comm_requested(const po::variables_map& vm) {
  return vm.count("nodes") || vm.count("links") || !vm["shard-group-size"].defaulted() ||
         !vm["collectives"].defaulted();
}

namespace {

// The cluster and the engine's settings for plan_communication, checked.
CommConfig comm_config(const po::variables_map& vm, const PlanConfig& config) {
  const EngineConfig& e = config.engine;
  CommConfig c;
  c.world = config.world;
  c.nodes =
      vm.count("nodes") ? vm["nodes"].as<int>() : config.world / std::max(config.ranks_per_node, 1);
  ZS_CHECK(c.nodes >= 1 && config.world % c.nodes == 0, ErrorCode::kInvalidArgument,
           "--nodes {} does not divide --ranks {}", c.nodes, config.world);
  c.stage = e.stage;
  c.shard_group_size = vm["shard-group-size"].as<int>();
  c.param_dtype = e.precision.param_dtype;
  c.grad_dtype = e.precision.grad_dtype;
  c.frozen_storage = e.frozen.storage_or(e.precision.param_dtype);
  c.micro_batches = e.micro_batches;
  c.align = zs::layout_align(e);
  c.zeropp = e.zeropp;
  c.world_invariant = e.world_invariant;
  c.muon = e.optimizer.kind == OptimizerKind::kMuon;
  // Checked with the engine flags (apps/common/engine_options.h).
  c.hierarchical = vm["collectives"].as<std::string>() == "hierarchical";
  return c;
}

const char* collectives_name(const CommConfig& c) {
  return c.hierarchical ? "hierarchical" : "flat";
}

// The section as JSON ("communication"); `links_path` only with a links file.
nlohmann::json comm_json(const CommConfig& c, const CommPlan& p, const std::string* links_path) {
  nlohmann::json j = {{"nodes", c.nodes},
                      {"ranks_per_node", c.ranks_per_node()},
                      {"shard_group_size", c.shard_size()},
                      {"collectives", collectives_name(c)},
                      {"intra_bytes_per_rank", p.intra_rank},
                      {"inter_bytes_per_rank", p.inter_rank},
                      {"intra_bytes_all_ranks", p.intra_all},
                      {"inter_bytes_all_ranks", p.inter_all},
                      {"counted_intra_bytes_all_ranks", p.counted_intra_all},
                      {"counted_inter_bytes_all_ranks", p.counted_inter_all}};
  if (links_path != nullptr) {
    j["time_s"] = p.time_s;
    j["overlappable_s"] = p.overlappable_s;
    j["links"] = *links_path;
  }
  j["items"] = nlohmann::json::array();
  for (const CommItem& it : p.items) j["items"].push_back(item_json(it));
  return j;
}

// The section as a table; `links` (from `links_path`) only with a links file.
void print_comm_table(const CommConfig& c, const CommPlan& p, const LinkModel* links,
                      const std::string& links_path) {
  std::printf(
      "\ncommunication per step: %d ranks = %d node(s) x %d, block placement; %s collectives; "
      "shard group %d rank(s)%s (docs/scaling.md)\n",
      c.world, c.nodes, c.ranks_per_node(), collectives_name(c), c.shard_size(),
      c.shard_size() < c.world ? fmt::format(", {} replicas", c.world / c.shard_size()).c_str()
                               : "");
  std::printf("  %-25s %-22s %-13s %6s %15s %15s %10s\n", "what", "collective", "scope", "calls",
              "intra B/rank", "inter B/rank", links ? "time ms" : "");
  for (const CommItem& it : p.items) {
    std::printf(
        "  %-25s %-22s %-13s %6lld %15s %15s %10s\n", it.what.c_str(),
        fmt::format("{}{}", collective_kind_name(it.kind), it.hierarchical ? " (2-lvl)" : "")
            .c_str(),
        std::string(comm_scope_name(it.scope)).c_str(), static_cast<long long>(it.calls),
        grouped(it.intra_rank).c_str(), grouped(it.inter_rank).c_str(),
        links ? fmt::format("{:.3f}", it.time_s * 1e3).c_str() : "");
  }
  std::printf("  %-25s %-22s %-13s %6s %15s %15s %10s\n", "total", "", "", "",
              grouped(p.intra_rank).c_str(), grouped(p.inter_rank).c_str(),
              links ? fmt::format("{:.3f}", p.time_s * 1e3).c_str() : "");
  std::printf(
      "  across nodes, all ranks: %s B sent (zeroshard's link counters report %s B; they count "
      "a flat collective by its ring bound)\n",
      grouped(p.inter_all).c_str(), grouped(p.counted_inter_all).c_str());
  if (links) {
    std::printf(
        "  time: alpha-beta per call from %s (intra %.2f us + %.4f ns/B per rank, inter %.2f us + "
        "%.4f ns/B per node link), every call serialized with compute (an upper bound); %.3f ms "
        "of it the engine issues asynchronously, hidden where the backend moves it during compute "
        "(planner/comm_model.h)\n",
        links_path.c_str(), links->intra.alpha_s * 1e6, links->intra.beta_s_per_byte * 1e9,
        links->inter.alpha_s * 1e6, links->inter.beta_s_per_byte * 1e9, p.overlappable_s * 1e3);
  }
}

}  // namespace

void print_comm_section(const po::variables_map& vm, const ModelDesc& model,
                        const PlanConfig& config, nlohmann::json* json) {
  const CommConfig c = comm_config(vm, config);
  const std::string links_path = vm.count("links") ? vm["links"].as<std::string>() : "";
  std::optional<LinkModel> links;
  if (vm.count("links")) links = load_link_model(links_path);
  const CommPlan p = plan_communication(model, c, links ? &*links : nullptr);
  if (json != nullptr) {
    (*json)["communication"] = comm_json(c, p, links ? &links_path : nullptr);
  } else {
    print_comm_table(c, p, links ? &*links : nullptr, links_path);
  }
}

}  // namespace zs::plan
