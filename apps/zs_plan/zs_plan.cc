// zs_plan: per-rank memory of a training configuration, by category, before launching it.
// It combines the model's figures from nn (models/gpt/transformer_shapes.h: each unit's parameter
// sizes, and the activations zeroshard's GPT allocates, nn/gpt_activations.h) with the runtime's
// plan of model states and communication buffers (planner/memory_plan.h, what the engine
// allocates): to the byte. It takes zs_train's flags for the run (apps/common/model_options.h,
// engine_options.h), with their meanings and defaults. docs/memory.md explains the arithmetic and
// the output.
//
//   zs_plan --params 7.5e9 --ranks 64 --zero-stage 1 --dtype fp16 --grad-dtype fp16
//   zs_plan --model llama-7b --ranks 8 --zero-stage 3 --dtype bf16 --global-batch 16 --fit 80
//   zs_plan --model gpt2-medium --ranks 8 --zero-stage 3 --dtype bf16 --device cuda --fit 80
//   zs_plan --model gpt-6b --ranks 2 --zero-stage 3 --dtype bf16 --lora-rank 8 --base-dtype int8
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/engine_options.h"
#include "apps/common/model_options.h"
#include "checkpoint/checkpoint_io.h"
#include "core/dtype.h"
#include "core/error.h"
#include "interop/hf_config.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/transformer_shapes.h"
#include "nn/threads.h"
#include "planner/memory_plan.h"
#include "planner/transformer_plan.h"
#include "sharding/frozen_layout.h"
#include "zs_plan_comm.h"

namespace po = boost::program_options;

namespace {

constexpr double kGB = 1e9;

struct BadFlag : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The frozen base's encoded bytes on one rank holding all of it, without alignment or shard
// padding ([Note: frozen records] in sharding/frozen_layout.h): int8, numel + 4 rows per matrix
// and the rest in the compute dtype; a float dtype, numel times its size.
int64_t frozen_record_bytes(const zs::ModelDesc& d, zs::DType storage, zs::DType compute) {
  int64_t b = 0;
  for (const auto& unit : d.frozen)
    for (const zs::FrozenRecord& r : zs::compute_frozen_layout(unit, storage, compute, 1).records)
      b += r.bytes;
  return b;
}

std::string human(int64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / kGB); }

std::string grouped(int64_t v) {
  std::string d = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return v < 0 ? "-" + out : out;
}

// nn/gemm.h [Note: GEMM paths]; auto asks this machine (a oneDNN probe).
zs::nn::CpuGemm parse_cpu_gemm(const std::string& s) {
  if (s == "native") return zs::nn::CpuGemm::kOnednn;
  if (s == "widened") return zs::nn::CpuGemm::kOnednnWidened;
  if (s == "eigen") return zs::nn::CpuGemm::kEigen;
  if (s != "auto")
    throw BadFlag(fmt::format("--cpu-gemm '{}' is not one of auto, native, widened, eigen", s));
  return zs::nn::this_process_cpu_gemm();
}

const char* device_name(zs::DeviceKind d) { return d == zs::DeviceKind::kCuda ? "cuda" : "cpu"; }

// "gpt", "llama", or "qwen3" for the Llama family with q/k norms.
const char* family_name(const zs::nn::TransformerShape& s) {
  if (s.family == zs::nn::TransformerFamily::kGpt) return "gpt";
  return s.qk_norm ? "qwen3" : "llama";
}

struct Options {
  std::string model_name;
  zs::ModelDesc model;
  std::optional<zs::nn::TransformerShape> shape;  // --model or dimensions: activations counted
  zs::PlanConfig config;
  int64_t frozen_record_bytes = 0;  // the base's encoded bytes, unpadded (frozen_record_bytes())
  std::optional<double> fit_gb;
  bool json = false;
  int fit_rows = 12;
  std::string optimizer;                                // --optimizer, as given: adamw | sgd
  zs::nn::CpuGemm cpu_gemm = zs::nn::CpuGemm::kOnednn;  // --cpu-gemm, resolved
  int threads = 1;  // --threads, resolved: the team oneDNN sizes the GEMM scratchpads for
  int64_t head_chunk = zs::nn::kGptHeadChunkAuto;                       // --head-chunk
  zs::nn::GptAttention attention = zs::nn::GptRunSettings{}.attention;  // --attention
  bool save_async = false;   // --save-async: count the checkpoint's host snapshot
  bool memory_tier = false;  // --save-memory-every N > 0: count the memory tier's checkpoints

  // The rows of one LM head chunk at M tokens per micro-batch (M: whole; always on CUDA).
  int64_t head_rows(int64_t M) const {
    if (!shape || config.device == zs::DeviceKind::kCuda) return M;
    return zs::nn::gpt_head_chunk_rows(M, shape->vocab, head_chunk);
  }
};

