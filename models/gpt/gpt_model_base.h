// A GPT-2 style decoder (pre-LN blocks, learned positions, final LN, untied LM head) as a
// zs::Model: the engine gathers, reduces and updates its parameters unit by unit. This class is
// its contract and the host side both devices share (configuration, token checks, micro-batch
// bookkeeping, the unit list); nn::GptModel (CPU, models/gpt/gpt.h) and nn::CudaGptModel (CUDA,
// models/gpt/cuda/gpt_cuda.h) add only the compute, the buffers and how ids reach them, so
// zs_train drives either through this class.
//
// Units (the granularity the engine gathers; names and parameters from models/gpt/gpt_specs.h):
//   unit 0        "embed":   wte [vocab, width], wpe [context, width]
//   units 1..L    "block.i": ln1.w/b [C], qkv.w [3C, C], qkv.b [3C], proj.w [C, C], proj.b [C],
//                            ln2.w/b [C], fc.w [F, C], fc.b [F], fc_proj.w [C, F], fc_proj.b [C]
//                            (C = width, F = ffn_mult * width; weights are [out, in] row-major)
//   unit L+1      "head":    ln_f.w/b [C], lm_head.w [vocab, C]; computes the loss
// With LoRA (GptConfig::adapters.lora, [Note: LoRA] in models/gpt/gpt_adapters.h; CPU only) each
// block appends <t>.lora_A [r, in] and <t>.lora_B [out, r] for each adapted linear t of qkv, proj,
// fc, fc_proj, and with freeze_base every parameter above is frozen (ParamSpec::trainable = false).
// Initialisation as GPT-2: weights normal(0, 0.02), the residual projections (proj.w,
// fc_proj.w) normal(0, 0.02 / sqrt(2L)), biases zero, LN weights one. Weight decay on the 2-D
// weights only (as nanoGPT): wte, wpe, qkv.w, proj.w, fc.w, fc_proj.w, lm_head.w. Both devices
// declare the same units and parameters, so checkpoints, param_hash and safetensors exports are
// interchangeable between CPU and GPU runs.
//
// Activations live in buffers allocated once in the constructor for (batch, context) under
// MemCategory::kActivations; forward/backward allocate nothing. The residual stream, statistics,
// logits and every gradient are fp32; matmuls accumulate in fp32.
//
// Typical use with the engine:
//   GptModel model(cfg, &tracker);            // or CudaGptModel(cfg, stream, &tracker, alloc)
//   Engine engine(model, comm, engine_cfg, &tracker);
//   model.set_tokens(tokens);                 // [micro_batches][batch][context + 1]
//   StepStats s = engine.step();              // calls load_micro_batch(i) for each i
//   // validation: same buffer layout, forward only
//   model.set_tokens(val_tokens); model.load_micro_batch(i); engine.forward(); model.loss();
//   // generation:
//   model.set_inference_input(prompt, n); engine.forward(); model.last_logits();
//
// Errors: every rejected input throws zs::Error(kInvalidArgument) with the same message on both
// devices.
//
// Thread-safety: one thread at a time (the engine's contract for units).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "unit/unit.h"

namespace zs::nn {

class GptModelBase : public Model {
 public:
  ~GptModelBase() override;
  GptModelBase(const GptModelBase&) = delete;
  GptModelBase& operator=(const GptModelBase&) = delete;

  // ---- zs::Model ----
  size_t num_units() const final;  // layers + 2
  Unit& unit(size_t i) final;      // throws zs::Error(kInvalidArgument) past num_units()
  // Selects micro-batch `index` of the tokens given to set_tokens(): its inputs tokens[:, :-1]
  // and targets tokens[:, 1:] are copied into the model. Throws zs::Error(kInvalidArgument) when
  // no tokens were set or the index is out of range. Leaves inference mode.
  void load_micro_batch(int index) final;
  // The mean cross-entropy (nats, unscaled) over the B*T targets of the last training or
  // validation forward, summed in double in row order; NaN before any.
  double loss() const override = 0;

  // Hands the model the token ids of one step: `tokens` holds num_micro_batches * batch *
  // (context + 1) host ids laid out [micro_batch][sequence][context + 1]; the inputs are
  // tokens[:, :-1] and the targets tokens[:, 1:]. The model keeps a non-owning view: the caller
  // keeps the memory alive and unchanged until the step (or validation forward) is done. Ids must
  // be in [0, vocab): checked here, throws zs::Error(kInvalidArgument) naming the first bad one or
  // a size that is not a whole number of micro-batches.
  void set_tokens(std::span<const int32_t> tokens);
  // Number of micro-batches in the tokens last given to set_tokens() (0 before).
  int num_token_micro_batches() const { return num_token_mb_; }

  // Generation: the next forward (engine.forward(), StepInfo::training = false) runs one
  // sequence of `length` (1..context) host ids (copied) and keeps the logits of its last
  // position. It costs one forward of the training shape (see [Note: inference shape] in
  // models/gpt/gpt_common.h). Throws zs::Error(kInvalidArgument) for a bad length or id. A backward
  // after an inference forward throws; a later load_micro_batch() returns to training/validation
  // mode.
  void set_inference_input(const int32_t* tokens, int length);
  // The vocab logits (fp32, host memory) of the last position of the last inference forward;
  // valid until the next forward.
  virtual std::span<const float> last_logits() const = 0;

  const GptConfig& config() const { return config_; }
  // Host threads the model's compute uses (1 for a device model, whose host only enqueues).
  virtual int threads() const = 0;
  // Bytes of activation buffers the model allocated (all registered with its tracker under
  // kActivations).
  virtual int64_t activation_bytes() const = 0;
  int64_t num_params() const { return config_.num_params(); }

 protected:
  // Keeps a copy of `config`; throws zs::Error(kInvalidArgument) naming its first bad field.
  explicit GptModelBase(const GptConfig& config);
  // The device's units in order (gpt_unit_list(), models/gpt/gpt_common.h); called once by the
  // constructor of the derived class.
  void set_units(std::vector<std::unique_ptr<Unit>> units);

  // The device side of load_micro_batch(): copy micro-batch `tokens` (batch x (context + 1) ids,
  // already checked; split_micro_batch() in models/gpt/gpt_common.h) where the next forward reads
  // them and leave inference mode.
  virtual void load_ids(const int32_t* tokens) = 0;
  // The device side of set_inference_input(): `length` checked ids (fill_inference_ids() in
  // models/gpt/gpt_common.h); enter inference mode.
  virtual void load_prompt(const int32_t* tokens, int length) = 0;

 private:
  GptConfig config_;
  std::span<const int32_t> tokens_;  // set_tokens(), not owned
  int num_token_mb_ = 0;
  std::vector<std::unique_ptr<Unit>> units_;
};

}  // namespace zs::nn
