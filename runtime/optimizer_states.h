// Where the fp32 master weights and optimizer state live, and how a group is updated there: one
// placement, chosen once when the engine is built, so the step's update is one call whatever the
// placement.
//
//   ResidentStates      master, m, v in the engine's device memory (host memory on the CPU
//                       backend); the device's adamw/sgd. With fp32 compute and no offload the
//                       parameters are their own master (no master buffer).
//   HostArenaStates     the CPU backend with an offloaded optimizer: master, m, v in the host
//                       arena (kHostOffload); the same host update, in place.
//   StagedHostStates    a device engine with an offloaded optimizer ([Note: offload on a
//                       device]): master, m, v in the host arena; each group's final gradient
//                       shard is copied to page-locked staging as soon as it is complete, the
//                       CPU Adam updates from it and writes the compute-dtype shard to staging,
//                       which is uploaded ahead of the next gather or forward.
//
// Each group's state covers [begin, begin + numel) of its padded group: the whole group when the
// policy keeps full optimizer state (stage 0), else this rank's shard. With bf16 or int8 AdamW
// states ([Note: optimizer state storage] in runtime/state_storage.h) m and v are narrow buffers
// updated by the fused CPU kernels (ResidentStates on the CPU, HostArenaStates); a device engine
// refuses them (Engine's constructor). With Muon ([Note: Muon parameters] in
// runtime/engine_config.h) the Muon parameters' segments are updated by a MuonUpdate
// (runtime/muon_update.h), which communicates over the shard group; their momentum is in m, and v
// is compact: the AdamW segments' elements only (MasterShard::v_offsets).
// Thread-safety: one thread (the engine's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "device/device_ops.h"
#include "offload/host_arena.h"
#include "runtime/buffer_plan.h"
#include "runtime/engine_config.h"
#include "runtime/muon_update.h"
#include "runtime/param_group.h"
#include "runtime/state_storage.h"

namespace zs {

// This rank's fp32 state of one group.
struct MasterShard {
  Buffer master, exp_avg, exp_avg_sq;  // owned by a resident placement
  float* master_ptr = nullptr;         // into `master`, the parameters or the host arena
  float* m = nullptr;                  // Adam m / SGD momentum; null without
  float* v = nullptr;                  // Adam v; null for SGD
  // Muon: per segment, where its AdamW v starts in the compact v (-1: a Muon segment, no v).
  // Empty without Muon (v is indexed like the master).
  std::vector<int64_t> v_offsets;
  // Narrow AdamW states (m and v above are null then): the buffers carved as the plan says.
  StateStorage storage;
  MomentStore m_store, v_store;
  int64_t begin = 0;  // first padded-group element held
  int64_t numel = 0;
  std::vector<ShardSegment> segments;  // pieces holding parameter elements (update, init)
  // StagedHostStates: this group's gradient shard and updated parameter shard in staging.
  void* host_grad = nullptr;
  void* host_out = nullptr;
  // A device-resident state read through host copies (shard_view), or narrow moments decoded to
  // fp32: the copies, and whether they were handed out since the last step (then refresh uploads
  // or re-encodes them).
  std::vector<float> mirror;
  bool mirror_written = false;
  int64_t mirror_lo = 0, mirror_n = 0;  // the elements [lo, lo + n) of the shard they cover
  // The last update's check (updated_nonfinite): the first parameter with a non-finite value, -1.
  int nonfinite_param = -1;
};

// Host pointers to one group's state, for checkpoints and tests (numel elements each).
struct MasterView {
  float* master = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  int64_t begin = 0;
  int64_t numel = 0;
};

class OptimizerStates {
 public:
  // `shard`: the shard group's communicator, which Muon's update gathers over (needed with
  // OptimizerKind::kMuon, else unused).
  static std::unique_ptr<OptimizerStates> create(const EngineConfig& config, const BufferPlan& plan,
                                                 DeviceOps& ops, MemoryTracker* tracker, int rank,
                                                 Communicator* shard = nullptr);
  virtual ~OptimizerStates() = default;

  // Makes group g's state (allocation from the plan); groups attach in order. `muon`: g's Muon
  // matrices (one per trainable parameter, runtime/buffer_plan.h), empty when none.
  void attach(ParamGroup& g, const UnitBufferPlan& up, std::vector<MuonMatrix> muon = {});
  MasterShard& shard(size_t group) { return shards_.at(group); }
  // Draws group g's initial master values (param_init.h, identical for every placement).
  void initialize(ParamGroup& g, uint64_t seed, int threads = 1);

