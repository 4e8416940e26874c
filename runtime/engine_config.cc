#include "runtime/engine_config.h"

#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/cpu_features.h"
#include "core/error.h"
#include "runtime/agreement.h"

namespace zs {

namespace {

// [Note: int8 compute] kAuto as this rank resolves it, when it has int8 matrices to resolve it
// for: ranks whose CPUs or ISA caps (ZS_MAX_ISA may differ between ranks) resolve it apart would
// compute the same run with different products, so they compare the resolution.
std::string int8_compute_setting(const FrozenPolicy& f) {
  const std::string name = int8_compute_name(f.int8_compute);
  if (f.int8_compute != FrozenPolicy::Int8Compute::kAuto || f.storage != DType::kI8) return name;
  return name + ": " + (f.hands_int8() ? "int8-gemm" : "dequantize");
}

}  // namespace

std::vector<Setting> engine_settings(const EngineConfig& c) {
  auto i = [](int64_t v) { return std::to_string(v); };
  auto f = [](double v) { return setting_value(v); };
  const optim::AdamWConfig& a = c.optimizer.adamw;
  const optim::LrSchedule& s = c.optimizer.schedule;
  const optim::LossScalerConfig& l = c.loss_scale;
  return {
      {"stage", i(static_cast<int>(c.stage))},
      {"precision.param_dtype", std::string(dtype_name(c.precision.param_dtype))},
      {"precision.grad_dtype", std::string(dtype_name(c.precision.grad_dtype))},
      {"optimizer.kind", optimizer_kind_name(c.optimizer.kind)},
      {"optimizer.adamw.beta1", f(a.beta1)},
      {"optimizer.adamw.beta2", f(a.beta2)},
      {"optimizer.adamw.eps", f(a.eps)},
      {"optimizer.adamw.weight_decay", f(a.weight_decay)},
      {"optimizer.sgd.momentum", f(c.optimizer.sgd.momentum)},
      {"optimizer.sgd.weight_decay", f(c.optimizer.sgd.weight_decay)},
      {"optimizer.muon.momentum", f(c.optimizer.muon.momentum)},
      {"optimizer.muon.ns_steps", i(c.optimizer.muon.ns_steps)},
      {"optimizer.schedule.lr", f(s.lr)},
      {"optimizer.schedule.warmup_steps", i(s.warmup_steps)},
      {"optimizer.schedule.total_steps", i(s.total_steps)},
      {"optimizer.schedule.min_ratio", f(s.min_ratio)},
      {"optimizer.state_dtype", optim::state_dtype_name(c.optimizer.state_dtype)},
      {"optimizer.state_block", i(c.optimizer.state_block)},
      {"optimizer.state_code", state_code_name(c.optimizer.state_code)},
      {"optimizer.state_min_numel", i(c.optimizer.state_min_numel)},
      {"optimizer.state_fp32", fmt::format("{}", fmt::join(c.optimizer.state_fp32, ","))},
      {"loss_scale_set", i(c.loss_scale_set)},
      {"loss_scale.dynamic", i(l.dynamic)},
      {"loss_scale.initial", f(l.initial)},
      {"loss_scale.growth", f(l.growth)},
      {"loss_scale.backoff", f(l.backoff)},
      {"loss_scale.growth_interval", i(l.growth_interval)},
      {"loss_scale.min_scale", f(l.min_scale)},
      {"loss_scale.hysteresis", i(l.hysteresis)},
      {"clip_norm", f(c.clip_norm)},
      {"micro_batches", i(c.micro_batches)},
      {"prefetch", i(c.prefetch)},
      {"seed", std::to_string(c.seed)},
      {"offload.optimizer", i(c.offload.optimizer)},
      {"frozen.storage", c.frozen.storage ? std::string(dtype_name(*c.frozen.storage)) : "compute"},
      {"frozen.int8_compute", int8_compute_setting(c.frozen)},
      {"align", i(c.align)},
      {"optimizer_threads", i(c.optimizer_threads)},
      {"shard_group_size", i(c.shard_group_size)},
      {"max_consecutive_skips", i(c.max_consecutive_skips)},
      {"zero_quantized_weights", i(c.zeropp.quantized_weights)},
      {"zero_quantized_weights_block", i(c.zeropp.quantized_weights_block)},
      {"node_size", i(c.node_size)},
      {"zero_hpz_partition_size", i(c.zeropp.hpz_partition_size)},
      {"zero_quantized_gradients", i(c.zeropp.quantized_gradients)},
      {"zero_quantized_gradients_block", i(c.zeropp.quantized_gradients_block)},
      {"world_invariant", i(c.world_invariant)}};
}

const char* int8_compute_name(FrozenPolicy::Int8Compute c) {
  switch (c) {
    case FrozenPolicy::Int8Compute::kAuto:
      return "auto";
    case FrozenPolicy::Int8Compute::kDequantize:
      return "dequantize";
    case FrozenPolicy::Int8Compute::kInt8Gemm:
      return "int8-gemm";
  }
  return "invalid";
}

namespace {

bool matches(const std::string& pattern, std::string_view name) {
  return fnmatch(pattern.c_str(), std::string(name).c_str(), 0) == 0;
}

}  // namespace

const char* optimizer_kind_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kMuon:
      return "muon";
  }
  return "invalid";
}

