// What the trainer (zs_train) and zs_plan share of the optimizer-state flags: the list of
// --optimizer-state-fp32, read the same way by both.
#pragma once

#include <string>
#include <vector>

namespace zs::apps {

// "a,b,c" -> {"a", "b", "c"}: OptimizerConfig::state_fp32's patterns. Throws
// zs::Error(kInvalidArgument) "<flag> '<list>': pattern '<p>' must have 1..128 characters" for an
// empty or longer piece. A pattern that matches no parameter is refused later, with the model
// (check_state_fp32_patterns() in runtime/engine_config.h).
std::vector<std::string> split_state_patterns(const std::string& flag, const std::string& list);

}  // namespace zs::apps