  // The step's gradient of g is final (its last reduction finished).
  virtual void gradient_final(ParamGroup& /*g*/) {}
  // The gradients staged by gradient_final are complete (before the finite check reads them).
  virtual void wait_gradients() {}
  // One optimizer step of g's state from its reduced gradient; writes the updated compute-dtype
  // values into g's parameter region (unless the parameters are the master).
  void update(ParamGroup& g, float lr, float grad_scale, int64_t t);
  // [Note: non-finite policy] in engine_config.h: which parameters the last update() of each
  // group made non-finite. first_bad[g] is the position in g.specs() of group g's first parameter
  // whose updated fp32 master, or its compute-dtype copy, holds an inf or NaN, -1 when none does.
  // Host states are checked as they are written: the host AdamW kernels (optim::cpu_adamw, the
  // narrow-state ones) check what they write, SGD's segments are read right after their update;
  // device states are checked here, in one pass (synchronizes). Every update path is covered:
  // AdamW, SGD, narrow states, offload.
  void updated_nonfinite(std::span<int> first_bad);
  // Casts the master to g's compute-dtype parameter region (after a load or at start-up).
  virtual void cast_to_params(ParamGroup& g);

  // Host pointers to elements [lo, lo + n) of g's state (begin and numel of the view say which):
  // the state itself where the host can address it, else host copies that refresh() uploads
  // (unless a step came in between). Narrow moments: fp32 copies of their decoded values (bf16
  // exactly; int8 as value * scale), which refresh() re-encodes (encode_moments: the decoded
  // values come back bit for bit); lo and lo + n must then be cuts (view_cut). One view per group
  // at a time: a view replaces the group's previous copies.
  virtual MasterView view(size_t group, int64_t lo, int64_t n);
  MasterView view(size_t group) { return view(group, 0, shards_.at(group).numel); }
  // The greatest position at or below pos (an element of g's shard) where a view may start or
  // end: pos itself unless it falls inside an int8 block of the moments.
  int64_t view_cut(size_t group, int64_t pos) const;
  // Uploads (or re-encodes) what was written through view()'s host copies.
  virtual void refresh(size_t group);
  // A step makes view()'s host copies stale.
  void invalidate_views();
  // Frees group's host copies (without uploading or re-encoding them: refresh() first to keep
  // what was written through them).
  void release_view(size_t group);
  // True when master_ptr addresses host memory.
  virtual bool on_host() const = 0;

 protected:
  OptimizerStates(const EngineConfig& config, DeviceOps& ops, int rank)
      : config_(config), ops_(ops), rank_(rank) {}
  virtual void allocate(MasterShard& s, const UnitBufferPlan& up, ParamGroup& g) = 0;
  // Where the update reads g's gradient and writes its parameters; after_update finishes it.
  virtual const void* update_grad(ParamGroup& g, MasterShard& /*s*/) { return g.update_grad(); }
  virtual void* update_out(ParamGroup& g, MasterShard& s);
  // One segment's update; `v` is its AdamW v (null for SGD). Returns whether its kernel found
  // every updated value finite (the host AdamW checks as it writes); nullopt when it did not
  // check (check_updated reads it then).
  virtual std::optional<bool> update_span(MasterShard& s, const void* grad, void* out,
                                          const ShardSegment& seg, float* v,
                                          const optim::AdamWStep& adam, float lr, float grad_scale,
                                          bool decay);
  virtual void after_update(ParamGroup& /*g*/, MasterShard& /*s*/) {}
  // Writes host values into the master.
  virtual void write_master(MasterShard& s, const float* host) = 0;
  bool params_are_master(const MasterShard& s) const { return s.master.empty() && !offloaded_; }
  // Sets s's moment pointers (m, v, or the narrow stores) to buffers of the plan's sizes.
  void place_moments(MasterShard& s, void* m, void* v);
  // The check of updated_nonfinite on the segment update() has just written: on the host at
  // once, else queued for one device pass.
  void check_updated(size_t group, const ShardSegment& seg, const void* out);
  // s's narrow moments, for the functions of state_storage.h.
  NarrowMoments narrow_moments(const MasterShard& s) const {
    return {&s.storage, &s.segments, s.m_store, s.v_store};
  }

  // Segment k's AdamW v: v + its compact offset with Muon, else v + its shard offset.
  static float* segment_v(const MasterShard& s, size_t k);

  const EngineConfig& config_;
  DeviceOps& ops_;
  int rank_;
  std::unique_ptr<MuonUpdate> muon_;  // with OptimizerKind::kMuon only
  bool offloaded_ = false;
  std::vector<MasterShard> shards_;
  // Device states: the updated spans to check and the (group, parameter) of each.
  std::vector<DeviceOps::StatsSpan> check_spans_;
  std::vector<std::pair<size_t, int>> check_params_;
};

}  // namespace zs