bool muon_param(const OptimizerConfig& c, std::string_view unit_name,
                const std::vector<int64_t>& shape) {
  return c.kind == OptimizerKind::kMuon && shape.size() == 2 && unit_name.starts_with("block.");
}

std::string optimizer_rules(const OptimizerConfig& c) {
  if (c.kind != OptimizerKind::kMuon)
    return fmt::format("{}: every parameter", optimizer_kind_name(c.kind));
  return fmt::format(
      "muon: 2-D parameters of units block.* (momentum {}, nesterov, {} Newton-Schulz steps); "
      "adamw: every other parameter",
      c.muon.momentum, c.muon.ns_steps);  // the float's shortest form: 0.95
}

optim::StateDType param_state_dtype(const OptimizerConfig& c, std::string_view name,
                                    int64_t numel) {
  if (numel < c.state_min_numel) return optim::StateDType::kF32;
  for (const std::string& p : c.state_fp32)
    if (matches(p, name)) return optim::StateDType::kF32;
  return c.state_dtype;
}

void check_state_fp32_patterns(const OptimizerConfig& c,
                               const std::vector<std::vector<std::string>>& names,
                               const std::vector<std::vector<std::string>>& frozen) {
  auto first_match = [](const std::string& p, const std::vector<std::vector<std::string>>& all) {
    for (const auto& unit : all)
      for (const std::string& n : unit)
        if (matches(p, n)) return n;
    return std::string();
  };
  std::string example;
  for (const auto& unit : names)
    if (example.empty() && !unit.empty()) example = unit.front();
  for (const std::string& p : c.state_fp32) {
    if (!first_match(p, names).empty()) continue;
    const std::string names_are = example.empty()
                                      ? std::string("the model's parameters have no names")
                                      : "names are unit.param, e.g. " + example;
    const std::string hit_frozen = first_match(p, frozen);
    ZS_CHECK(hit_frozen.empty(), ErrorCode::kInvalidArgument,
             "optimizer.state_fp32 pattern '{}' matches only frozen parameters ({} is frozen: it "
             "has no optimizer state; {})",
             p, hit_frozen, names_are);
    fail(ErrorCode::kInvalidArgument,
         "optimizer.state_fp32 pattern '{}' matches no trainable parameter ({})", p, names_are);
  }
}