// ", LoRA r=8 on qkv,fc, frozen base in int8", or nothing without adapters.
std::string describe_lora(const Options& o) {
  if (!o.shape || !o.shape->adapters.lora.enabled()) return "";
  const std::string targets = zs::nn::format_gpt_lora_targets(o.shape->adapters.lora.targets);
  const zs::EngineConfig& e = o.config.engine;
  return fmt::format(
      ", LoRA r={} on {}, frozen base in {}{}", o.shape->adapters.lora.rank, targets,
      zs::dtype_name(e.frozen.storage_or(e.precision.param_dtype)),
      e.frozen.storage == zs::DType::kI8
          ? fmt::format(" computed by {}", e.frozen.hands_int8() ? "the int8 GEMM" : "dequantizing")
          : std::string());
}

std::string describe_config(const Options& o) {
  const zs::EngineConfig& e = o.config.engine;
  return fmt::format(
      "{} ranks ({} per node) on {}{}, ZeRO stage {}, {} params, {} grads, {}, offload {}, "
      "activation checkpointing {}, {} micro-batch(es){}",
      o.config.world, o.config.ranks_per_node, device_name(o.config.device),
      o.config.device == zs::DeviceKind::kCpu ? fmt::format(" ({} thread(s) per rank)", o.threads)
                                              : std::string(),
      static_cast<int>(e.stage), zs::dtype_name(e.precision.param_dtype),
      zs::dtype_name(e.precision.grad_dtype),
      e.optimizer.kind == zs::OptimizerKind::kAdamW
          ? "AdamW with " + zs::state_storage_name(e.optimizer) + " states"
      : e.optimizer.kind == zs::OptimizerKind::kMuon
          ? "Muon + AdamW (" + zs::optimizer_rules(e.optimizer) + ")"
          : std::string("SGD"),
      e.offload.optimizer ? "on" : "off", o.config.checkpoint_activations ? "on" : "off",
      e.micro_batches, describe_lora(o));
}

// Master weights and optimizer states (Adam m and v, or SGD's momentum) wherever they live (on the
// device, or on the host when offloaded).
struct OptimizerStateBytes {
  int64_t master = 0, optimizer = 0;
};
OptimizerStateBytes optimizer_state_bytes(const zs::MemoryPlan& p) {
  OptimizerStateBytes b;
  for (const zs::UnitBufferPlan& u : p.buffers.units) {
    b.master += u.master_bytes;
    b.optimizer += u.exp_avg_bytes + u.exp_avg_sq_bytes;
  }
  return b;
}

double per_param(int64_t bytes, int64_t params) {
  return params > 0 ? static_cast<double>(bytes) / static_cast<double>(params) : 0.0;
}

nlohmann::json plan_json(const zs::MemoryPlan& p) {
  using zs::MemCategory;
  nlohmann::json j;
  j["params_bytes"] = p.bytes(MemCategory::kParams);
  j["params_full_bytes"] = p.params_full_bytes;
  j["params_shard_bytes"] = p.params_shard_bytes;
  j["grads_bytes"] = p.bytes(MemCategory::kGrads);
  j["master_bytes"] = p.bytes(MemCategory::kMaster);
  j["optimizer_bytes"] = p.bytes(MemCategory::kOptimizer);
  j["frozen_bytes"] = p.bytes(MemCategory::kFrozen);
  j["frozen_convert_bytes"] = p.buffers.convert_bytes;
  j["muon_u_bytes"] = p.buffers.muon_u_bytes;
  j["muon_newton_schulz_bytes"] = p.buffers.muon_ns_bytes;
  const OptimizerStateBytes s = optimizer_state_bytes(p);
  j["optimizer_bytes_per_trainable_param"] = per_param(s.optimizer, p.num_params);
  j["master_bytes_per_trainable_param"] = per_param(s.master, p.num_params);
  j["activations_bytes"] = p.bytes(MemCategory::kActivations);
  j["comm_buffers_bytes"] = p.bytes(MemCategory::kCommBuffers);
  j["host_offload_bytes"] = p.host_bytes();
  j["padding_bytes"] = p.padding_bytes();
  j["reserve_bytes"] = p.reserve_bytes;
  j["model_states_bytes"] = p.model_states_bytes();
  j["device_total_bytes"] = p.device_bytes();
  const zs::ActivationPlan& a = p.activations;
  j["activations"] = {{"counted", a.counted},
                      {"exact", a.exact},
                      {"micro_batch_sequences", a.micro_batch},
                      {"per_layer_bytes", a.per_layer},
                      {"per_layer_checkpointed_bytes", a.per_layer_checkpointed},
                      {"inputs_bytes", a.inputs},
                      {"blocks_bytes", a.blocks},
                      {"recompute_bytes", a.recompute},
                      {"head_bytes", a.head},
                      {"workspace_bytes", a.workspace},
                      {"gemm_workspace_bytes", a.gemm_workspace},
                      {"gemm_scratchpads_bytes", a.gemm_scratchpads},
                      {"pinned_host_bytes", a.pinned_host}};
  return j;
}

