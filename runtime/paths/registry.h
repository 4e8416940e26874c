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

// A sharded reduction's destination (sharded_reduce.cc, quantized_reduce_path.cc): the first
// micro-batch's result lands in the gradient shard, a later one in the lane's receive buffer and
// is added into the shard when its reduction finishes.
class ShardAccumulator {
 public:
  void connect(void* shard, DeviceOps& ops, DType dt, int64_t numel) {
    shard_ = shard;
    ops_ = &ops;
    dt_ = dt;
    numel_ = numel;
  }
  // Where micro-batch `micro`'s reduced shard is to be written.
  void* destination(const ReduceLane& lane, int micro) {
    pending_ = micro == 0 ? nullptr : lane.recv;
    return micro == 0 ? shard_ : lane.recv;
  }
  // Its reduction has completed: adds a later micro-batch's result into the shard.
  void finish() {
    if (pending_) ops_->accumulate(shard_, dt_, pending_, dt_, numel_);
    pending_ = nullptr;
  }

 private:
  void* shard_ = nullptr;
  DeviceOps* ops_ = nullptr;
  DType dt_ = DType::kF32;
  int64_t numel_ = 0;
  void* pending_ = nullptr;
};

}  // namespace zs::paths
