// DeepSpeed-style JSON configuration (--deepspeed-config ds_config.json) for zs_train: the keys
// DeepSpeed users bring, mapped onto zs_train's own flags, so that one path (the flag parser)
// checks every value. A key zs_train cannot honour is an error naming its path, never ignored.
//
// [Note: ds_config mapping]
//   train_micro_batch_size_per_gpu            --batch (per-rank micro-batch)
//   gradient_accumulation_steps               --gradient-accumulation-steps
//   train_batch_size                          checked: micro x accumulation x world size
//   gradient_clipping                         --clip
//   steps_per_print                           --log-every
//   wall_clock_breakdown                      false only (accepted, no effect)
//   zero_optimization.stage                   --zero-stage
//   zero_optimization.offload_optimizer.device  cpu: --offload-optimizer; none: off
//   zero_optimization.offload_optimizer.pin_memory  accepted, no effect (one host arena)
//   zero_optimization.offload_param.device    none only (parameter offload is not supported)
//   zero_optimization.zeropp.quantized_weights  true: --zero-quantized-weights (ZeRO++ qwZ)
//   bf16.enabled                              --dtype bf16
//   bf16.bf16_optimizer_states                DeepSpeed's key: true --optimizer-state-dtype bf16
//                                             (AdamW's moments in bf16), false fp32. Unlike
//                                             DeepSpeed it needs no bf16 master; parameters under
//                                             the threshold keep fp32 states here
//   bf16.bf16_master_weights_and_grads        false only (the master stays fp32)
//   fp16.enabled                              --dtype fp16 (with bf16.enabled too: an error)
//   fp16.loss_scale / initial_scale_power / loss_scale_window / hysteresis / min_loss_scale
//                                             --loss-scale / --initial-scale-power /
//                                             --loss-scale-window / --hysteresis /
//                                             --min-loss-scale (only when fp16 is enabled)
//   fp16.consecutive_hysteresis, fp16.auto_cast  false only
//   optimizer.type                            AdamW or Adam (adam_w_mode true): --optimizer
//                                             adamw; SGD: --optimizer sgd
//   optimizer.params.lr / betas / eps / weight_decay / momentum
//                                             --lr / --beta1 --beta2 / --adam-eps /
//                                             --weight-decay / --momentum
//   optimizer.params.optim_bits               AdamW: 8 --optimizer-state-dtype int8, 32 fp32
//                                             (bitsandbytes' argument; DeepSpeed has no int8
//                                             states)
//   optimizer.params.block_wise               true only (bitsandbytes'; int8 states are block-wise)
//   optimizer.params.min_8bit_size            --optimizer-state-min-numel (bitsandbytes' threshold;
//                                             here for bf16 states too)
//   optimizer.params.zeroshard_state_block    --optimizer-state-block (zeroshard's; no bnb key)
//   optimizer.params.zeroshard_state_code     --optimizer-state-code float8|dynamic (zeroshard's)
//   optimizer.params.zeroshard_state_fp32     --optimizer-state-fp32: a list of name patterns
//                                             (zeroshard's; bnb's override_config has no key)
//   scheduler.type WarmupLR                   --lr-schedule constant; params warmup_num_steps
//                                             (--warmup), warmup_max_lr (--lr), warmup_min_lr
//                                             0 only, warmup_type "linear" only
//   scheduler.type WarmupCosineLR             --lr-schedule cosine; params warmup_num_steps,
//                                             total_num_steps (--steps), cos_min_ratio
//                                             (--min-lr-ratio), warmup_min_ratio 0 only,
//                                             warmup_type "linear" only
// A value "auto" leaves the setting to the command line (or its default). With neither a bf16
// nor an fp16 section the dtype is the command line's too. Keys the file leaves out keep
// zs_train's defaults, not DeepSpeed's (fp16: loss_scale_window 2000 and hysteresis 1 here,
// 1000 and 2 in DeepSpeed; write them out to get DeepSpeed's). Precedence (options.cc): a flag
// given explicitly (command line or --config) that the file also sets must have the same value,
// or parsing fails naming both; there is no silent winner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zs::train {

// One zs_train flag set by the file.
struct DsSetting {
  std::string key;    // the key path in the file, e.g. "zero_optimization.stage"
  std::string flag;   // the flag's long name, e.g. "zero-stage"
  std::string value;  // as it would be written on the command line; "true"/"false" for switches
  bool is_switch = false;
};

struct DsConfig {
  std::vector<DsSetting> settings;
  std::optional<int64_t> train_batch_size;  // checked against the world size later
  std::vector<std::string> notes;           // keys accepted without effect
};

// Maps a parsed configuration. Throws zs::Error(kInvalidArgument) "<source>: <key path>: ..."
// for the first unknown or unsupported key, wrong type, or contradictory pair.
DsConfig map_ds_config(const nlohmann::json& cfg, const std::string& source);

// Reads and maps a file; a missing file or malformed JSON is a zs::Error naming the file.
DsConfig read_ds_config(const std::string& path);

}  // namespace zs::train
