// Small immutable policy structs that configure the engine. Programs map their flags onto these
// (Boost.Program_options lives only in apps/); the library never parses command lines.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/muon.h"
#include "optim/sgd.h"
#include "optim/state_adam.h"

namespace zs {

// ZeRO stage: 0 = nothing sharded (DDP), 1 = optimizer states and fp32 master, 2 = + gradients,
// 3 = + parameters.
enum class ZeroStage : int { k0 = 0, k1 = 1, k2 = 2, k3 = 3 };
// Throws zs::Error(kInvalidArgument) outside 0..3.
ZeroStage zero_stage_from_int(int stage);

struct MixedPrecisionPolicy {
  DType param_dtype = DType::kF32;  // compute dtype of parameters: fp32, bf16 or fp16
  // Dtype of the accumulated gradient (full buffer in stages 0-1, shard in stages 2-3) and of
  // its reduction: fp32, or the compute dtype. Sums are always done in fp32 and rounded once.
  DType grad_dtype = DType::kF32;
};

// [Note: Muon parameters] kMuon is two optimizers in one run, chosen per parameter by one rule
// (muon_param()): Muon (optim/muon.h, optim/newton_schulz.h) for every trainable 2-D parameter of
// a unit whose name starts with "block." (a transformer block's weight matrices, and LoRA
// adapters' there); AdamW, with `adamw`'s settings, for everything else (embeddings, the LM head,
// norms, biases, other units). A Muon parameter keeps one fp32 momentum buffer, in exp_avg beside
// the AdamW parameters' m; exp_avg_sq holds the AdamW parameters' elements only (a compact buffer;
// views and checkpoints show zeros at the Muon parameters'). The momentum is updated on each
// rank's shard; the orthogonalisation needs the whole matrix (runtime/muon_update.h). fp32 states
// only, resident only, the CPU backend only.
enum class OptimizerKind { kAdamW, kSgd, kMuon };
// "adamw", "sgd", "muon": as flags, logs and checkpoints name them.
const char* optimizer_kind_name(OptimizerKind k);
// True when some parameters are updated by AdamW: kAdamW, and kMuon's other parameters.
inline bool uses_adamw(OptimizerKind k) {
  return k == OptimizerKind::kAdamW || k == OptimizerKind::kMuon;
}

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  optim::AdamWConfig adamw;
  optim::SgdConfig sgd;
  optim::MuonConfig muon;  // kMuon's momentum and Newton-Schulz steps
  optim::LrSchedule schedule;
  // [Note: optimizer state storage] How AdamW's m and v are stored (optim/state_adam.h): fp32
  // (the default and the old path), bf16 (rounded to nearest even) or int8 (block-wise codes with
  // one fp32 absmax scale per `state_block` elements and the code book `state_code`: float8 by
  // default, [Note: float8 state codes] in core/state_quant.h). A parameter with
  // fewer than `state_min_numel` elements keeps fp32 states (bitsandbytes' rule): see
  // param_state_dtype(). AdamW only; the CPU backend only (resident or offloaded).
  optim::StateDType state_dtype = optim::StateDType::kF32;
  int64_t state_block = 256;  // int8 states: elements per block, a power of two >= 64
  StateCode state_code = StateCode::kFloat8;  // int8 states: the code book (float8 or dynamic)
  int64_t state_min_numel = 4096;             // smaller parameters keep fp32 states
  // Parameters named here keep fp32 states too (bitsandbytes' override_config(p, 'optim_bits',
  // 32)): shell-style patterns matched by fnmatch(3) without flags (`*` and `?` match '.' too,
  // `[...]` a set) against "unit.param" names, as logs and checkpoints spell them (embed.wte,
  // block.0.qkv.weight, head.lm_head.weight). Each must match a trainable parameter
  // (check_state_fp32_patterns()); only with a narrow state_dtype; no commas.
  std::vector<std::string> state_fp32;
};

// [Note: Muon parameters]: true when c.kind is kMuon and the parameter of `shape` in the unit named
// `unit_name` is updated by Muon (2-D, in a unit named "block.*"); the engine and the planner both
// decide by this function. The caller passes trainable, untied parameters only.
bool muon_param(const OptimizerConfig& c, std::string_view unit_name,
                const std::vector<int64_t>& shape);