std::string state_storage_name(const OptimizerConfig& c) {
  if (c.kind != OptimizerKind::kAdamW || c.state_dtype == optim::StateDType::kF32) return "fp32";
  std::string under = fmt::format("fp32 under {} elements", c.state_min_numel);
  if (!c.state_fp32.empty()) {
    std::vector<std::string> named = c.state_fp32;
    std::sort(named.begin(), named.end());
    named.erase(std::unique(named.begin(), named.end()), named.end());
    under += fmt::format(" and for [{}]", fmt::join(named, ", "));
  }
  if (c.state_dtype == optim::StateDType::kI8)
    return fmt::format("int8 (block {}, {} codes, {})", c.state_block,
                       state_code_name(c.state_code), under);
  return fmt::format("{} ({})", optim::state_dtype_name(c.state_dtype), under);
}

int64_t layout_align(const EngineConfig& c) {
  // [Note: optimizer state storage]: whole int8 blocks per parameter and per shard.
  int64_t a = c.align;
  if (c.optimizer.state_dtype == optim::StateDType::kI8) a = std::lcm(a, c.optimizer.state_block);
  // [Note: quantized weights]: whole qwZ blocks per shard.
  if (c.zeropp.quantized_weights) a = std::lcm(a, c.zeropp.quantized_weights_block);
  // [Note: quantized gradients]: whole qgZ blocks per shard.
  if (c.zeropp.quantized_gradients) a = std::lcm(a, c.zeropp.quantized_gradients_block);
  return a;
}

bool FrozenPolicy::hands_int8() const {
  if (storage != DType::kI8) return false;
  return int8_compute == Int8Compute::kInt8Gemm ||
         (int8_compute == Int8Compute::kAuto && int8_gemm_supported());
}

ZeroStage zero_stage_from_int(int stage) {
  ZS_CHECK(stage >= 0 && stage <= 3, ErrorCode::kInvalidArgument,
           "ZeRO stage {} is not one of 0, 1, 2, 3", stage);
  return static_cast<ZeroStage>(stage);
}

namespace {

// v in [lo, hi] (hi_open: [lo, hi)) and finite; the error names `name`. Values outside their
// domain train NaNs or divide by zero later: refused at validation, named.
void finite_in(const char* name, double v, double lo, double hi, bool hi_open) {
  ZS_CHECK(std::isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi), ErrorCode::kInvalidArgument,
           "{} {} is outside [{}, {}{}", name, v, lo, hi, hi_open ? ")" : "]");
}

void check_precision(ZeroStage stage, const MixedPrecisionPolicy& precision) {
  const int s = static_cast<int>(stage);
  ZS_CHECK(s >= 0 && s <= 3, ErrorCode::kInvalidArgument, "ZeRO stage {} is not one of 0, 1, 2, 3",
           s);
  const DType p = precision.param_dtype;
  ZS_CHECK(p == DType::kF32 || p == DType::kBF16 || p == DType::kF16, ErrorCode::kInvalidArgument,
           "compute dtype {} is not one of fp32, bf16, fp16", dtype_name(p));
  const DType g = precision.grad_dtype;
  ZS_CHECK(g == DType::kF32 || g == p, ErrorCode::kInvalidArgument,
           "gradient dtype {} must be fp32 or the compute dtype {}", dtype_name(g), dtype_name(p));
}

void check_frozen(const FrozenPolicy& frozen) {
  if (frozen.storage) {
    const DType f = *frozen.storage;
    ZS_CHECK(f == DType::kF32 || f == DType::kBF16 || f == DType::kF16 || f == DType::kI8,
             ErrorCode::kInvalidArgument,
             "frozen parameter storage dtype {} is not one of fp32, bf16, fp16, int8",
             dtype_name(f));
  }
  using I8 = FrozenPolicy::Int8Compute;
  const I8 ic = frozen.int8_compute;
  ZS_CHECK(ic == I8::kAuto || ic == I8::kDequantize || ic == I8::kInt8Gemm,
           ErrorCode::kInvalidArgument, "frozen.int8_compute {} is not auto, dequantize, int8-gemm",
           static_cast<int>(ic));
  ZS_CHECK(ic != I8::kInt8Gemm || frozen.storage == DType::kI8, ErrorCode::kInvalidArgument,
           "frozen.int8_compute int8-gemm needs int8 storage of the frozen parameters (storage "
           "is {})",
           frozen.storage ? std::string(dtype_name(*frozen.storage)) : "the compute dtype");
  ZS_CHECK(
      ic != I8::kInt8Gemm || int8_gemm_supported(), ErrorCode::kUnsupported,
      "frozen.int8_compute int8-gemm: this CPU cannot run the int8 GEMM correctly (no VNNI "
      "under the ISA caps: cpu [{}], ZS_MAX_ISA level {}; see ONEDNN_MAX_CPU_ISA too): without "
      "VNNI oneDNN's int8 products saturate. Use auto or dequantize",
      cpu_features_string(), simd_level_name(active_simd_level()));
}

