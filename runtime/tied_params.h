// Tied parameters ([Note: tied parameters] in unit/unit.h), resolved once from the units' specs:
// which borrower parameter is which owner parameter. The engine, its buffer plan and the memory
// planner resolve them with the same function, so they agree on every byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "unit/unit.h"

namespace zs {

struct TiedParam {
  int unit = 0;        // the borrower
  int spec = 0;        // its index in the borrower's param_specs()
  int owner_unit = 0;  // < unit
  int owner_spec = 0;  // index in the owner's param_specs()
  int64_t numel = 0;
  bool trainable = true;  // the owner's: a frozen owner has no gradient to add to
};

// Every tied spec of `specs` (per unit, in the units' order), checked: the owner is an earlier
// unit, has a parameter of that name which is not itself tied, of the same shape, and the
// borrower sets accepts_int8 when the owner does. Throws zs::Error(kInvalidArgument) naming the
// unit (`unit_name(u)`), the parameter and what is wrong.
std::vector<TiedParam> resolve_tied_params(const std::vector<std::vector<ParamSpec>>& specs,
                                           const std::function<std::string(size_t)>& unit_name);

// The owner units of `ties`, each once, ascending.
std::vector<int> tied_owner_units(const std::vector<TiedParam>& ties);

}  // namespace zs
