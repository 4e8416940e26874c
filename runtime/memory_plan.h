// The memory plan: per-rank bytes by category for a model description and a training
// configuration, without allocating anything. Model states and communication buffers come from
// plan_engine_buffers() (runtime/buffer_plan.h), the function the engine allocates from, over
// the same compute_group_layout() the engine builds: for any configuration the engine's tracker
// shows exactly these bytes. Activations of zeroshard's own GPT mirror the buffers its model
// allocates in its constructor: nn::GptModel (nn/gpt.h) on the CPU, nn::CudaGptModel
// (nn/cuda/gpt_cuda.h) on CUDA (see [Note: GPT activations] and [Note: CUDA GPT activations] in
// memory_plan.cc); other transformer families get an estimate, flagged as such. docs/memory.md
// explains the arithmetic.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "runtime/buffer_plan.h"
#include "runtime/engine_config.h"

namespace zs {

// kGpt: zeroshard's GptModel (nn/gpt.h): learned positions, pre-LN blocks with biases, GELU
//   MLP [F, C] / [C, F], final LN, untied LM head; units embed, block.0..L-1, head.
// kLlama: LLaMA-style: no biases, RMSNorm, rotary positions (no parameters), SwiGLU MLP with
//   three [F, C] matrices, untied output; same unit split.
enum class TransformerFamily { kGpt, kLlama };

struct TransformerShape {
  TransformerFamily family = TransformerFamily::kGpt;
  int layers = 12;
  int width = 768;  // C
  int heads = 12;
  int ffn = 0;  // F; 0 = 4 * width
  int vocab = 50257;
  int context = 1024;  // T

  int ffn_width() const { return ffn > 0 ? ffn : 4 * width; }
  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
  // Parameter elements per unit, per parameter, in the order the model declares them.
  std::vector<std::vector<int64_t>> unit_param_numels() const;
  int64_t num_params() const;
};

// gpt2, gpt2-medium, gpt2-large, gpt2-xl (GPT-2 dims, our GPT's untied head), llama-7b (LLaMA
// 6.7B dims: 32 layers, hidden 4096, 32 heads, FFN 11008, vocab 32000, context 2048). nullopt
// for an unknown name.
std::optional<TransformerShape> transformer_shape_by_name(std::string_view name);
std::vector<std::string> transformer_shape_names();

// A plausible unit list for a bare parameter count: L units of about n / L parameters (one flat
// parameter each) with L from a GPT-like aspect ratio (12 L C^2 = n, C = 128 L), at least 1.
// Throws zs::Error(kInvalidArgument) for n < 1.
std::vector<std::vector<int64_t>> units_for_param_count(int64_t n);

struct ModelDesc {
  std::vector<std::vector<int64_t>> units;  // parameter numels per unit, model order
  // Set for a transformer: activations are counted (else they are 0: a model of its own units
  // allocates its activations itself).
  std::optional<TransformerShape> transformer;

  static ModelDesc from_units(std::vector<std::vector<int64_t>> units);
  static ModelDesc from_transformer(const TransformerShape& shape);
  static ModelDesc from_param_count(int64_t n);
  int64_t num_params() const;
};

// How the CPU GPT's matrix products run (nn/gemm.h, [Note: GEMM paths]); it decides the GEMM
// workspace nn::GptModel allocates. The planner is a pure function: a caller planning for this
// machine takes the value from nn (nn::gemm_uses_onednn(), nn::gemm_path(kBF16).widened).
enum class CpuGemm : uint8_t {
  kOnednn,         // oneDNN, bf16 products native: no workspace
  kOnednnWidened,  // oneDNN, bf16 operands widened to fp32 (AVX2 CPUs): widened A and B
  kEigen,          // Eigen build: bf16 widened, and an fp32 product per GEMM
};

struct PlanConfig {
  // Stage, dtypes, optimizer, micro-batches, prefetch, offload, align: as the engine gets them.
  EngineConfig engine;
  int world = 1;           // ranks
  int ranks_per_node = 1;  // reported only: per-rank bytes do not depend on it
  // Sequences per optimizer step over all ranks; must divide by world * micro_batches.
  // 0 = one sequence per rank and micro-batch.
  int64_t global_batch = 0;
  bool checkpoint_activations = false;
  int64_t reserve_bytes = 0;  // per-device framework reserve (CUDA context, library workspaces)
  int rank = 0;               // which shard; sizes do not depend on it
  // Where the engine and the model run. kCpu: the CPU engine and nn::GptModel's activations.
  // kCuda: the engine on a GPU (plan_engine_buffers' on_device: a device control buffer, and
  // pinned host staging with offload) and nn::CudaGptModel's activations.
  DeviceKind device = DeviceKind::kCpu;
  CpuGemm cpu_gemm = CpuGemm::kOnednn;  // kCpu only

  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
};

// Activations of one rank for one micro-batch (they are reused across micro-batches).
struct ActivationPlan {
  bool counted = false;  // false when the model description has no transformer shape
  // true for kGpt: the bytes GptModel (kCpu) or CudaGptModel (kCuda) allocates; false: an
  // estimate.
  bool exact = false;
  int64_t micro_batch = 0;             // sequences per rank per micro-batch (B)
  int64_t tokens = 0;                  // B * T
  int64_t per_layer = 0;               // one block's kept activations without checkpointing
  int64_t per_layer_checkpointed = 0;  // one block's kept input with checkpointing
  int64_t inputs = 0;     // token ids and targets (CUDA: and the embedding-gradient index)
  int64_t blocks = 0;     // all blocks' kept activations (checkpointing as configured)
  int64_t recompute = 0;  // checkpointing: the one shared block set a backward recomputes into
  int64_t head = 0;       // final norm, logits, losses
  int64_t workspace = 0;  // temporaries shared by all layers (attention scratch, gradients)
  // kCuda: the cuBLASLt workspace CudaGptModel's CublasContext registers under kActivations
  // (32 MiB). kCpu: GptModel's shared GEMM workspace (gpt_cpu_gemm_workspace_bytes); oneDNN's
  // own scratchpads are the library's choice and not counted.
  int64_t gemm_workspace = 0;
  // kCuda: pinned host buffers of the model (token staging, loss and logits read-back), which
  // it registers under kOther. Host memory: not in total() nor in the device total.
  int64_t pinned_host = 0;
  int64_t total() const { return inputs + blocks + recompute + head + workspace + gemm_workspace; }
};

struct MemoryPlan {
  BufferPlan buffers;  // what the engine allocates (model states, comm buffers)
  ActivationPlan activations;
  int world = 1;
  int ranks_per_node = 1;
  int stage = 0;
  int64_t num_params = 0;          // Psi, no padding
  int64_t num_padded_params = 0;   // sum of the units' padded group sizes
  int64_t params_full_bytes = 0;   // P * padded Psi: one full replica in the compute dtype
  int64_t params_shard_bytes = 0;  // P * sum of shard sizes: what stage 3 keeps
  int64_t reserve_bytes = 0;