// ---- The output: the table ----

// One row of the table: name, bytes, GB and a note.
void row(const char* name, int64_t b, const std::string& note) {
  std::printf("  %-24s %18s %10s   %s\n", name, grouped(b).c_str(), human(b).c_str(), note.c_str());
}

// The model and configuration lines above the table.
void print_heading(const Options& o, const zs::MemoryPlan& p) {
  const double psi = static_cast<double>(p.num_params);
  if (p.num_frozen_params > 0) {
    std::printf(
        "model: %s, %.4g parameters: %s trainable (%s padded) and %s frozen, in %zu units\n",
        o.model_name.c_str(), psi + static_cast<double>(p.num_frozen_params),
        grouped(p.num_params).c_str(), grouped(p.num_padded_params).c_str(),
        grouped(p.num_frozen_params).c_str(), o.model.units.size());
  } else {
    std::printf("model: %s, %.4g parameters (%s) in %zu units, %s padded\n", o.model_name.c_str(),
                psi, grouped(p.num_params).c_str(), o.model.units.size(),
                grouped(p.num_padded_params).c_str());
  }
  std::printf("config: %s\n\n", describe_config(o).c_str());
  std::printf("  %-24s %18s %10s   %s\n", "per rank", "bytes", "GB", "");
}

// Parameters, gradients, master weights and optimizer states.
void print_trainable_rows(const Options& o, const zs::MemoryPlan& p) {
  using zs::MemCategory;
  const zs::EngineConfig& e = o.config.engine;
  const int stage = static_cast<int>(e.stage);
  const bool off = e.offload.optimizer;
  row("parameters", p.bytes(MemCategory::kParams),
      stage == 3
          ? fmt::format("shard (full replica {} GB, gathered per unit)", human(p.params_full_bytes))
          : fmt::format("full replica (shard would be {} GB)", human(p.params_shard_bytes)));
  row("gradients", p.bytes(MemCategory::kGrads), stage >= 2 ? "shard" : "full buffer");
  const OptimizerStateBytes s = optimizer_state_bytes(p);
  const int64_t master = s.master, optim = s.optimizer;
  const std::string where = stage >= 1 ? "shard" : "full";
  auto per_trainable = [&](int64_t b) {
    return fmt::format("{:.2f} bytes/trainable param", per_param(b, p.num_params));
  };
  row("master weights", off ? 0 : master,
      master == 0 ? "none: fp32 parameters are their own master"
                  : fmt::format("{}, {}", off ? human(master) + " GB on the host" : where,
                                per_trainable(master)));
  row("optimizer states", off ? 0 : optim,
      fmt::format("{}, {}, {}", off ? human(optim) + " GB on the host" : where,
                  zs::state_storage_name(e.optimizer), per_trainable(optim)));
}

// The frozen base's row (LoRA fine-tunes only).
void print_frozen_row(const Options& o, const zs::MemoryPlan& p) {
  using zs::MemCategory;
  const zs::EngineConfig& e = o.config.engine;
  const int stage = static_cast<int>(e.stage);
  const zs::DType compute = e.precision.param_dtype;
  const zs::DType storage = e.frozen.storage_or(compute);
  const int64_t whole = p.bytes(MemCategory::kFrozen) * (stage == 3 ? p.world : 1);
  const std::string how =
      storage == zs::DType::kI8
          ? fmt::format("int8 matrices + fp32 row scales, vectors in {}", zs::dtype_name(compute))
          : std::string(zs::dtype_name(storage));
  row("frozen base", p.bytes(MemCategory::kFrozen),
      fmt::format("{}: {}; {} bytes unpadded, {:.2f} bytes/frozen param",
                  stage == 3 ? fmt::format("shard of {} GB, gathered per unit", human(whole))
                             : std::string("full copy"),
                  how, grouped(o.frozen_record_bytes), per_param(whole, p.num_frozen_params)));
}

