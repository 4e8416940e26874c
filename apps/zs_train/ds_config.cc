#include "ds_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <initializer_list>

#include <fmt/format.h>

#include "core/error.h"

namespace zs::train {
namespace {

using nlohmann::json;

// Walks one JSON object: every key must be one of `known`; values are read by path so that
// each error names the full key path.
class Section {
 public:
  Section(const json& j, std::string path, const std::string& source)
      : j_(j), path_(std::move(path)), source_(source) {
    if (!j_.is_object()) bad(path_, "must be an object");
  }

  // Fails naming the first key not in `known`.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& [k, v] : j_.items()) {
      if (std::find_if(known.begin(), known.end(), [&](const char* s) { return k == s; }) ==
          known.end()) {
        std::string list;
        for (const char* s : known) list += fmt::format("{}{}", list.empty() ? "" : ", ", s);
        bad(key(k), fmt::format("unknown or unsupported key (zs_train reads {}{})",
                                path_.empty() ? "" : "under " + path_ + ": ", list));
      }
    }
  }

  bool has(const char* k) const { return j_.contains(k) && !is_auto(j_.at(k)); }
  const json& at(const char* k) const { return j_.at(k); }
  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }

  [[noreturn]] void bad(const std::string& key_path, const std::string& why) const {
    fail(ErrorCode::kInvalidArgument, "--deepspeed-config {}: {}: {}", source_, key_path, why);
  }

  static bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

  bool boolean(const char* k) const {
    const json& v = at(k);
    if (!v.is_boolean()) bad(key(k), fmt::format("{} is not true or false", v.dump()));
    return v.get<bool>();
  }
  double number(const char* k) const {
    const json& v = at(k);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      bad(key(k), fmt::format("{} is not a finite number", v.dump()));
    return v.get<double>();
  }
  int64_t integer(const char* k) const {
    const double d = number(k);
    if (d != std::floor(d) || std::fabs(d) > 9e15)
      bad(key(k), fmt::format("{} is not an integer", at(k).dump()));
    return static_cast<int64_t>(d);
  }
  std::string string(const char* k) const {
    const json& v = at(k);
    if (!v.is_string()) bad(key(k), fmt::format("{} is not a string", v.dump()));
    return v.get<std::string>();
  }
  Section sub(const char* k) const { return Section(at(k), key(k), source_); }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string path_;
  std::string source_;
};