// Which optimizer updates which parameters, one line: "adamw: every parameter", "sgd: every
// parameter" or "muon: 2-D parameters of units block.* (momentum M, nesterov, N Newton-Schulz
// steps); adamw: every other parameter", as banners and checkpoint manifests print it.
std::string optimizer_rules(const OptimizerConfig& c);

// The dtype of the AdamW moments of parameter `name` ("unit.param") of `numel` elements: fp32
// when numel < c.state_min_numel or a c.state_fp32 pattern matches `name`, else c.state_dtype.
// The engine and the planner both decide by this function.
optim::StateDType param_state_dtype(const OptimizerConfig& c, std::string_view name, int64_t numel);
// Throws zs::Error(kInvalidArgument) naming the first c.state_fp32 pattern that matches none of
// `names` (every unit's trainable parameters, "unit.param"; tied borrowers are their owners'),
// saying so when it matches one of `frozen` (the frozen parameters' names, when known).
void check_state_fp32_patterns(const OptimizerConfig& c,
                               const std::vector<std::vector<std::string>>& names,
                               const std::vector<std::vector<std::string>>& frozen = {});
// "fp32" (fp32 states, or SGD), "bf16 (fp32 under N elements)" or "int8 (block B, fp32 under N
// elements)", with " and for [P, Q]" before the ')' when state_fp32 names patterns (sorted, each
// once): the storage of the moments, as logs and checkpoints name it.
std::string state_storage_name(const OptimizerConfig& c);

struct OffloadPolicy {
  // Keep this rank's fp32 master shard and optimizer state in the host arena and update it there
  // with the CPU Adam (stages 1-3).
  bool optimizer = false;
};

// How frozen parameters (ParamSpec::trainable = false, [Note: frozen parameters] in
// unit/unit.h) are stored. They have no master: what is stored is the only copy.
struct FrozenPolicy {
  // Unset: the compute dtype. fp32, bf16, fp16: stored in that dtype and converted into the
  // compute dtype when a unit uses them (no conversion when they agree). int8: vector-wise, each
  // matrix (2-D parameter) as int8 with one fp32 absmax scale per row (core/quantize.h), every
  // other shape in the compute dtype; dequantized into the compute dtype before the unit computes.
  std::optional<DType> storage;
  DType storage_or(DType compute) const { return storage.value_or(compute); }
  // [Note: int8 compute] With int8 storage, how units compute from the int8 matrices of
  // parameters that accept them (ParamSpec::accepts_int8, [Note: frozen parameters]):
  //   kDequantize  dequantized into the compute dtype before the unit computes, like every other
  //                frozen parameter;
  //   kInt8Gemm    handed to the unit as int8 records (no conversion buffer for them), for an int8
  //                GEMM (nn/int8_linear.h); refused where int8_gemm_supported()
  //                (core/cpu_features.h) is false: without VNNI the int8 products are wrong;
  //   kAuto        kInt8Gemm where int8_gemm_supported(), else kDequantize.
  // kAuto therefore depends on the machine (and its ISA caps): each rank resolves it on its own
  // CPU, and the engine's agreement check compares the resolution (engine_settings(): "auto:
  // int8-gemm" or "auto: dequantize"), so ranks that would compute with different products are
  // refused, naming both; set kDequantize or kInt8Gemm on such a mix.
  enum class Int8Compute : uint8_t { kAuto, kDequantize, kInt8Gemm };
  Int8Compute int8_compute = Int8Compute::kAuto;
  // False: the engine's construction leaves the frozen parameters zero instead of drawing them,
  // for a caller that sets every one of them next (a base imported from files: zs_train's
  // --init-from-hf and --init-safetensors); at LLaMA-7B shape the draw is most of the start-up.
  bool draw_initial = true;
  // True when int8 records of accepting parameters are handed to units: int8 storage and kInt8Gemm
  // (or kAuto where int8_gemm_supported()).
  bool hands_int8() const;
};
// "auto", "dequantize", "int8-gemm".
const char* int8_compute_name(FrozenPolicy::Int8Compute c);

// How a check names a setting: the key ("stage", "zero_quantized_weights_block", ...) as the
// reader of the configuration calls it (zs_train: the flag, or the DeepSpeed key it came from).
using KeyNamer = std::function<std::string(std::string_view key)>;