// The activations' row and, when counted, their breakdown.
void print_activation_rows(const Options& o, const zs::MemoryPlan& p) {
  const zs::ActivationPlan& a = p.activations;
  std::string anote = "not counted: give a transformer shape (--model or --layers ...)";
  if (a.counted) {
    anote =
        fmt::format("{}, {} seq x {} tokens per micro-batch",
                    a.exact ? (o.config.device == zs::DeviceKind::kCuda ? "exact (our GPT on CUDA)"
                                                                        : "exact (our GPT)")
                            : "estimate",
                    a.micro_batch, a.tokens / a.micro_batch);
  }
  row("activations", p.bytes(zs::MemCategory::kActivations), anote);
  if (!a.counted) return;
  std::printf("  %-24s %18s %10s   per layer %s GB kept, %s GB checkpointed\n", "", "", "",
              human(a.per_layer).c_str(), human(a.per_layer_checkpointed).c_str());
  std::string gemm;
  if (a.gemm_workspace > 0) gemm += " + GEMM workspace " + human(a.gemm_workspace);
  if (a.gemm_scratchpads > 0) gemm += " + oneDNN scratchpads " + human(a.gemm_scratchpads);
  std::printf(
      "  %-24s %18s %10s   blocks %s + recompute %s + head %s + workspace %s + "
      "inputs %s%s GB\n",
      "", "", "", human(a.blocks).c_str(), human(a.recompute).c_str(), human(a.head).c_str(),
      human(a.workspace).c_str(), human(a.inputs).c_str(), gemm.c_str());
  if (!o.shape) return;
  // [Note: chunked head] in nn/lm_head.h: the head's fp32 logits, one chunk of rows at a time.
  const int64_t M = a.tokens, V = o.shape->vocab, R = o.head_rows(M);
  const std::string whole = human(M * V * 4);
  if (R == M) {
    std::printf("  %-24s %18s %10s   head logits [%ld, %ld] fp32 %s GB, whole (--head-chunk %s)\n",
                "", "", "", static_cast<long>(M), static_cast<long>(V), whole.c_str(),
                o.head_chunk == zs::nn::kGptHeadChunkAuto ? "auto: not above 256 MiB" : "off");
  } else {
    std::printf(
        "  %-24s %18s %10s   head logits [%ld, %ld] fp32 %s GB: %ld chunks of %ld of the %ld "
        "rows (whole: %s GB)\n",
        "", "", "", static_cast<long>(R), static_cast<long>(V), human(R * V * 4).c_str(),
        static_cast<long>((M + R - 1) / R), static_cast<long>(R), static_cast<long>(M),
        whole.c_str());
  }
}

// The communication and prefetch buffers, e.g. "1 x 0.01 GB fp32 unit-gradient scratch, ...".
std::string buffers_note(const zs::BufferPlan& b) {
  std::string parts;
  auto part = [&](int count, int64_t each, const char* what) {
    if (count == 0) return;
    parts += fmt::format("{}{} x {} GB {}", parts.empty() ? "" : ", ", count, human(each), what);
  };
  part(b.grad_scratch_count, b.grad_scratch_bytes, "fp32 unit-gradient scratch");
  part(b.send_count, b.send_bytes, "reduce-scatter send");
  part(b.recv_count, b.recv_bytes, "reduce-scatter receive");
  part(b.lane_area_count, b.lane_area_bytes, b.lane_area_label.c_str());
  part(b.gather_count, b.gather_bytes, "gather/prefetch");
  part(b.convert_bytes > 0 ? 1 : 0, b.convert_bytes, "frozen base conversion");
  part(b.muon_u_bytes > 0 ? 1 : 0, b.muon_u_bytes, "Muon gathered u");
  part(b.muon_ns_bytes > 0 ? 1 : 0, b.muon_ns_bytes, "Muon Newton-Schulz");
  if (b.ctrl_bytes > 0) parts += fmt::format(", {} bytes device control", b.ctrl_bytes);
  return parts;
}

// The device and host totals, the model states and their padding.
void print_totals(const Options& o, const zs::MemoryPlan& p) {
  using zs::MemCategory;
  const bool off = o.config.engine.offload.optimizer;
  const zs::BufferPlan& b = p.buffers;
  std::printf("  %s\n", std::string(100, '-').c_str());
  row("device total", p.device_bytes(), "per GPU");
  row("host (offloaded)", p.host_bytes(),
      off ? (b.host_staging_bytes > 0
                 ? fmt::format("fp32 master + Adam m, v, and {} GB gradient/parameter staging, in "
                               "pinned host memory",
                               human(b.host_staging_bytes))
                 : std::string("fp32 master + Adam m, v in pinned host memory"))
          : "");
  if (o.save_async)
    row("checkpoint snapshot", zs::checkpoint_snapshot_bytes(p, o.config.engine),
        "--save-async: host memory per rank, beside the above (rank 0's shard file)");
  if (o.memory_tier)
    row("memory-tier checkpoints", zs::memory_tier_bytes(p, o.config.engine),
        "--save-memory-every: /dev/shm (RAM) per rank, two shard files during a save");
  if (p.activations.pinned_host > 0)
    row("host (model, pinned)", p.activations.pinned_host,
        "the GPT's token staging and loss/logits read-back");
  if (p.num_frozen_params > 0) {
    const int64_t trainable = p.model_states_bytes() - p.bytes(MemCategory::kFrozen);
    row("model states", p.model_states_bytes(),
        fmt::format("params + grads + master + optimizer + frozen base; trainable {:.2f} "
                    "bytes/trainable param",
                    per_param(trainable, p.num_params)));
  } else {
    row("model states", p.model_states_bytes(),
        fmt::format(
            "params + grads + master + optimizer, {:.2f} bytes/param",
            static_cast<double>(p.model_states_bytes()) / static_cast<double>(p.num_params)));
  }
  row("  of which padding", p.padding_bytes(), "alignment and shard padding");
}