// The shortest text that reads back as the same double (and so as the same float).
std::string text(double v) { return fmt::format("{}", v); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void map_zero(const Section& z, DsConfig& out) {
  z.only({"stage", "offload_optimizer", "offload_param", "zero_quantized_weights",
          "zero_hpz_partition_size", "zero_quantized_gradients",
          "zeroshard_quantized_gradients_block"});
  if (z.has("stage"))
    out.settings.push_back({z.key("stage"), "zero-stage", std::to_string(z.integer("stage"))});
  if (z.has("zero_quantized_weights")) {  // ZeRO++ qwZ
    out.settings.push_back({z.key("zero_quantized_weights"), "zero-quantized-weights",
                            z.boolean("zero_quantized_weights") ? "true" : "false", true});
  }
  if (z.has("zero_hpz_partition_size")) {  // ZeRO++ hpZ
    out.settings.push_back({z.key("zero_hpz_partition_size"), "zero-hpz-partition-size",
                            std::to_string(z.integer("zero_hpz_partition_size"))});
  }
  if (z.has("zero_quantized_gradients")) {  // ZeRO++ qgZ
    out.settings.push_back({z.key("zero_quantized_gradients"), "zero-quantized-gradients",
                            z.boolean("zero_quantized_gradients") ? "true" : "false", true});
  }
  if (z.has("zeroshard_quantized_gradients_block")) {
    out.settings.push_back({z.key("zeroshard_quantized_gradients_block"),
                            "zero-quantized-gradients-block",
                            std::to_string(z.integer("zeroshard_quantized_gradients_block"))});
  }
  if (z.has("offload_optimizer")) {
    const Section off = z.sub("offload_optimizer");
    off.only({"device", "pin_memory"});
    if (off.has("device")) {
      const std::string dev = off.string("device");
      if (dev != "cpu" && dev != "none")
        off.bad(
            off.key("device"),
            fmt::format("\"{}\" is not supported (zs_train offloads to \"cpu\" or \"none\")", dev));
      out.settings.push_back(
          {off.key("device"), "offload-optimizer", dev == "cpu" ? "true" : "false", true});
    }
    if (off.has("pin_memory")) {
      (void)off.boolean("pin_memory");
      out.notes.push_back(off.key("pin_memory") +
                          " has no effect: the offloaded state lives in one host arena");
    }
  }
  if (z.has("offload_param")) {
    const Section off = z.sub("offload_param");
    off.only({"device", "pin_memory"});
    if (off.has("device") && off.string("device") != "none")
      off.bad(off.key("device"),
              "parameter offload is not supported (zs_train offloads the optimizer state only: "
              "zero_optimization.offload_optimizer)");
  }
}

// DeepSpeed's bf16.bf16_optimizer_states (AdamW's moments in bf16, or fp32 when false) and
// bf16_master_weights_and_grads (false only: the master stays fp32).
void map_bf16_states(const Section& b, DsConfig& out) {
  if (b.has("bf16_optimizer_states")) {
    out.settings.push_back({b.key("bf16_optimizer_states"), "optimizer-state-dtype",
                            b.boolean("bf16_optimizer_states") ? "bf16" : "fp32"});
  }
  if (b.has("bf16_master_weights_and_grads") && b.boolean("bf16_master_weights_and_grads"))
    b.bad(b.key("bf16_master_weights_and_grads"),
          "true is not supported: the master weights stay fp32 (bf16 optimizer states do not "
          "need bf16 master weights here)");
}

// The state keys under optimizer.params (AdamW): bitsandbytes' optim_bits (8: int8 states, 32:
// fp32), block_wise (true only) and min_8bit_size, and zeroshard's state block and fp32 names.
void map_state_params(const Section& p, DsConfig& out) {
  if (p.has("optim_bits")) {
    const int64_t bits = p.integer("optim_bits");
    if (bits != 8 && bits != 32)
      p.bad(p.key("optim_bits"), fmt::format("{} is not 8 or 32 (bf16 states: "
                                             "bf16.bf16_optimizer_states)",
                                             bits));
    out.settings.push_back(
        {p.key("optim_bits"), "optimizer-state-dtype", bits == 8 ? "int8" : "fp32"});
  }
  if (p.has("block_wise")) {
    if (!p.boolean("block_wise"))
      p.bad(p.key("block_wise"),
            "false (one scale per tensor) is not supported: int8 states are "
            "block-wise");
    out.notes.push_back(p.key("block_wise") + " has no effect: int8 states are always block-wise");
  }
  if (p.has("min_8bit_size"))
    out.settings.push_back({p.key("min_8bit_size"), "optimizer-state-min-numel",
                            std::to_string(p.integer("min_8bit_size"))});
  if (p.has("zeroshard_state_block"))
    out.settings.push_back({p.key("zeroshard_state_block"), "optimizer-state-block",
                            std::to_string(p.integer("zeroshard_state_block"))});
  if (p.has("zeroshard_state_code"))
    out.settings.push_back(
        {p.key("zeroshard_state_code"), "optimizer-state-code", p.string("zeroshard_state_code")});
  if (p.has("zeroshard_state_fp32")) {
    const json& v = p.at("zeroshard_state_fp32");
    std::string list;
    const bool strings =
        v.is_array() && !v.empty() &&
        std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); });
    for (size_t i = 0; strings && i < v.size(); ++i) {
      const std::string e = v[i].get<std::string>();
      if (e.empty() || e.find(',') != std::string::npos)
        p.bad(p.key("zeroshard_state_fp32"),
              fmt::format("pattern \"{}\" is empty or has a comma", e));
      list += (i ? "," : "") + e;
    }
    if (!strings)
      p.bad(p.key("zeroshard_state_fp32"),
            fmt::format("{} is not a non-empty list of name patterns", v.dump()));
    out.settings.push_back({p.key("zeroshard_state_fp32"), "optimizer-state-fp32", list});
  }
}

