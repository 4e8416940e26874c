// The table the gather and reduce paths are chosen from ([Note: communication paths] in
// runtime/comm_path.h): each mode's file defines one entry, registry.cc lists them in the order
// they are tried. Internal to zs_runtime.
#pragma once

#include <memory>

#include "runtime/gather_path.h"
#include "runtime/reduce_path.h"

namespace zs::paths {

// A path that moves a group's parameters over the shard group; the first whose `applies` holds
// is taken.
struct GatherEntry {
  const char* name;
  bool (*applies)(const PathConfig& c);
  std::unique_ptr<GatherPath> (*make)(const PathConfig& c, const GroupLayout& l,
                                      const FrozenLayout& f, int rank);
};

// A path over another (hpZ over the world gather); every one whose `applies` holds wraps the
// chosen path, in table order.
struct GatherWrapper {
  const char* name;
  bool (*applies)(const PathConfig& c);
  std::unique_ptr<GatherPath> (*wrap)(std::unique_ptr<GatherPath> inner, const PathConfig& c,
                                      const GroupLayout& l, int rank);
};

// A gradient reduction; the first whose `applies` holds is taken.
struct ReduceEntry {
  const char* name;
  bool (*applies)(const PathConfig& c);
  std::unique_ptr<ReducePath> (*make)(const PathConfig& c, const GroupLayout& l, int rank);
};

// Element `e` of a buffer of dtype `dt`.
inline void* elem_at(void* p, int64_t e, DType dt) {
  return static_cast<char*>(p) + e * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace zs::paths
