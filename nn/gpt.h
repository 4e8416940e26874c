// A GPT-2 style decoder (pre-LN blocks, learned positions, final LN, untied LM head) as a
// zs::Model: the engine gathers, reduces and updates its parameters unit by unit.
//
// Units (the granularity the engine gathers):
//   unit 0        "embed":   wte [vocab, width], wpe [context, width]
//   units 1..L    "block.i": ln1.w/b [C], qkv.w [3C, C], qkv.b [3C], proj.w [C, C], proj.b [C],
//                            ln2.w/b [C], fc.w [F, C], fc.b [F], fc_proj.w [C, F], fc_proj.b [C]
//                            (C = width, F = ffn_mult * width; weights are [out, in] row-major)
//   unit L+1      "head":    ln_f.w/b [C], lm_head.w [vocab, C]; computes the loss
// Initialisation as GPT-2: weights normal(0, 0.02), the residual projections (proj.w,
// fc_proj.w) normal(0, 0.02 / sqrt(2L)), biases zero, LN weights one. Weight decay on the 2-D
// weights only (as nanoGPT): wte, wpe, qkv.w, proj.w, fc.w, fc_proj.w, lm_head.w.
//
// Activations live in buffers allocated once in the constructor for (batch, context) under
// MemCategory::kActivations; forward/backward allocate nothing. Matrix products accumulate in
// fp32 (oneDNN when built with it, Eigen otherwise). With a bf16 compute dtype the matmul
// operands (LN outputs, q/k/v, attention probabilities, GELU output, gradients fed to matmuls)
// are bf16 copies made into preallocated buffers, everything else (residual stream, statistics,
// logits, gradients) is fp32; with fp16 the fp16 weights are converted to fp32 and every product
// runs in fp32.
//
// Typical use with the engine:
//   GptModel model(cfg, &tracker);
//   Engine engine(model, comm, engine_cfg, &tracker);
//   model.set_tokens(tokens);                 // [micro_batches][batch][context + 1]
//   StepStats s = engine.step();              // calls load_micro_batch(i) for each i
//   // validation: same buffer layout, forward only
//   model.set_tokens(val_tokens); model.load_micro_batch(i); engine.forward(); model.loss();
//   // generation:
//   model.set_inference_input(prompt, n); engine.forward(); model.last_logits();
//
// Thread-safety: one thread at a time (the engine's contract for units). The model's compute
// uses `threads` OpenMP threads inside each call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "nn/gpt_config.h"
#include "nn/gpt_model_base.h"
#include "runtime/unit.h"

namespace zs::nn {

// Cores available to this process divided by the ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE,
// 1 when unset), at least 1.
int default_threads();

class GptModel : public GptModelBase {
 public:
  // Allocates every activation buffer for (batch, context) and every matmul primitive; `tracker`
  // receives the bytes under kActivations (the process tracker when null). Throws zs::Error for
  // an invalid config.
  GptModel(const GptConfig& config, MemoryTracker* tracker = nullptr);
  ~GptModel() override;
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  // ---- zs::Model ----
  size_t num_units() const override;  // layers + 2
  Unit& unit(size_t i) override;
  // Selects micro-batch `index` of the tokens given to set_tokens() (copies its inputs and
  // targets into the model). Throws zs::Error(kInvalidArgument) when no tokens were set or the
  // index is out of range. Leaves inference mode.
  void load_micro_batch(int index) override;
  // The mean cross-entropy (nats, unscaled) over the B*T targets of the last training or
  // validation forward; NaN before any.
  double loss() const override;

  // Hands the model the token ids of one step: `tokens` holds num_micro_batches * batch * (context
  // + 1) ids laid out [micro_batch][sequence][context + 1]; the inputs are tokens[:, :-1] and the
  // targets tokens[:, 1:]. The model keeps a non-owning view: the caller keeps the memory alive
  // and unchanged until the step (or validation forward) is done. Ids must be in [0, vocab):
  // checked here, throws zs::Error(kInvalidArgument) naming the first bad one or a size that is
  // not a whole number of micro-batches.
  void set_tokens(std::span<const int32_t> tokens) override;
  // Number of micro-batches in the tokens last given to set_tokens() (0 before).
  int num_token_micro_batches() const override { return num_token_mb_; }

  // Generation: the next forward (engine.forward(), StepInfo::training = false) runs one
  // sequence of `length` (1..context) ids (copied) and keeps the logits of its last position.
  // It costs one forward of the training shape: the prompt is row 0, padded with zeros that
  // causal attention keeps from influencing it.
  // Throws zs::Error(kInvalidArgument) for a bad length or id. A later load_micro_batch() returns
  // to training/validation mode.
  void set_inference_input(const int32_t* tokens, int length) override;
  // The vocab logits (fp32) of the last position of the last inference forward; valid until the
  // next forward.
  std::span<const float> last_logits() const override;

  const GptConfig& config() const override { return config_; }
  int threads() const override { return threads_; }
  // Bytes of activation buffers this model allocated (also registered with the tracker).
  int64_t activation_bytes() const override;
  // gpt_activation_plan() (nn/gpt_activations.h) for this config on the CPU and this process's
  // GEMM path: the sizes the constructor allocated from; total() = activation_bytes().
  ActivationPlan activation_plan() const override;

  struct State;  // shared by the units (nn/gpt.cc)

 private:
  GptConfig config_;
  int threads_ = 1;
  int num_token_mb_ = 0;
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Unit>> units_;
};

}  // namespace zs::nn