// ZeRO++ (DeepSpeed's zero_optimization keys of the same names with a zero_ prefix): how
// stage 2-3 move bytes besides the plain collectives. Each switch picks a gather or reduce path
// (runtime/gather_path.h, runtime/reduce_path.h); the engine and the planner ask those paths.
struct ZeroPPConfig {
  // [Note: quantized weights] ZeRO++ qwZ (DeepSpeed's zero_optimization.zeropp.quantized_weights),
  // stage 3 only: every parameter all-gather (forward and backward) sends this rank's shard of the
  // compute-dtype parameters as int8 codes of the signed linear book (j / 127) with one fp32
  // absmax scale per `quantized_weights_block` elements, and every rank dequantizes the
  // gathered chunks into the compute dtype (runtime/quantized_gather.h). The fp32 master, the
  // optimizer and the shards themselves are untouched; only what the units compute with is
  // rounded, by at most half a step (scale / 254) plus the compute dtype's rounding. The block
  // is a power of two in 32..65536; the layout alignment becomes lcm(align, block)
  // (layout_align()), so blocks never straddle ranks. Why linear and not float8: docs/engine.md.
  bool quantized_weights = false;
  int64_t quantized_weights_block = 256;
  // [Note: hpZ] ZeRO++ hpZ (DeepSpeed's zero_hpz_partition_size), stage 3 only: K > 1 ranks
  // (consecutive, so a group of a node's ranks when K divides node_size) keep a secondary shard
  // of each unit's compute-dtype parameters, taken from the forward gather, and later gathers of
  // the unit in the same step (the backward's, a recompute's) all-gather it within those K ranks
  // instead of over the world. 1 = off. K must divide the world size and node_size, and the
  // world must span more than one node (on one node the gather is already node-local).
  int hpz_partition_size = 1;
  // [Note: quantized gradients] ZeRO++ qgZ (DeepSpeed's zero_quantized_gradients), stages 2-3:
  // the gradient reduce-scatter becomes two int8 block-quantized all-to-alls, within the node
  // then across nodes, each followed by an fp32 sum in rank order (runtime/quantized_reduce.h).
  // The block is a power of two in 32..65536; layout_align() folds it in like qwZ's.
  bool quantized_gradients = false;
  int64_t quantized_gradients_block = 256;
};