void check_optimizer(const OptimizerConfig& optimizer, float clip_norm) {
  const double inf = std::numeric_limits<double>::max();
  const optim::AdamWConfig& a = optimizer.adamw;
  finite_in("optimizer.schedule.lr", optimizer.schedule.lr, 0.0, inf, false);
  finite_in("optimizer.schedule.min_ratio", optimizer.schedule.min_ratio, 0.0, 1.0, false);
  ZS_CHECK(optimizer.schedule.warmup_steps >= 0 && optimizer.schedule.total_steps >= 0,
           ErrorCode::kInvalidArgument, "warm-up {} and total steps {} must not be negative",
           optimizer.schedule.warmup_steps, optimizer.schedule.total_steps);
  finite_in("optimizer.adamw.beta1", a.beta1, 0.0, 1.0, true);
  finite_in("optimizer.adamw.beta2", a.beta2, 0.0, 1.0, true);
  finite_in("optimizer.adamw.weight_decay", a.weight_decay, 0.0, inf, false);
  ZS_CHECK(std::isfinite(a.eps) && a.eps > 0.0f, ErrorCode::kInvalidArgument,
           "optimizer.adamw.eps {} must be a finite number > 0", a.eps);
  finite_in("optimizer.sgd.momentum", optimizer.sgd.momentum, 0.0, 1.0, true);
  finite_in("optimizer.muon.momentum", optimizer.muon.momentum, 0.0, 1.0, true);
  ZS_CHECK(optimizer.muon.ns_steps >= 1 && optimizer.muon.ns_steps <= 100,
           ErrorCode::kInvalidArgument, "optimizer.muon.ns_steps {} is outside 1..100",
           optimizer.muon.ns_steps);
  ZS_CHECK(optimizer.kind == OptimizerKind::kAdamW || optimizer.kind == OptimizerKind::kSgd ||
               optimizer.kind == OptimizerKind::kMuon,
           ErrorCode::kInvalidArgument, "optimizer.kind {} is not one of adamw, sgd, muon",
           static_cast<int>(optimizer.kind));
  finite_in("optimizer.sgd.weight_decay", optimizer.sgd.weight_decay, 0.0, inf, false);
  ZS_CHECK(!std::isnan(clip_norm) && std::isfinite(clip_norm), ErrorCode::kInvalidArgument,
           "clip_norm {} must be a finite number (<= 0 disables clipping)", clip_norm);
}

// OptimizerConfig::state_fp32: refused where it could do nothing (fp32 states keep every parameter
// in fp32), and bounded so that state_storage_name() fits a checkpoint's manifest.
void check_state_fp32(const OptimizerConfig& o) {
  const std::vector<std::string>& names = o.state_fp32;
  ZS_CHECK(names.empty() || o.state_dtype != optim::StateDType::kF32, ErrorCode::kInvalidArgument,
           "optimizer.state_fp32 [{}] has no effect with state_dtype fp32 (every parameter keeps "
           "fp32 states): name parameters with state_dtype bf16 or int8",
           fmt::join(names, ", "));
  ZS_CHECK(names.size() <= 64, ErrorCode::kInvalidArgument,
           "optimizer.state_fp32 has {} patterns, more than 64", names.size());
  for (const std::string& p : names) {
    ZS_CHECK(!p.empty() && p.size() <= 128 && p.find(',') == std::string::npos,
             ErrorCode::kInvalidArgument,
             "optimizer.state_fp32 pattern '{}' must have 1..128 characters and no comma", p);
  }
}