void print_table(const Options& o, const zs::MemoryPlan& p) {
  print_heading(o, p);
  print_trainable_rows(o, p);
  if (p.num_frozen_params > 0) print_frozen_row(o, p);
  print_activation_rows(o, p);
  row("comm/prefetch buffers", p.bytes(zs::MemCategory::kCommBuffers), buffers_note(p.buffers));
  row("framework reserve", p.reserve_bytes, "--reserve-gb (CUDA context, library workspaces)");
  print_totals(o, p);
}

// ---- Phase 1: the flags ----

// zs_train's flags that describe the run (apps/common/model_options.h, engine_options.h), with the
// same names, meanings and defaults, and zs_plan's own: the model description, the cluster and
// the output.
void declare_options(po::options_description& all) {
  po::options_description plan("zs_plan's own");
  // clang-format off
  plan.add_options()
      ("help,h", "show this help")
      ("params", po::value<double>(), "bare parameter count (e.g. 7.5e9), split into ~equal units")
      ("model", po::value<std::string>(),
       "gpt2 | gpt2-medium | gpt2-large | gpt2-xl | gpt-6b | llama-7b | llama-3-8b | "
       "llama-3.2-1b | qwen3-0.6b")
      ("from-hf", po::value<std::string>(),
       "the model a Hugging Face directory's config.json describes (GPT-2, Llama, Mistral, "
       "Qwen2, Qwen3; a rotary model's context: --context, default max_position_embeddings)")
      ("ranks", po::value<int>()->default_value(1), "world size N")
      ("ranks-per-node", po::value<int>(), "ranks per node (default: all ranks on one node)")
      ("global-batch", po::value<int64_t>(), "sequences per optimizer step over all ranks, "
       "instead of --batch: the micro-batch is N / (ranks x gradient-accumulation steps)")
      ("offload", po::bool_switch(), "alias of --offload-optimizer")
      ("reserve-gb", po::value<double>()->default_value(0.0),
       "per-device framework reserve in GB (e.g. 0.5-1 for the CUDA context)")
      ("cpu-gemm", po::value<std::string>()->default_value("auto"),
       "auto | native | widened | eigen: how the CPU GPT's bf16 products run (native: oneDNN's "
       "bf16 kernels; widened: operands widened to fp32 into a GEMM workspace, AVX2 CPUs; auto: "
       "what this machine does); oneDNN's scratchpads are this machine's")
      ("fit", po::value<double>(), "list the cheapest configurations whose device total fits "
       "in this many GB per device")
      ("save-async", po::bool_switch(), "as zs_train's --save-async: count the checkpoint's "
       "host snapshot per rank (its shard file: fp32 master and optimizer states)")
      ("save-memory-every", po::value<int64_t>()->default_value(0), "as zs_train's "
       "--save-memory-every: N > 0 counts the memory tier's checkpoints in /dev/shm per rank")
      ("json", "print one JSON object instead of the table");
  // clang-format on
  zs::plan::add_comm_options(plan);  // the communication per step (docs/scaling.md)
  po::options_description model(
      "Model, as zs_train's (without --params, --model or --from-hf: zs_train's default, 4 "
      "layers, width 128, 4 heads, context 128, vocab 256; these flags override the model's)");
  zs::apps::add_architecture_options(model, nullptr, true);
  po::options_description batch("Batch and compute, as zs_train's");
  zs::apps::add_batch_options(batch);
  po::options_description engine("Engine: sharding and precision, as zs_train's");
  zs::apps::add_engine_options(engine);
  po::options_description states("Optimizer states, as zs_train's");
  zs::apps::add_optimizer_state_options(states);
  po::options_description finetune("Fine-tuning (LoRA, frozen base), as zs_train's");
  zs::apps::add_finetune_options(finetune);
  all.add(plan).add(model).add(batch).add(engine).add(states).add(finetune);
}

// The flags of the command line; BadFlag for what Boost refuses.
po::variables_map parse_flags(int argc, char** argv, const po::options_description& desc) {
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw BadFlag(e.what());
  }
  return vm;
}

// --from-hf DIR: the architecture DIR/config.json describes (interop/hf_config.h), with --context
// for a rotary model (default: max_position_embeddings); a dimension flag given must agree.
zs::nn::TransformerShape shape_from_hf(const po::variables_map& vm, std::string& name) {
  const std::string dir = vm["from-hf"].as<std::string>();
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const zs::nn::HfConfig hf =
      zs::nn::parse_hf_config(zs::ckpt::read_whole_file(path, int64_t{1} << 20), path);
  zs::nn::GptArchitecture arch = hf.arch;
  zs::apps::apply_architecture_options(vm, arch);
  zs::apps::apply_component_options(vm, arch);
  zs::apps::check_architecture(vm, arch);
  zs::nn::check_hf_config(hf, arch, path);
  name = fmt::format("--from-hf {} ({})", dir, zs::nn::hf_class_name(hf.family));
  return zs::nn::transformer_shape_of(arch);
}

