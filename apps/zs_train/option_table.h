// zs_train's flags declared once, in a table (options.h parses with it): each flag's name, help,
// default and target, and the check of its final value beside it. The groups are --help's
// sections in order; the log header lists every option in that order too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "options.h"

namespace zs::train {

// The flags whose values TrainOptions does not hold as given: parse_options() turns them into
// TrainOptions' fields. (The flags zs_plan shares, apps/common/engine_options.h, are read from the
// variables_map into apps::RunFlags.)
struct RawFlags {
  std::string config_file, schedule;
  float lr = 2e-3f, min_lr_ratio = 0.1f;
  int64_t warmup = 50;
};

// True when flag `name` was given (on the command line, in --config or --deepspeed-config), not
// only defaulted.
bool given(const boost::program_options::variables_map& vm, const std::string& name);

// "--clip", or "--clip (gradient_clipping in ds.json)" for a value that came from the
// DeepSpeed file: where a bad value came from.
struct FlagName {
  const std::map<std::string, std::string>& from_ds;  // flag -> key path
  const std::string& file;
  std::string operator()(const std::string& name) const;
};

// What a flag's check sees: the flags as parsed and the final values.
struct ParsedFlags {
  const boost::program_options::variables_map& vm;
  const FlagName& flag;
  const TrainOptions& o;
  const RawFlags& raw;
};

// One flag. `value` (default and target) is handed to Boost, which owns it; nullptr: a switch
// that takes no value. `check` (may be empty) throws zs::Error(kInvalidArgument) naming the flag
// and what is allowed when the final value is out of range.
struct Flag {
  const char* name;
  boost::program_options::value_semantic* value;
  const char* help;
  std::function<void(const ParsedFlags&)> check;
};

// A --help section: flags declared elsewhere first (`declare`: the architecture, checkpoint and
// Hugging Face flags, and those zs_plan shares: apps/common/engine_options.h), then the table's.
struct FlagGroup {
  std::string caption;
  std::function<void(boost::program_options::options_description&)> declare;
  std::vector<Flag> flags;
};

// Every flag zs_train takes, binding targets in `o` and `raw` (which must outlive parsing).
// `o.watchdog_timeout_s` is --watchdog-timeout's default.
std::vector<FlagGroup> zs_train_flags(TrainOptions& o, RawFlags& raw);

// The architecture flags' values (apps/common/model_options.h) over zs_train's defaults.
nn::GptArchitecture zs_train_architecture(const boost::program_options::variables_map& vm);

// Declares the groups' flags on `all`, one section per group.
void declare_flags(boost::program_options::options_description& all,
                   const std::vector<FlagGroup>& groups);

// Runs every flag's check, in --help's order.
void check_flags(const std::vector<FlagGroup>& groups, const ParsedFlags& parsed);

}  // namespace zs::train