  // The tracker's categories: kParams, kGrads, kMaster, kOptimizer (device-resident),
  // kActivations, kCommBuffers, kHostOffload (host), kOther (activations.pinned_host: 0 but for
  // the CUDA GPT).
  int64_t bytes(MemCategory c) const;
  // Parameters, gradients, master weights, optimizer states, wherever they live (host included).
  int64_t model_states_bytes() const;
  int64_t padding_bytes() const { return buffers.padding_bytes(); }
  int64_t host_bytes() const { return bytes(MemCategory::kHostOffload); }
  // Everything on the device: model states held there, activations, comm buffers, reserve.
  int64_t device_bytes() const;
};

// Throws zs::Error(kInvalidArgument) for an invalid description or configuration.
MemoryPlan plan_memory(const ModelDesc& model, const PlanConfig& config);

// Activations of one rank for a transformer at `micro_batch` sequences per micro-batch.
// kGpt on kCpu: the bytes nn::GptModel registers (GptModel::activation_bytes(), its GEMM
// workspace for `cpu_gemm` included) for GptConfig{layers, heads, width, context, vocab,
// batch = micro_batch, ffn_mult = ffn / width, checkpoint, compute_dtype}; oneDNN's scratchpads
// are not included. kGpt on kCuda: the bytes nn::CudaGptModel registers under kActivations
// (CudaGptModel::activation_bytes(), its cuBLASLt workspace included) for the same GptConfig, and
// its pinned host bytes. kLlama: an estimate (docs/memory.md), the same on both.
ActivationPlan plan_transformer_activations(const TransformerShape& shape, int64_t micro_batch,
                                            DType compute_dtype, bool checkpoint_activations,
                                            DeviceKind device = DeviceKind::kCpu,
                                            CpuGemm cpu_gemm = CpuGemm::kOnednn);

// The GEMM workspace nn::GptModel allocates on the CPU (nn::GemmWorkspace, shared by all its
// products): the largest need of one product, widened bf16 A and B extents (64-byte aligned)
// when `cpu_gemm` widens and the compute dtype is bf16, plus the fp32 m x n product for kEigen.
int64_t gpt_cpu_gemm_workspace_bytes(const TransformerShape& shape, int64_t micro_batch,
                                     DType compute_dtype, CpuGemm cpu_gemm);

// One configuration that fits a per-device budget, for `zs_plan --fit`.
struct FitCandidate {
  int stage = 0;
  bool offload = false;
  bool checkpoint = false;
  int micro_batches = 1;
  double cost = 0.0;  // relative step-time penalty, lower is cheaper (docs/memory.md)
  MemoryPlan plan;
};

// Every (stage 0-3, offload on/off where valid, checkpointing on/off, micro-batches dividing the
// per-rank batch) whose device_bytes() <= budget, cheapest first. `base` supplies the rest.
std::vector<FitCandidate> fit_configurations(const ModelDesc& model, const PlanConfig& base,
                                             int64_t budget_bytes);

}  // namespace zs