// --from-hf DIR, --model NAME or zs_train's default model, then the dimension flags over it, then
// --family and the component flags (model_options.h); `name` gets the model's name.
zs::nn::TransformerShape shape_from_flags(const po::variables_map& vm, std::string& name) {
  if (vm.count("from-hf")) return shape_from_hf(vm, name);
  zs::nn::GptArchitecture a = zs::apps::default_architecture();
  name = zs::apps::architecture_options_given(vm) ? "custom" : "zs_train's default";
  if (vm.count("model")) {
    name = vm["model"].as<std::string>();
    auto found = zs::nn::transformer_shape_by_name(name);
    if (!found) {
      std::string names;
      for (const std::string& n : zs::nn::transformer_shape_names())
        names += (names.empty() ? "" : ", ") + n;
      throw BadFlag(fmt::format("--model '{}' is not one of {}", name, names));
    }
    if (vm.count("family"))
      throw BadFlag(
          fmt::format("--family {} and --model {} both choose the components: give one "
                      "(component flags such as --kv-heads refine --model)",
                      vm["family"].as<std::string>(), name));
    zs::apps::apply_architecture_options(vm, *found);
    a = found->arch();
  } else {
    zs::apps::apply_architecture_options(vm, a);  // --ffn's default follows --width here
  }
  zs::apps::apply_component_options(vm, a);
  zs::apps::check_architecture(vm, a);
  return zs::nn::transformer_shape_of(a);
}

// The model: --params N, or a transformer shape with the run's adapters (o.shape).
void parse_model(const po::variables_map& vm, const zs::nn::GptAdapters& adapters, Options& o) {
  if (vm.count("params")) {
    const double n = vm["params"].as<double>();
    if (!(n >= 1.0 && n < 1e15) || std::floor(n) != n)
      throw BadFlag(fmt::format("--params {} is not a whole count in [1, 1e15)", n));
    if (adapters.lora.rank != 0)
      throw BadFlag("--lora-rank needs the model's linears: give --model or --layers/--width/...");
    o.model = zs::ModelDesc::from_param_count(static_cast<int64_t>(n));
    o.model_name = fmt::format("--params {:.4g}", n);
    return;
  }
  zs::nn::TransformerShape s = shape_from_flags(vm, o.model_name);
  s.adapters = adapters;
  o.model = zs::nn::transformer_model_desc(s);  // validates the shape
  o.shape = s;
  const std::string head_dim = s.head_dim > 0 ? fmt::format(" of {}", s.head_dim) : "";
  o.model_name += fmt::format(
      " ({}: {} layers, width {}, {} heads{}, FFN {}, vocab {}, context {})", family_name(s),
      s.layers, s.width, s.heads, head_dim, s.ffn_width(), s.vocab, s.context);
}

// The sequences per optimizer step over all ranks: --batch x accumulation steps x ranks, or
// --global-batch (which must divide into micro-batches).
int64_t global_batch(const po::variables_map& vm, const zs::apps::RunFlags& f, int world) {
  const int64_t per_step = static_cast<int64_t>(world) * f.engine.micro_batches;
  if (!vm.count("global-batch")) return per_step * f.batch;
  const int64_t g = vm["global-batch"].as<int64_t>();
  if (zs::apps::flag_given(vm, "batch") || zs::apps::flag_given(vm, "micro-batch-size"))
    throw BadFlag("--global-batch and --batch both set the micro-batch: give one");
  if (g < 1 || g % per_step != 0)
    throw BadFlag(fmt::format(
        "--global-batch {} is not a positive multiple of --ranks {} x {} gradient-accumulation "
        "steps",
        g, world, f.engine.micro_batches));
  return g;
}

// The run around the engine: device, batch, threads, reserve, --fit.
void parse_run(const po::variables_map& vm, const zs::apps::RunFlags& f, Options& o) {
  zs::PlanConfig& c = o.config;
  c.checkpoint_activations = f.checkpoint_activations;
  o.head_chunk = f.head_chunk;
  o.attention = f.attention;
  c.device = f.device_kind();
  o.cpu_gemm = parse_cpu_gemm(vm["cpu-gemm"].as<std::string>());
  c.global_batch = global_batch(vm, f, c.world);
  // As zs_train: 0 is the cores over the ranks of a node (here: of --ranks-per-node).
  o.threads = f.threads > 0 ? f.threads : zs::nn::default_threads_for(c.ranks_per_node);
  const double reserve = vm["reserve-gb"].as<double>();
  if (!(reserve >= 0.0 && reserve <= 1e9))
    throw BadFlag(fmt::format("--reserve-gb {} is outside [0, 1e9]", reserve));
  c.reserve_bytes = static_cast<int64_t>(std::llround(reserve * kGB));
  if (vm.count("fit")) {
    o.fit_gb = vm["fit"].as<double>();
    if (!(*o.fit_gb > 0.0 && *o.fit_gb <= 1e9))
      throw BadFlag(fmt::format("--fit {} is outside (0, 1e9] GB", *o.fit_gb));
  }
}

