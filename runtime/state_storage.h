// Where one group shard's AdamW moments live when they are stored narrow (bf16 or int8), as a pure
// value computed from the layout and the configuration; and the operations on that storage (the
// fused update, decoding to fp32 for checkpoints and tests, re-encoding from fp32).
//
// [Note: optimizer state storage] With OptimizerConfig::state_dtype fp32 the moments are two fp32
// arrays over the whole shard (padding included), as before. Otherwise each moment is one buffer
// of moment_bytes() bytes, carved as
//   [fp32 moments of the fp32-kept segments | int8 scales | narrow moments]
//     4 * f32_numel                           4 * blocks    2 * narrow_numel (bf16)
//                                                           or narrow_numel codes (int8)
// holding parameter elements only (no padding): per master segment (one parameter's piece of the
// shard), in segment order, its elements go to the fp32 part when param_state_dtype() says fp32
// (a parameter under state_min_numel elements or named by state_fp32), else to the narrow part; an
// int8 segment also takes ceil(length / block) scales. The engine lays groups out at lcm(align,
// block) elements with int8 states (layout_align() in engine_config.h), so every segment starts on
// a block boundary of its parameter: a block never straddles two parameters or two ranks, and the
// blocks of a parameter are the same at every stage and world size (stages 0-3 give the same bits).
// Bytes per moment: fp32 4n, bf16 2n, int8 n + 4 ceil(n / block) per segment of n elements. Ranks
// hold different mixes (padding and small parameters fall unevenly), so each rank allocates the
// largest over its shard group's ranks (moment_capacity()): per-rank bytes stay independent of
// the rank, as for every other buffer, and the slack counts as padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/state_adam.h"
#include "runtime/engine_config.h"
#include "sharding/layout.h"
#include "unit/unit.h"

namespace zs {

// The dtype of the AdamW moments of parameter `p` of unit `unit` (param_state_dtype() of its name
// "unit.p.name" and its size).
optim::StateDType state_dtype_of(const OptimizerConfig& c, const std::string& unit,
                                 const ParamSpec& p);

// The segments of a group's master state: one per parameter over the whole padded group when
// `whole` (stage 0, or one rank), else layout.shard_segments(rank).
std::vector<ShardSegment> master_segments(const GroupLayout& layout, bool whole, int rank);

// Where one master segment's moments are.
struct StateSegment {
  optim::StateDType dtype = optim::StateDType::kF32;
  int64_t offset = 0;  // first element in the fp32 part (kF32) or in the narrow part
  int64_t block = 0;   // int8: its first scale
};

// The layout of one shard's moments (each moment: one buffer of moment_bytes()), as the Note says.
struct StateStorage {
  optim::StateDType dtype = optim::StateDType::kF32;  // the run's; kF32: the fp32 shard layout
  int64_t block = 256;                                // int8 block (elements)
  StateCode code = StateCode::kFloat8;                // int8 code book
  std::vector<StateSegment> segments;                 // one per master segment, in order
  int64_t f32_numel = 0;                              // elements with fp32 moments
  int64_t narrow_numel = 0;                           // elements with bf16 / int8 moments
  int64_t blocks = 0;                                 // int8 scales

  bool narrow() const { return dtype != optim::StateDType::kF32; }
  // Bytes of one moment (see the Note); 0 unless narrow().
  int64_t moment_bytes() const;
};

// The storage of a shard whose master segments are `segs` (of `layout`'s parameters, named
// `names`: "unit.param" in layout order, or empty when c.state_fp32 is). A default (fp32, empty)
// value unless c is AdamW with a narrow state_dtype.
StateStorage plan_state_storage(const GroupLayout& layout, const std::vector<ShardSegment>& segs,
                                const OptimizerConfig& c,
                                const std::vector<std::string>& names = {});

// The bytes each rank allocates per moment for `layout` (the largest moment_bytes() over the
// shard group's ranks; a whole group's own when `whole`); 0 unless narrow states. `names`: as
// plan_state_storage's.
int64_t moment_capacity(const GroupLayout& layout, bool whole, const OptimizerConfig& c,
                        const std::vector<std::string>& names = {});

// One moment's buffer carved as the storage says.
struct MomentStore {
  float* f32 = nullptr;     // [f32_numel]
  float* scales = nullptr;  // [blocks]
  void* narrow = nullptr;   // bf16 [narrow_numel] or int8 codes [narrow_numel]
};
// `base` addresses moment_bytes() bytes, 4-byte aligned.
MomentStore carve_moment(const StateStorage& st, void* base);

// The moments of a shard: m and v, and the segments they store.
struct NarrowMoments {
  const StateStorage* storage = nullptr;
  const std::vector<ShardSegment>* segments = nullptr;
  MomentStore m, v;
};

// One AdamW step of segment k (optim/state_adam.h's fused kernels; optim::cpu_adamw for an
// fp32-kept segment). master, grad (grad_dtype) and out (may be null; out_dtype) address the
// shard's element 0. Same bits on every ISA and thread count. Returns false when an updated value
// is an inf or NaN (the kernels check what they write).
bool adamw_segment(const NarrowMoments& s, size_t k, float* master, const void* grad,
                   DType grad_dtype, void* out, DType out_dtype, const optim::AdamWStep& step);

// Shard elements [lo, lo + n) of the moments as fp32 (m_out, v_out: n elements each, element lo
// first; padding between segments left as it is). bf16 decodes exactly; int8 as value[code] *
// scale. lo and lo + n must be cuts: positions moment_cut leaves as they are (0 and the shard's
// numel always are); else throws zs::Error(kInvalidArgument).
void decode_moments(const NarrowMoments& s, int64_t lo, int64_t n, float* m_out, float* v_out);

// Stores fp32 moments (decode_moments' layout, the same range rules) back. bf16: rounded to
// nearest even, so the decoded values of bf16 states come back unchanged. int8: a block whose
// current decoding equals the input bit for bit is left as it is; any other is quantized
// (state_quant.h's rule) and each element whose code does not decode to its value bit for bit
// gets a code that does, where one exists. So re-encoding what decode_moments gave restores the
// same decoded values, bit for bit (what the next update reads): [Note: decoded state round
// trip] in state_storage.cc. A block is coded from its own elements only, so ranges that are
// cuts can be decoded and encoded one at a time.
void encode_moments(const NarrowMoments& s, int64_t lo, int64_t n, const float* m_in,
                    const float* v_in);

// The greatest cut at or below shard element pos: pos itself unless it falls inside an int8
// block of a segment (not at its start), then that block's start.
int64_t moment_cut(const NarrowMoments& s, int64_t pos);

}  // namespace zs