// [Note: optimizer state storage]: the dtype, the block and the threshold, and AdamW only (SGD's
// momentum has no narrow kernel: refused rather than silently kept in fp32).
void check_state_storage(const OptimizerConfig& o, const KeyNamer& name) {
  using optim::StateDType;
  const StateDType d = o.state_dtype;
  ZS_CHECK(d == StateDType::kF32 || d == StateDType::kBF16 || d == StateDType::kI8,
           ErrorCode::kInvalidArgument, "optimizer.state_dtype {} is not one of fp32, bf16, int8",
           static_cast<int>(d));
  const int64_t b = o.state_block;
  ZS_CHECK(b >= 64 && b <= (int64_t{1} << 20) && (b & (b - 1)) == 0, ErrorCode::kInvalidArgument,
           "{} {} is not a power of two in 64..1048576", name("optimizer.state_block"), b);
  ZS_CHECK(o.state_code == StateCode::kFloat8 || o.state_code == StateCode::kDynamic ||
               o.state_code == StateCode::kLinear,
           ErrorCode::kInvalidArgument,
           "optimizer.state_code {} is not one of float8, dynamic, linear",
           static_cast<int>(o.state_code));
  ZS_CHECK(o.state_min_numel >= 0, ErrorCode::kInvalidArgument, "{} {} must not be negative",
           name("optimizer.state_min_numel"), o.state_min_numel);
  ZS_CHECK(d == StateDType::kF32 || o.kind != OptimizerKind::kSgd, ErrorCode::kInvalidArgument,
           "optimizer.state_dtype {} applies to AdamW's moments: SGD keeps its momentum in fp32 "
           "(use state_dtype fp32 with SGD)",
           optim::state_dtype_name(d));
  ZS_CHECK(d == StateDType::kF32 || o.kind != OptimizerKind::kMuon, ErrorCode::kInvalidArgument,
           "optimizer.state_dtype {} with optimizer muon is not implemented: Muon keeps its "
           "momentum, and AdamW its moments beside it, in fp32 (use state_dtype fp32 with muon)",
           optim::state_dtype_name(d));
  check_state_fp32(o);
}

void check_loss_scale(const optim::LossScalerConfig& l) {
  ZS_CHECK(std::isfinite(l.initial) && l.initial > 0.0f && std::isfinite(l.min_scale) &&
               l.min_scale > 0.0f,
           ErrorCode::kInvalidArgument,
           "loss scale initial {} and min_scale {} must be finite numbers > 0", l.initial,
           l.min_scale);
  finite_in("loss_scale.growth", l.growth, 1.0, 65536.0, false);
  ZS_CHECK(std::isfinite(l.backoff) && l.backoff > 0.0f && l.backoff <= 1.0f,
           ErrorCode::kInvalidArgument, "loss_scale.backoff {} is outside (0, 1]", l.backoff);
  ZS_CHECK(l.growth_interval >= 1 && l.hysteresis >= 1, ErrorCode::kInvalidArgument,
           "loss_scale.growth_interval {} and hysteresis {} must be at least 1", l.growth_interval,
           l.hysteresis);
}

bool power_of_two(int64_t v) { return v >= 1 && (v & (v - 1)) == 0; }