// Every flag into Options: the run's flags as zs_train reads them, the model, the ranks, the
// engine, the run; the first bad flag met in that order is the one named.
Options parse_options(const po::variables_map& vm) {
  Options o;
  o.json = vm.count("json") > 0;
  o.save_async = vm["save-async"].as<bool>();
  if (vm["save-memory-every"].as<int64_t>() < 0)
    throw BadFlag("--save-memory-every " + std::to_string(vm["save-memory-every"].as<int64_t>()) +
                  " is negative");
  o.memory_tier = vm["save-memory-every"].as<int64_t>() > 0;
  const bool dims = zs::apps::architecture_options_given(vm);
  if (vm.count("params") && (vm.count("model") || dims))
    throw BadFlag("--params takes no --model or --layers/--width/...: give one model description");
  if (vm.count("from-hf") && (vm.count("params") || vm.count("model")))
    throw BadFlag("--from-hf takes no --params or --model: give one model description");
  if (vm["offload"].as<bool>() && zs::apps::flag_given(vm, "offload-optimizer"))
    throw BadFlag("--offload is another name for --offload-optimizer: give one of them");
  zs::apps::RunFlags f = zs::apps::run_flags_from(vm, zs::apps::plain_flag_name);
  if (vm["offload"].as<bool>()) f.engine.offload.optimizer = true;
  parse_model(vm, f.adapters, o);
  zs::PlanConfig& c = o.config;
  c.world = vm["ranks"].as<int>();
  if (c.world < 1) throw BadFlag(fmt::format("--ranks {} < 1", c.world));
  c.ranks_per_node = vm.count("ranks-per-node") ? vm["ranks-per-node"].as<int>() : c.world;
  zs::apps::resolve_world(c.world, f.global_micro_batches, f.accumulation_given, f.engine);
  // [Note: node layout]: --ranks-per-node, or --ranks / --nodes.
  if (vm.count("ranks-per-node")) {
    f.engine.node_size = c.ranks_per_node;
  } else if (vm.count("nodes") && vm["nodes"].as<int>() >= 1) {
    f.engine.node_size = c.world / vm["nodes"].as<int>();
  }
  f.engine.validate(zs::apps::engine_key_namer(zs::apps::plain_flag_name));
  f.engine.validate_for_world(c.world);
  c.engine = f.engine;
  o.optimizer = vm["optimizer"].as<std::string>();
  if (!o.model.frozen.empty()) {
    const zs::DType compute = c.engine.precision.param_dtype;
    o.frozen_record_bytes =
        frozen_record_bytes(o.model, c.engine.frozen.storage_or(compute), compute);
  }
  parse_run(vm, f, o);
  return o;
}

// ---- The output: JSON and the configurations that fit ----

nlohmann::json fits_json(const std::vector<zs::FitCandidate>& fits) {
  nlohmann::json arr = nlohmann::json::array();
  for (const zs::FitCandidate& f : fits) {
    arr.push_back({{"zero_stage", f.stage},
                   {"offload", f.offload},
                   {"checkpoint_activations", f.checkpoint},
                   {"micro_batches", f.micro_batches},
                   {"cost", f.cost},
                   {"device_total_bytes", f.plan.device_bytes()},
                   {"host_offload_bytes", f.plan.host_bytes()}});
  }
  return arr;
}