struct EngineConfig {
  ZeroStage stage = ZeroStage::k3;
  MixedPrecisionPolicy precision;
  OptimizerConfig optimizer;
  // Loss scaling. When `loss_scale_set` is false the engine picks: dynamic for fp16 compute,
  // none (scale 1) for bf16 and fp32.
  optim::LossScalerConfig loss_scale;
  bool loss_scale_set = false;
  float clip_norm = 1.0f;  // global gradient-norm clipping; <= 0 disables it
  int micro_batches = 1;   // gradient accumulation steps per optimizer step
  int prefetch = 1;        // how many units ahead to gather (stage 3); 0 = gather on demand
  uint64_t seed = 1234;    // parameter initialisation
  OffloadPolicy offload;
  FrozenPolicy frozen;
  int64_t align = 32;         // elements; see [Note: padding] in sharding/layout.h
  int optimizer_threads = 0;  // CPU Adam threads per rank; 0 = the OpenMP default
  // [Note: hybrid sharding] The ranks that shard the model states among themselves (HSDP; ZeRO's
  // MiCS, FSDP2's 2-D mesh). 0 = all ranks (flat sharding). Otherwise S must divide the world
  // size W: the shard group of rank r is ranks [S*(r/S), S*(r/S) + S) and its replica group the
  // W/S ranks with the same r mod S. Inside a shard group the stage holds as with a world of S
  // ranks (gathers and reduce-scatters over it; master and optimizer state split S ways); after
  // a unit's gradient is reduce-scattered within the group, its shard is all-reduced (sum) across
  // the replica group, so every replica applies the same update to the same shard. With block
  // placement and S = ranks per node, parameter gathers and the reduce-scatter stay on the node
  // and only the gradient shards' all-reduce crosses nodes. Reduction order: for each element,
  // sum over the replica groups (in replica order) of the sum within each shard group (in rank
  // order), each sum in fp32 and rounded to the gradient dtype (so twice for fp16/bf16
  // gradients); it agrees with the flat sum within fp32 rounding for fp32 gradients.
  int shard_group_size = 0;
  // [Note: non-finite policy] A step whose gradient is not finite is skipped (no update). That is
  // expected with dynamic loss scaling (fp16), where the scale backs off until the gradient
  // fits; without it nothing makes the next step better. step() throws zs::Error(kNonFinite) on
  // every rank once more than this many consecutive steps were skipped, and at once when the
  // loss is not finite. -1 = the default: 16 with dynamic loss scaling, 0 otherwise (the first
  // non-finite gradient stops the run). An update that makes a parameter (the fp32 master or its
  // compute-dtype copy) non-finite cannot be skipped, the shard is overwritten: step() throws at
  // once on every rank, naming the step, the unit and the parameter.
  int max_consecutive_skips = -1;
  // [Note: node layout] Ranks per node, block placement: rank r is on node r / node_size with
  // local rank r % node_size. 0 = every rank on one node. The library cannot see nodes: the
  // trainer fills it from its topology (collectives/topology.h), the planner from its flags.
  // hpZ and qgZ need it; it must divide the world size.
  int node_size = 0;
  // ZeRO++: quantized weights (qwZ), hierarchical partitions (hpZ), quantized gradients (qgZ).
  ZeroPPConfig zeropp;
  // [Note: world-invariant reduction] The same bits at any world size. The step is M = W * k
  // global micro-batches (W ranks of k micro-batches each; rank r's micro-batch m is global
  // micro-batch m * W + r, as the trainer's sampler lays out its data), and every gradient
  // element is their sum in one binary tree over the global index: its lower log2(W) levels are
  // the reduce-scatter over the ranks (the host collectives' tree, [Note: deterministic
  // reduction] in collectives/reduce_kernels.cc), its upper log2(k) levels are added on the rank
  // over the micro-batches in fp32 (runtime/micro_batch_tree.h). So every stage reduce-scatters
  // each micro-batch (stages 0-1 too: k reductions of the full buffer per step instead of one),
  // and the partial sums stay fp32 until the update. The loss and the gradient's sum of squares
  // are exact sums (runtime/invariant_stats.h). With the same M, a run at any power-of-two W
  // dividing M computes the same tree, so it gives the same parameters to the bit (the sampler
  // and the model must not depend on W either; zs_train's do not). Needs: W and k powers of two,
  // fp32 gradients, no qgZ, hybrid sharding only with k = 1, the CPU backend. Costs log2(k)
  // fp32 shards per unit (UnitBufferPlan::tree_bytes) and, in stages 0-1, k - 1 more
  // reduce-scatters per step.
  bool world_invariant = false;

  // Throws zs::Error(kInvalidArgument) naming the first bad field; zs::Error(kUnsupported) for
  // frozen.int8_compute = kInt8Gemm on a process without the int8 GEMM ([Note: int8 compute]).
  // `name` names the fields the flags also set (micro_batches, prefetch, shard_group_size,
  // optimizer.state_block, optimizer.state_min_numel, stage and the ZeRO++ keys) as the reader
  // of the configuration calls them; null: by key.
  void validate(const KeyNamer& name = nullptr) const;
  // The checks that need the world size (node_size, hpZ and qgZ against `world` ranks, with
  // hybrid sharding): throws zs::Error(kInvalidArgument) naming the switch. The engine calls it.
  void validate_for_world(int world) const;
};

// The ZeRO++ rules (the one statement of them: EngineConfig::validate() applies them, and the
// programs' flag readers call this with their namer): qwZ needs stage 3; hpZ's K is 1 (off) or
// more, above 1 only at stage 3; qgZ needs stage 2 or 3; both blocks are powers of two in
// 32..65536. Throws zs::Error(kInvalidArgument) naming the setting by `name` (null: the key).
void validate_zeropp(ZeroStage stage, const ZeroPPConfig& z, const KeyNamer& name = nullptr);

// The alignment (elements) the engine lays its groups out with: `align`, or with int8 optimizer
// states lcm(align, optimizer.state_block), so that every state block lies inside one parameter
// and one rank's shard ([Note: optimizer state storage] in runtime/state_storage.h); with qwZ
// also a multiple of zero_quantized_weights_block ([Note: quantized weights]), and with qgZ of
// zero_quantized_gradients_block ([Note: quantized gradients]). The planner lays
// out with the same value.
int64_t layout_align(const EngineConfig& c);

struct Setting;
// Every field as a named value ("stage", "optimizer.adamw.beta1", ...), for the run-wide
// agreement check (runtime/agreement.h) and for logs.
std::vector<Setting> engine_settings(const EngineConfig& c);

}  // namespace zs
