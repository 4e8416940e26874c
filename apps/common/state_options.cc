#include "apps/common/state_options.h"

#include <algorithm>

#include "core/error.h"

namespace zs::apps {

std::vector<std::string> split_state_patterns(const std::string& flag, const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string p = list.substr(begin, end - begin);
    ZS_CHECK(!p.empty() && p.size() <= 128, ErrorCode::kInvalidArgument,
             "{} '{}': pattern '{}' must have 1..128 characters", flag, list, p);
    out.push_back(p);
    if (end == list.size()) return out;
    begin = end + 1;
  }
}

}  // namespace zs::apps
