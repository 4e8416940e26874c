#include "runtime/tied_params.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "core/error.h"

namespace zs {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

TiedParam resolve_one(const std::vector<std::vector<ParamSpec>>& specs, size_t u, size_t i,
                      const std::function<std::string(size_t)>& unit_name) {
  const ParamSpec& b = specs[u][i];
  const int o = b.tied_to.unit;
  const std::string who = fmt::format("unit {} ('{}') parameter '{}'", u, unit_name(u), b.name);
  ZS_CHECK(o >= 0 && static_cast<size_t>(o) < u, ErrorCode::kInvalidArgument,
           "{} is tied to unit {}: a tied parameter's owner must be an earlier unit (0..{})", who,
           o, static_cast<int64_t>(u) - 1);
  const std::vector<ParamSpec>& os = specs[static_cast<size_t>(o)];
  const auto it = std::find_if(os.begin(), os.end(),
                               [&](const ParamSpec& p) { return p.name == b.tied_to.param; });
  ZS_CHECK(it != os.end(), ErrorCode::kInvalidArgument,
           "{} is tied to '{}' of unit {} ('{}'), which has no parameter of that name", who,
           b.tied_to.param, o, unit_name(static_cast<size_t>(o)));
  ZS_CHECK(!it->tied(), ErrorCode::kInvalidArgument,
           "{} is tied to '{}' of unit {}, which is itself tied: tie to its owner", who, it->name,
           o);
  ZS_CHECK(it->shape == b.shape, ErrorCode::kInvalidArgument,
           "{} has shape {} but is tied to '{}' of unit {}, of shape {}", who, shape_str(b.shape),
           it->name, o, shape_str(it->shape));
  ZS_CHECK(!it->accepts_int8 || b.accepts_int8, ErrorCode::kInvalidArgument,
           "{} is tied to '{}' of unit {}, which accepts int8 records: the borrower must too", who,
           it->name, o);
  TiedParam t;
  t.unit = static_cast<int>(u);
  t.spec = static_cast<int>(i);
  t.owner_unit = o;
  t.owner_spec = static_cast<int>(it - os.begin());
  t.numel = b.numel();
  t.trainable = it->trainable;
  return t;
}

}  // namespace

std::vector<TiedParam> resolve_tied_params(const std::vector<std::vector<ParamSpec>>& specs,
                                           const std::function<std::string(size_t)>& unit_name) {
  std::vector<TiedParam> out;
  for (size_t u = 0; u < specs.size(); ++u) {
    for (size_t i = 0; i < specs[u].size(); ++i) {
      if (specs[u][i].tied()) out.push_back(resolve_one(specs, u, i, unit_name));
    }
  }
  return out;
}

std::vector<int> tied_owner_units(const std::vector<TiedParam>& ties) {
  std::vector<int> owners;
  for (const TiedParam& t : ties) owners.push_back(t.owner_unit);
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  return owners;
}

}  // namespace zs