void map_precision(const Section& root, DsConfig& out) {
  bool bf16 = false, fp16 = false, any = false;
  if (root.has("bf16")) {
    const Section b = root.sub("bf16");
    b.only({"enabled", "bf16_optimizer_states", "bf16_master_weights_and_grads"});
    if (b.has("enabled")) {
      bf16 = b.boolean("enabled");
      any = true;
    }
    map_bf16_states(b, out);
  }
  if (root.has("fp16")) {
    const Section f = root.sub("fp16");
    f.only({"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
            "min_loss_scale", "consecutive_hysteresis", "auto_cast"});
    if (f.has("enabled")) {
      fp16 = f.boolean("enabled");
      any = true;
    }
    for (const char* k : {"consecutive_hysteresis", "auto_cast"}) {
      if (f.has(k) && f.boolean(k)) f.bad(f.key(k), "true is not supported (false only)");
    }
    if (fp16) {
      if (f.has("loss_scale"))
        out.settings.push_back({f.key("loss_scale"), "loss-scale", text(f.number("loss_scale"))});
      if (f.has("initial_scale_power"))
        out.settings.push_back({f.key("initial_scale_power"), "initial-scale-power",
                                std::to_string(f.integer("initial_scale_power"))});
      if (f.has("loss_scale_window"))
        out.settings.push_back({f.key("loss_scale_window"), "loss-scale-window",
                                std::to_string(f.integer("loss_scale_window"))});
      if (f.has("hysteresis"))
        out.settings.push_back(
            {f.key("hysteresis"), "hysteresis", std::to_string(f.integer("hysteresis"))});
      if (f.has("min_loss_scale"))
        out.settings.push_back(
            {f.key("min_loss_scale"), "min-loss-scale", text(f.number("min_loss_scale"))});
    }
  }
  if (bf16 && fp16)
    root.bad("fp16.enabled and bf16.enabled", "both are true: enable one of them (or neither)");
  if (any) {
    const char* dt = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
    out.settings.push_back({bf16 ? "bf16.enabled" : "fp16.enabled", "dtype", dt});
  }
}

void map_optimizer(const Section& o, DsConfig& out) {
  o.only({"type", "params"});
  std::string kind = "adamw";
  if (o.has("type")) {
    const std::string t = lower(o.string("type"));
    if (t == "sgd" || t == "muon") {
      kind = t;
    } else if (t != "adamw" && t != "adam") {
      o.bad(o.key("type"),
            fmt::format("\"{}\" is not supported (AdamW, Adam, SGD, Muon)", o.string("type")));
    }
    out.settings.push_back({o.key("type"), "optimizer", kind});
  }
  if (!o.has("params")) return;
  const Section p = o.sub("params");
  if (kind == "sgd") {
    p.only({"lr", "momentum"});
  } else if (kind == "muon") {  // momentum and ns_steps are Muon's; the rest its AdamW's
    p.only({"lr", "momentum", "ns_steps", "betas", "eps", "weight_decay"});
  } else {
    p.only({"lr", "betas", "eps", "weight_decay", "adam_w_mode", "optim_bits", "block_wise",
            "min_8bit_size", "zeroshard_state_block", "zeroshard_state_code",
            "zeroshard_state_fp32"});
    map_state_params(p, out);
  }
  if (p.has("lr")) out.settings.push_back({p.key("lr"), "lr", text(p.number("lr"))});
  if (p.has("momentum"))
    out.settings.push_back({p.key("momentum"), kind == "muon" ? "muon-momentum" : "momentum",
                            text(p.number("momentum"))});
  if (p.has("ns_steps"))
    out.settings.push_back({p.key("ns_steps"), "muon-ns-steps", text(p.number("ns_steps"))});
  if (p.has("eps")) out.settings.push_back({p.key("eps"), "adam-eps", text(p.number("eps"))});
  if (p.has("weight_decay"))
    out.settings.push_back({p.key("weight_decay"), "weight-decay", text(p.number("weight_decay"))});
  if (p.has("adam_w_mode") && !p.boolean("adam_w_mode"))
    p.bad(p.key("adam_w_mode"), "false (L2-regularised Adam) is not supported: decoupled only");
  if (p.has("betas")) {
    const json& b = p.at("betas");
    if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
      p.bad(p.key("betas"), fmt::format("{} is not a pair of numbers [beta1, beta2]", b.dump()));
    out.settings.push_back({p.key("betas") + "[0]", "beta1", text(b[0].get<double>())});
    out.settings.push_back({p.key("betas") + "[1]", "beta2", text(b[1].get<double>())});
  }
}

