// What a model allocates for its activations on one rank, split by role: the record a model
// reports through zs::Model::activation_plan() (unit/unit.h) and the memory planner
// (planner/memory_plan.h) adds to the engine's model states and communication buffers.
//
// The runtime only adds these figures up: how a model sizes its buffers is the model's business
// (zeroshard's GPT: models/gpt/gpt_activations.h, the function its constructors allocate from).
//
// Contract: total() is what the model registers with the memory tracker under
// MemCategory::kActivations (library scratch included: gemm_scratchpads), pinned_host what it
// registers under MemCategory::kOther. The split (per layer, blocks, head, workspace) is for
// reports; a model without layers may put everything in `workspace`. The buffers are reused by
// every micro-batch of a step.
#pragma once

#include <cstdint>

namespace zs {

// Activations of one rank for one micro-batch. A plain value; thread-safe to copy.
struct ActivationPlan {
  bool counted = false;                // false: the model does not say (every figure below is 0)
  bool exact = false;                  // true: the bytes the model allocates; false: an estimate
  bool checkpointed = false;           // for a model that recomputes its blocks in backward
  int64_t micro_batch = 0;             // sequences per rank per micro-batch (B)
  int64_t tokens = 0;                  // B * T
  int64_t per_layer = 0;               // one block's kept activations without checkpointing
  int64_t per_layer_checkpointed = 0;  // one block's kept input with checkpointing
  int64_t inputs = 0;                  // token ids and targets (and any index uploaded with them)
  int64_t blocks = 0;                  // all blocks' kept activations (checkpointing as configured)
  int64_t recompute = 0;  // checkpointing: the one shared block set a backward recomputes into
  int64_t head = 0;       // final norm, logits, losses
  int64_t workspace = 0;  // temporaries shared by all layers (attention scratch, gradients)
  // The matrix-product workspace the model sizes and registers itself (zeroshard's GPT: the
  // shared CPU GEMM workspace, or the cuBLASLt workspace on CUDA).
  int64_t gemm_workspace = 0;
  // The matrix-product library's own scratch, which it sizes for the CPU and the thread team and
  // the model asks for and registers (zeroshard's GPT: oneDNN's scratchpads, [Note: GEMM
  // scratchpads] in nn/gemm.h).
  int64_t gemm_scratchpads = 0;
  // Pinned host buffers of the model (token staging, read-backs), registered under kOther. Host
  // memory: not in total() nor in a device total.
  int64_t pinned_host = 0;
  int64_t total() const {
    return inputs + blocks + recompute + head + workspace + gemm_workspace + gemm_scratchpads;
  }
};

}  // namespace zs
