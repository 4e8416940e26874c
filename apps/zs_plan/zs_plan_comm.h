// zs_plan's "communication per step" section: the flags that describe the cluster (--nodes,
// --links; --shard-group-size and --collectives are zs_train's, apps/common/engine_options.h) and
// the table of planner/comm_model.h's plan (docs/scaling.md, "The communication model").
#pragma once

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "planner/memory_plan.h"

namespace zs::plan {

// Adds --nodes and --links to zs_plan's options.
void add_comm_options(boost::program_options::options_description& desc);

// Whether any of those flags, --shard-group-size or --collectives was given (the section is
// printed only then).
bool comm_requested(const boost::program_options::variables_map& vm);

// The section for `model` under `config` (world, ranks per node, stage, dtypes, micro-batches,
// align and frozen storage from its EngineConfig; --nodes overrides the node count): printed as
// a table, or added to `json` as "communication" when json is not null. Throws zs::Error
// (kInvalidArgument) for flags that do not fit (nodes not dividing the ranks, a bad links file).
void print_comm_section(const boost::program_options::variables_map& vm, const ModelDesc& model,
                        const PlanConfig& config, nlohmann::json* json);

}  // namespace zs::plan