// [Note: world-invariant reduction]: the checks that do not need the world size.
void check_world_invariant(const EngineConfig& c) {
  if (!c.world_invariant) return;
  ZS_CHECK(power_of_two(c.micro_batches), ErrorCode::kInvalidArgument,
           "world_invariant needs a power-of-two number of micro-batches per rank, not {}: the "
           "tree over the global micro-batches must split at every rank's range",
           c.micro_batches);
  ZS_CHECK(c.precision.grad_dtype == DType::kF32, ErrorCode::kInvalidArgument,
           "world_invariant needs fp32 gradients (grad_dtype {}): a rounded partial sum would sit "
           "at another level of the tree at another world size",
           dtype_name(c.precision.grad_dtype));
  ZS_CHECK(!c.zeropp.quantized_gradients, ErrorCode::kInvalidArgument,
           "world_invariant with zero_quantized_gradients (qgZ): its quantized partial sums depend "
           "on the node layout; use one or the other");
}

// [Note: hpZ] and [Note: quantized gradients]: the checks that do not need the world size.
void check_zeropp(const EngineConfig& c, const KeyNamer& name) {
  ZS_CHECK(c.node_size >= 0 && c.node_size <= (1 << 20), ErrorCode::kInvalidArgument,
           "node_size {} is outside 0 (one node) .. 2^20", c.node_size);
  validate_zeropp(c.stage, c.zeropp, name);
}

std::string same_key(std::string_view key) { return std::string(key); }

}  // namespace

void EngineConfig::validate(const KeyNamer& namer) const {
  const KeyNamer& name = namer ? namer : KeyNamer(same_key);
  check_precision(stage, precision);
  check_frozen(frozen);
  ZS_CHECK(micro_batches >= 1, ErrorCode::kInvalidArgument, "{} {} must be at least 1",
           name("micro_batches"), micro_batches);
  ZS_CHECK(prefetch >= 0 && prefetch <= 64, ErrorCode::kInvalidArgument, "{} {} is outside 0..64",
           name("prefetch"), prefetch);
  ZS_CHECK(align >= 1 && align <= 4096, ErrorCode::kInvalidArgument,
           "alignment {} is outside 1..4096 elements", align);
  ZS_CHECK(!(offload.optimizer && stage == ZeroStage::k0), ErrorCode::kInvalidArgument,
           "optimizer offload needs ZeRO stage 1, 2 or 3 (stage 0 keeps full replicas)");
  ZS_CHECK(!(offload.optimizer && optimizer.kind == OptimizerKind::kMuon),
           ErrorCode::kInvalidArgument,
           "optimizer offload with optimizer muon is not implemented: Muon's update runs on the "
           "resident states (use the resident optimizer, or adamw with offload)");
  ZS_CHECK(!(offload.optimizer && optimizer.kind != OptimizerKind::kAdamW),
           ErrorCode::kInvalidArgument, "optimizer offload supports AdamW only");
  ZS_CHECK(
      max_consecutive_skips >= -1 && max_consecutive_skips <= 1000000, ErrorCode::kInvalidArgument,
      "max_consecutive_skips {} is outside -1 (the default) .. 1000000", max_consecutive_skips);
  check_optimizer(optimizer, clip_norm);
  check_state_storage(optimizer, name);
  check_loss_scale(loss_scale);
  ZS_CHECK(optimizer_threads >= 0 && optimizer_threads <= 4096, ErrorCode::kInvalidArgument,
           "optimizer_threads {} is outside 0 (the OpenMP default) .. 4096", optimizer_threads);
  ZS_CHECK(shard_group_size >= 0 && shard_group_size <= (1 << 20), ErrorCode::kInvalidArgument,
           "{} {} is outside 0 (all ranks) .. 2^20", name("shard_group_size"), shard_group_size);
  check_zeropp(*this, name);
  check_world_invariant(*this);
}