void map_scheduler(const Section& s, DsConfig& out) {
  s.only({"type", "params"});
  if (!s.has("type")) s.bad(s.key("type"), "missing (WarmupLR or WarmupCosineLR)");
  const std::string type = s.string("type");
  const bool cosine = type == "WarmupCosineLR";
  if (!cosine && type != "WarmupLR")
    s.bad(s.key("type"), fmt::format("\"{}\" is not supported (WarmupLR: linear warm-up then "
                                     "constant; WarmupCosineLR: linear warm-up then cosine)",
                                     type));
  out.settings.push_back({s.key("type"), "lr-schedule", cosine ? "cosine" : "constant"});
  const json none = json::object();
  const Section p = s.has("params") ? s.sub("params") : Section(none, s.key("params"), s.source());
  if (cosine) {
    p.only({"warmup_num_steps", "total_num_steps", "cos_min_ratio", "warmup_min_ratio",
            "warmup_type"});
  } else {
    p.only({"warmup_num_steps", "warmup_max_lr", "warmup_min_lr", "warmup_type"});
  }
  // DeepSpeed's default warm-up is logarithmic; ours is linear, so the file must say so.
  if (!p.has("warmup_type") || p.string("warmup_type") != "linear")
    p.bad(p.key("warmup_type"),
          "must be \"linear\" (zs_train warms up linearly; DeepSpeed's default is \"log\")");
  for (const char* k : {"warmup_min_lr", "warmup_min_ratio"}) {
    if (p.has(k) && p.number(k) != 0.0) p.bad(p.key(k), "must be 0 (warm-up starts from 0)");
  }
  if (p.has("warmup_num_steps"))
    out.settings.push_back(
        {p.key("warmup_num_steps"), "warmup", std::to_string(p.integer("warmup_num_steps"))});
  if (p.has("warmup_max_lr"))
    out.settings.push_back({p.key("warmup_max_lr"), "lr", text(p.number("warmup_max_lr"))});
  if (p.has("total_num_steps"))
    out.settings.push_back(
        {p.key("total_num_steps"), "steps", std::to_string(p.integer("total_num_steps"))});
  if (p.has("cos_min_ratio"))
    out.settings.push_back(
        {p.key("cos_min_ratio"), "min-lr-ratio", text(p.number("cos_min_ratio"))});
}

}  // namespace

DsConfig map_ds_config(const json& cfg, const std::string& source) {
  DsConfig out;
  const Section root(cfg, "", source);
  root.only({"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
             "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "zero_optimization",
             "bf16", "fp16", "optimizer", "scheduler"});
  if (root.has("train_micro_batch_size_per_gpu"))
    out.settings.push_back({"train_micro_batch_size_per_gpu", "batch",
                            std::to_string(root.integer("train_micro_batch_size_per_gpu"))});
  if (root.has("gradient_accumulation_steps"))
    out.settings.push_back({"gradient_accumulation_steps", "gradient-accumulation-steps",
                            std::to_string(root.integer("gradient_accumulation_steps"))});
  if (root.has("train_batch_size")) {
    out.train_batch_size = root.integer("train_batch_size");
    if (*out.train_batch_size < 1) root.bad("train_batch_size", "must be at least 1");
  }
  if (root.has("gradient_clipping"))
    out.settings.push_back({"gradient_clipping", "clip", text(root.number("gradient_clipping"))});
  if (root.has("steps_per_print"))
    out.settings.push_back(
        {"steps_per_print", "log-every", std::to_string(root.integer("steps_per_print"))});
  if (root.has("wall_clock_breakdown") && root.boolean("wall_clock_breakdown"))
    root.bad("wall_clock_breakdown", "true is not supported (false only)");
  if (root.has("zero_optimization")) map_zero(root.sub("zero_optimization"), out);
  map_precision(root, out);
  if (root.has("optimizer")) map_optimizer(root.sub("optimizer"), out);
  if (root.has("scheduler")) map_scheduler(root.sub("scheduler"), out);
  return out;
}

DsConfig read_ds_config(const std::string& path) {
  std::ifstream in(path);
  ZS_CHECK(in.good(), ErrorCode::kNotFound, "--deepspeed-config {} cannot be read", path);
  json cfg;
  try {
    cfg = json::parse(in);
  } catch (const json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "--deepspeed-config {}: not valid JSON: {}", path, e.what());
  }
  return map_ds_config(cfg, path);
}

}  // namespace zs::train