// The whole result as one JSON object (without the communication section).
nlohmann::json result_json(const Options& o, const zs::MemoryPlan& plan,
                           const std::vector<zs::FitCandidate>& fits) {
  const zs::PlanConfig& c = o.config;
  const zs::EngineConfig& e = c.engine;
  nlohmann::json j = plan_json(plan);
  // 0 without --save-async.
  j["save_async_snapshot_bytes"] =
      o.save_async ? zs::checkpoint_snapshot_bytes(plan, o.config.engine) : 0;
  // 0 without --save-memory-every.
  j["memory_tier_bytes"] = o.memory_tier ? zs::memory_tier_bytes(plan, o.config.engine) : 0;
  if (o.shape && plan.activations.counted) {  // [Note: chunked head] in nn/lm_head.h
    const int64_t rows = o.head_rows(plan.activations.tokens);
    j["activations"]["head_chunk_rows"] = rows;
    j["activations"]["logits_bytes"] = rows * o.shape->vocab * 4;
  }
  j["model"] = o.model_name;
  j["num_params"] = plan.num_params;
  j["num_padded_params"] = plan.num_padded_params;
  j["units"] = o.model.units.size();
  j["ranks"] = c.world;
  j["ranks_per_node"] = c.ranks_per_node;
  j["device"] = device_name(c.device);
  j["zero_stage"] = static_cast<int>(e.stage);
  j["dtype"] = zs::dtype_name(e.precision.param_dtype);
  j["grad_dtype"] = zs::dtype_name(e.precision.grad_dtype);
  j["optimizer"] = o.optimizer;
  j["optimizer_state_dtype"] = zs::optim::state_dtype_name(e.optimizer.state_dtype);
  j["optimizer_states"] = zs::state_storage_name(e.optimizer);
  j["offload"] = e.offload.optimizer;
  j["checkpoint_activations"] = c.checkpoint_activations;
  j["micro_batches"] = e.micro_batches;
  j["threads"] = o.threads;
  j["num_trainable_params"] = plan.num_params;
  j["num_frozen_params"] = plan.num_frozen_params;
  j["frozen_record_bytes"] = o.frozen_record_bytes;
  j["lora_rank"] = o.shape ? o.shape->adapters.lora.rank : 0;
  if (o.shape && o.shape->adapters.lora.enabled()) {
    j["lora_targets"] = zs::nn::gpt_lora_target_names(o.shape->adapters.lora.targets);
    j["base_dtype"] = std::string(zs::dtype_name(e.frozen.storage_or(e.precision.param_dtype)));
    j["int8_gemm"] = e.frozen.hands_int8();
  }
  if (o.fit_gb) {
    j["fit_budget_bytes"] = static_cast<int64_t>(*o.fit_gb * kGB);
    j["fit"] = fits_json(fits);
  }
  return j;
}

// The configurations that fit --fit, cheapest first (at most o.fit_rows of them).
void print_fits(const Options& o, const std::vector<zs::FitCandidate>& fits) {
  std::printf("\nconfigurations that fit %.2f GB per device, cheapest first (%zu found):\n",
              *o.fit_gb, fits.size());
  if (fits.empty()) {
    std::printf("  none: more ranks, a smaller batch or a smaller model\n");
    return;
  }
  std::printf("  %5s %7s %10s %13s %6s %12s %12s\n", "stage", "offload", "checkpoint",
              "micro-batches", "cost", "device GB", "host GB");
  for (size_t i = 0; i < fits.size() && i < static_cast<size_t>(o.fit_rows); ++i) {
    const zs::FitCandidate& f = fits[i];
    std::printf("  %5d %7s %10s %13d %6.2f %12s %12s\n", f.stage, f.offload ? "on" : "off",
                f.checkpoint ? "on" : "off", f.micro_batches, f.cost,
                human(f.plan.device_bytes()).c_str(), human(f.plan.host_bytes()).c_str());
  }
  if (fits.size() > static_cast<size_t>(o.fit_rows))
    std::printf("  ... %zu more (--json lists all)\n", fits.size() - o.fit_rows);
}

// Returns the exit code. Phases: the flags, the plan, the output (JSON or the table).
int run(int argc, char** argv) {
  po::options_description desc(
      "zs_plan: per-rank memory of a zeroshard training configuration (docs/memory.md), given "
      "zs_train's flags (the same names, meanings and defaults) and its own; GB = 1e9 bytes");
  declare_options(desc);
  const po::variables_map vm = parse_flags(argc, argv, desc);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  Options o = parse_options(vm);

  // ---- Phase 2: the plan ----
  if (o.shape) {
    // The model's activations (nn) for each micro-batch and checkpointing the runtime asks for:
    // the engine's device is the model's, the compute dtype the parameters'.
    o.model.activations = zs::nn::transformer_activations(
        *o.shape, o.config.engine.precision.param_dtype, o.config.device, o.cpu_gemm, o.threads,
        o.head_chunk, o.attention);
  }
  const zs::MemoryPlan plan = zs::plan_memory(o.model, o.config);  // zs::Error -> exit 2 in main
  std::vector<zs::FitCandidate> fits;
  if (o.fit_gb)
    fits = zs::fit_configurations(o.model, o.config, static_cast<int64_t>(*o.fit_gb * kGB));

  if (o.json) {
    nlohmann::json j = result_json(o, plan, fits);
    if (zs::plan::comm_requested(vm)) zs::plan::print_comm_section(vm, o.model, o.config, &j);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  print_table(o, plan);
  if (zs::plan::comm_requested(vm)) zs::plan::print_comm_section(vm, o.model, o.config, nullptr);
  if (o.fit_gb) print_fits(o, fits);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const BadFlag& e) {
    std::fprintf(stderr, "zs_plan: %s (see --help)\n", e.what());
    return 2;
  } catch (const zs::Error& e) {
    std::fprintf(stderr, "zs_plan: %s (see --help)\n", e.what());
    return 2;
  }
}