void EngineConfig::validate_for_world(int world) const {
  if (world_invariant) {
    ZS_CHECK(power_of_two(world), ErrorCode::kInvalidArgument,
             "world_invariant needs a power-of-two number of ranks, not {}", world);
    ZS_CHECK(shard_group_size == 0 || shard_group_size == world || micro_batches == 1,
             ErrorCode::kInvalidArgument,
             "world_invariant with hybrid sharding (shard group size {}) needs one micro-batch per "
             "rank, not {}: the replica all-reduce would sum across ranks after the micro-batches",
             shard_group_size, micro_batches);
  }
  const bool hpz = zeropp.hpz_partition_size > 1;
  if (!hpz && !zeropp.quantized_gradients) return;
  const int L = node_size > 0 ? node_size : world;  // ranks per node
  ZS_CHECK(world % L == 0, ErrorCode::kInvalidArgument,
           "node_size {} does not divide the world size {}", node_size, world);
  const char* which = hpz ? "zero_hpz_partition_size (hpZ)" : "zero_quantized_gradients (qgZ)";
  ZS_CHECK(shard_group_size == 0 || shard_group_size == world, ErrorCode::kInvalidArgument,
           "{} with hybrid sharding (shard group size {}) is not implemented: use one or the other",
           which, shard_group_size);
  if (!hpz) return;
  const int K = zeropp.hpz_partition_size;
  ZS_CHECK(L < world, ErrorCode::kInvalidArgument,
           "zero_hpz_partition_size {} (hpZ) on one node ({} ranks, node_size {}): the "
           "parameter gathers are node-local already; hpZ needs more than one node",
           K, world, node_size);
  ZS_CHECK(L % K == 0, ErrorCode::kInvalidArgument,
           "zero_hpz_partition_size {} (hpZ) does not divide the {} ranks of a node (node_size): "
           "the secondary gather would leave the node",
           K, L);
}

namespace {

void check_block(const KeyNamer& name, const char* key, int64_t b) {
  ZS_CHECK(b >= 32 && b <= 65536 && (b & (b - 1)) == 0, ErrorCode::kInvalidArgument,
           "{} {} is not a power of two in 32..65536", name(key), b);
}

}  // namespace

// [Note: quantized weights], [Note: hpZ], [Note: quantized gradients]: qwZ at stage 3 only, hpZ's
// K at least 1 and above 1 at stage 3 only, qgZ at stages 2-3 only, the blocks powers of two in
// 32..65536.
void validate_zeropp(ZeroStage stage, const ZeroPPConfig& z, const KeyNamer& namer) {
  const KeyNamer& name = namer ? namer : KeyNamer(same_key);
  const int s = static_cast<int>(stage);
  if (z.quantized_weights) {
    ZS_CHECK(stage == ZeroStage::k3, ErrorCode::kInvalidArgument,
             "{} quantizes stage 3's parameter all-gather: {} {} does not gather parameters (use "
             "stage 3 or turn it off)",
             name("zero_quantized_weights"), name("stage"), s);
    check_block(name, "zero_quantized_weights_block", z.quantized_weights_block);
  }
  const int K = z.hpz_partition_size;
  ZS_CHECK(K >= 1, ErrorCode::kInvalidArgument, "{} {} is not 1 (off) or more",
           name("zero_hpz_partition_size"), K);
  ZS_CHECK(K <= (1 << 20), ErrorCode::kInvalidArgument, "{} {} is above 2^20",
           name("zero_hpz_partition_size"), K);
  ZS_CHECK(K == 1 || stage == ZeroStage::k3, ErrorCode::kInvalidArgument,
           "{} keeps secondary shards of stage 3's gathered parameters: {} {} does not gather "
           "parameters (use stage 3 or set it to 1)",
           name("zero_hpz_partition_size"), name("stage"), s);
  if (!z.quantized_gradients) return;
  ZS_CHECK(stage == ZeroStage::k2 || stage == ZeroStage::k3, ErrorCode::kInvalidArgument,
           "{} quantizes the reduce-scatter of sharded gradients: {} {} keeps whole gradients "
           "(use stage 2 or 3 or turn it off)",
           name("zero_quantized_gradients"), name("stage"), s);
  check_block(name, "zero_quantized_gradients_block", z.quantized_gradients_block);
}

}  // namespace zs
