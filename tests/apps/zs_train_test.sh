#!/usr/bin/env bash
# End-to-end checks of zs_train under mpirun, one case per ctest:
#   zs_train_test.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   stages     stages 0-3 at 2 ranks print the same param_hash (bf16 and fp32), and so does
#              optimizer offload; the loss falls
#   json       --json-log writes a header (configuration, versions, machine), one object per step
#              and a final object with the fixed keys, each with a timestamp; step lines show
#              elapsed time and ETA; an existing log is refused, or appended to / overwritten
#              when --json-log-mode says so
#   cli        --micro-batch-size is an alias of --batch (same param_hash); --lr-schedule constant
#              and the loss-scaler flags reach the engine; --help prints defaults readably
#   dsconfig   a DeepSpeed ds_config.json (ZeRO-3, bf16, CPU optimizer offload, accumulation,
#              clipping, AdamW params; and an fp16 one with loss-scale keys and a scheduler; int8
#              states by optim_bits, min_8bit_size, block and fp32 names; bf16 states by
#              bf16_optimizer_states) gives the param_hash of the equivalent flags; bad configs
#              are refused naming the key
#   plot       scripts/plot_runs.py draws PNGs from two JSON logs (exit 77 without matplotlib)
#   resume     save at step 3 of 6, resume: the same param_hash and losses as the uninterrupted run
#   errors     bad input (flags, ranges, combinations): one clear message, non-zero exit on
#              every rank, no hang
#   disagree   ranks started with different flags (MPMD): one message naming the flag and both
#              values, non-zero exit on every rank, at 2 and 4 ranks
#   nonfinite  --lr 1e30 makes the parameters non-finite: the run stops at once (one message,
#              exit 1), writes no checkpoint or export after it, and the last good checkpoint
#              resumes to the bits of an uninterrupted run
#   hsdp       4 ranks on 2 fake nodes: --shard-group-size 2 and --collectives hierarchical agree
#              with flat sharding, hybrid sends fewer bytes between nodes, shard groups of one
#              rank give flat's bits at stage 1
#   isa        our kernels capped at scalar, avx2 and avx512 (ZS_MAX_ISA) give the same
#              param_hash (fp32 and bf16, resident and offloaded Adam); the first lines name the
#              paths taken; a bad cap is refused on every rank
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
tiny+=(--steps 6)

case "$case_name" in
  stages)
    for dtype in bf16 fp32; do
      ref=""
      for stage in 0 1 2 3; do
        run "$work/s$stage.txt" 2 "${tiny[@]}" --dtype "$dtype" --zero-stage "$stage" ||
          { cat "$work/s$stage.txt"; fail "stage $stage $dtype exited non-zero"; }
        h=$(hash_of "$work/s$stage.txt")
        echo "$dtype stage $stage: param_hash $h"
        [ -n "$h" ] || fail "no param_hash line"
        [ -z "$ref" ] && ref=$h
        [ "$h" = "$ref" ] || fail "$dtype stage $stage param_hash $h differs from stage 0's $ref"
      done
      for stage in 1 3; do
        run "$work/o$stage.txt" 2 "${tiny[@]}" --dtype "$dtype" --zero-stage "$stage" --offload-optimizer ||
          { cat "$work/o$stage.txt"; fail "offload stage $stage exited non-zero"; }
        h=$(hash_of "$work/o$stage.txt")
        echo "$dtype stage $stage offloaded: param_hash $h"
        [ "$h" = "$ref" ] || fail "offloaded stage $stage param_hash $h differs from $ref"
      done
    done
    first=$(grep -oE '^step +1/6 \| loss [0-9.]+' "$work/s3.txt" | awk '{print $NF}')
    last=$(grep -oE '^step +6/6 \| loss [0-9.]+' "$work/s3.txt" | awk '{print $NF}')
    echo "loss $first -> $last"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' || fail "loss did not fall: $first -> $last"
    ;;
  json)
    run "$work/out.txt" 2 "${tiny[@]}" --json-log "$work/log.jsonl" || { cat "$work/out.txt"; fail "exit"; }
    python3 - "$work/log.jsonl" <<'PY' || fail "json log"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if r.get("type") == "step"]
final = [r for r in rows if r.get("final")]
assert [r["step"] for r in steps] == list(range(1, 7)), steps
for r in steps:
    for k in ("loss", "tokens_per_s", "step_ms", "lr", "loss_scale", "grad_norm"):
        assert k in r, (k, r)
assert len(final) == 1
f = final[0]
assert f["world_size"] == 2 and f["stage"] == 3 and f["params"] > 0
for k in ("params", "activations", "comm_buffers", "master", "optimizer", "grads"):
    assert f["memory_bytes"][k] > 0, k
assert f["comm_bytes_per_step"] > 0 and len(f["param_hash"]) == 16
rss = f["peak_rss_bytes_per_rank"]  # each rank's VmHWM: at least the tracked model state
assert len(rss) == 2 and min(rss) > 0 and max(rss) >= f["memory_bytes"]["total"], (rss, f["memory_bytes"])
k = f["kernels"]
for key in ("cpu", "features", "isa", "isa_cap", "onednn_isa_cap", "gemm", "gemm_dtype",
            "conversions", "elementwise", "cpu_adam", "reductions"):
    assert isinstance(k[key], str) and k[key], (key, k)
assert k["isa"] in ("scalar", "avx2", "avx512") and k["gemm"].startswith("onednn"), k
print("json log ok:", len(steps), "steps, final keys", sorted(f))
PY
    python3 - "$work/log.jsonl" <<'PY' || fail "json header and timestamps"
import datetime, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["type"] for r in rows] == ["header"] + ["step"] * 6 + ["final"], [r["type"] for r in rows]
h = rows[0]
for k in ("version", "git_revision", "compiler", "start_time", "world_size", "threads", "gpu",
          "cpu", "cpu_features", "kernels", "config", "command_line"):
    assert k in h and h[k] not in ("", None), (k, h.get(k))
assert h["world_size"] == 2 and h["gpu"] == "none" and h["threads"] == 1, h
c = h["config"]
assert c["steps"] == 6 and c["zero-stage"] == 3 and c["dtype"] == "bf16" and c["lr"] == 0.002, c
assert c["gradient-accumulation-steps"] == 1 and c["adam-eps"] == 1e-8 and c["json-log-mode"] == "new", c
assert h["kernels"]["gemm"].startswith("onednn"), h["kernels"]
last = 0.0
for r in rows:
    t = datetime.datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert r["elapsed_s"] >= last, (r["elapsed_s"], last)
    last = r["elapsed_s"]
for r in rows[1:7]:
    assert r["comm_bytes"] > 0 and r["mem_peak_bytes"] > 0 and r["eta_s"] >= 0, r
print("header ok:", h["version"], h["git_revision"], h["compiler"], h["start_time"])
PY
    grep -qE '^step +6/6 .*\| [0-9.]+ s, ETA [0-9.:]+( s)?' "$work/out.txt" ||
      { cat "$work/out.txt"; fail "no elapsed/ETA on the step lines"; }
    grep -E '^step +1/6' "$work/out.txt"
    # An existing log: refused on every rank before any work, and the file is left as it was.
    before=$(md5sum < "$work/log.jsonl")
    expect "existing log" "--json-log $work/log.jsonl exists" "${tiny[@]}" --json-log "$work/log.jsonl"
    [ "$(md5sum < "$work/log.jsonl")" = "$before" ] || fail "the refused run changed the log"
    run "$work/out2.txt" 2 "${tiny[@]}" --json-log "$work/log.jsonl" --json-log-mode append ||
      { cat "$work/out2.txt"; fail "append"; }
    n=$(grep -c '"type":"header"' "$work/log.jsonl")
    [ "$n" -eq 2 ] || fail "append: $n headers, expected 2"
    run "$work/out3.txt" 2 "${tiny[@]}" --json-log "$work/log.jsonl" --json-log-mode overwrite ||
      { cat "$work/out3.txt"; fail "overwrite"; }
    n=$(wc -l < "$work/log.jsonl")
    [ "$n" -eq 8 ] || fail "overwrite: $n lines, expected 8"
    echo "log modes ok: new refused, append adds a header, overwrite starts over"
    ;;
  cli)
    run "$work/mbs.txt" 2 "${tiny[@]/#--batch/--micro-batch-size}" || { cat "$work/mbs.txt"; fail "mbs"; }
    run "$work/plain.txt" 2 "${tiny[@]}" || { cat "$work/plain.txt"; fail "plain"; }
    same_hash "--micro-batch-size 4 = --batch 4" "$work/plain.txt" "$work/mbs.txt"
    # constant = cosine decaying to 1 x lr; the lr column stays at the peak after warm-up.
    run "$work/const.txt" 2 "${tiny[@]}" --lr-schedule constant || { cat "$work/const.txt"; fail "constant"; }
    run "$work/ratio1.txt" 2 "${tiny[@]}" --min-lr-ratio 1 || { cat "$work/ratio1.txt"; fail "ratio 1"; }
    same_hash "--lr-schedule constant = --min-lr-ratio 1" "$work/const.txt" "$work/ratio1.txt"
    grep -qE '^step +6/6 .*lr 2\.000e-03' "$work/const.txt" || fail "constant schedule: lr moved"
    # The scaler flags at their defaults are the engine's own fp16 choice; a different start
    # scale shows on the first step line.
    run "$work/fp16.txt" 2 "${tiny[@]}" --dtype fp16 || { cat "$work/fp16.txt"; fail "fp16"; }
    run "$work/fp16d.txt" 2 "${tiny[@]}" --dtype fp16 --loss-scale 0 --initial-scale-power 16 \
      --loss-scale-window 2000 --hysteresis 1 --min-loss-scale 1 || { cat "$work/fp16d.txt"; fail "fp16 flags"; }
    same_hash "fp16 scaler flags at their defaults = none" "$work/fp16.txt" "$work/fp16d.txt"
    run "$work/p8.txt" 2 "${tiny[@]}" --dtype fp16 --initial-scale-power 8 || { cat "$work/p8.txt"; fail "power 8"; }
    grep -qE '^step +1/6 .*scale 256 ' "$work/p8.txt" || { grep '^step' "$work/p8.txt"; fail "--initial-scale-power 8"; }
    run "$work/static.txt" 2 "${tiny[@]}" --dtype fp16 --loss-scale 1024 || { cat "$work/static.txt"; fail "static"; }
    [ "$(grep -cE '^step .*scale 1024 ' "$work/static.txt")" -eq 6 ] || fail "--loss-scale 1024 not static"
    run "$work/eps.txt" 2 "${tiny[@]}" --adam-eps 1e-3 || { cat "$work/eps.txt"; fail "eps"; }
    [ "$(hash_of "$work/eps.txt")" != "$(hash_of "$work/plain.txt")" ] || fail "--adam-eps has no effect"
    "$bin" --help > "$work/help.txt" || fail "--help"
    grep -qF -- '--lr arg (=2e-3)' "$work/help.txt" && grep -qF -- '--adam-eps arg (=1e-8)' "$work/help.txt" ||
      fail "defaults not printed readably"
    grep -qE '0\.0*[1-9]0{4,}[0-9]|99999' "$work/help.txt" && { grep -E '0\.0*[1-9]0{4,}|99999' "$work/help.txt"; fail "float noise in --help"; }
    echo "help ok"
    ;;
  dsconfig)
    # A ds_config.json as DeepSpeed users write it, and the same run as flags.
    cat > "$work/ds_config.json" <<'JSON'
{
  "train_batch_size": 16,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 0.5,
  "steps_per_print": 1,
  "wall_clock_breakdown": false,
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": { "device": "cpu", "pin_memory": true }
  },
  "bf16": { "enabled": true },
  "fp16": { "enabled": "auto" },
  "optimizer": {
    "type": "AdamW",
    "params": { "lr": 3e-3, "betas": [0.9, 0.99], "eps": 1e-7, "weight_decay": 0.05 }
  }
}
JSON
    base=(--layers 2 --heads 2 --width 64 --context 32 --steps 6 --warmup 2 --eval-every 3
          --eval-batches 1 --sample-tokens 8 --threads 1)
    run "$work/ds.txt" 2 "${base[@]}" --deepspeed-config "$work/ds_config.json" ||
      { cat "$work/ds.txt"; fail "ds_config run"; }
    run "$work/flags.txt" 2 "${base[@]}" --zero-stage 3 --dtype bf16 --offload-optimizer --batch 4 \
      --gradient-accumulation-steps 2 --clip 0.5 --lr 3e-3 --beta1 0.9 --beta2 0.99 --adam-eps 1e-7 \
      --weight-decay 0.05 || { cat "$work/flags.txt"; fail "flags run"; }
    same_hash "ds_config ZeRO-3 bf16 offload = flags" "$work/ds.txt" "$work/flags.txt"
    run "$work/default.txt" 2 "${base[@]}" || { cat "$work/default.txt"; fail "default run"; }
    [ "$(hash_of "$work/ds.txt")" != "$(hash_of "$work/default.txt")" ] || fail "the ds_config changed nothing"
    grep -q 'ZeRO-3, bf16 compute, .* 2 x 4 sequences per rank' "$work/ds.txt" || fail "banner"
    # Flags that agree with the file are accepted.
    run "$work/agree.txt" 2 "${base[@]}" --ds-config "$work/ds_config.json" --gradient-accumulation-steps 2 --lr 3e-3 ||
      { cat "$work/agree.txt"; fail "agreeing flags refused"; }
    same_hash "ds_config + agreeing flags" "$work/ds.txt" "$work/agree.txt"
    # fp16 with DeepSpeed's loss-scale keys and a cosine scheduler.
    cat > "$work/ds_fp16.json" <<'JSON'
{
  "train_micro_batch_size_per_gpu": 4,
  "zero_optimization": { "stage": 2, "offload_optimizer": { "device": "none" } },
  "fp16": { "enabled": true, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 500,
            "hysteresis": 2, "min_loss_scale": 1 },
  "optimizer": { "type": "Adam", "params": { "lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-8 } },
  "scheduler": { "type": "WarmupCosineLR",
                 "params": { "warmup_num_steps": 2, "total_num_steps": 6, "cos_min_ratio": 0.2,
                             "warmup_type": "linear" } }
}
JSON
    run "$work/ds16.txt" 2 "${base[@]}" --ds-config "$work/ds_fp16.json" || { cat "$work/ds16.txt"; fail "fp16 ds_config"; }
    run "$work/flags16.txt" 2 "${base[@]}" --zero-stage 2 --dtype fp16 --batch 4 --loss-scale 0 \
      --initial-scale-power 12 --loss-scale-window 500 --hysteresis 2 --min-loss-scale 1 --lr 1e-3 \
      --beta1 0.8 --beta2 0.95 --adam-eps 1e-8 --lr-schedule cosine --min-lr-ratio 0.2 ||
      { cat "$work/flags16.txt"; fail "fp16 flags"; }
    same_hash "ds_config fp16 + loss scale + WarmupCosineLR = flags" "$work/ds16.txt" "$work/flags16.txt"
    grep -qE '^step +1/6 .*scale 4096 ' "$work/ds16.txt" || fail "initial_scale_power 12 not applied"
    # Optimizer states: bitsandbytes' optim_bits, block_wise and min_8bit_size, zeroshard's state
    # block and fp32 names, and DeepSpeed's bf16.bf16_optimizer_states, each = its flag.
    cat > "$work/ds_int8.json" <<'JSON'
{
  "optimizer": { "type": "AdamW",
                 "params": { "optim_bits": 8, "block_wise": true, "min_8bit_size": 2048,
                             "zeroshard_state_block": 128, "zeroshard_state_code": "dynamic",
                             "zeroshard_state_fp32": ["embed.*", "*.fc.weight"] } }
}
JSON
    run "$work/ds8.txt" 2 "${base[@]}" --ds-config "$work/ds_int8.json" || { cat "$work/ds8.txt"; fail "int8 ds_config"; }
    run "$work/flags8.txt" 2 "${base[@]}" --optimizer-state-dtype int8 --optimizer-state-min-numel 2048 \
      --optimizer-state-block 128 --optimizer-state-code dynamic --optimizer-state-fp32 'embed.*,*.fc.weight' ||
      { cat "$work/flags8.txt"; fail "int8 state flags"; }
    same_hash "ds_config int8 states (optim_bits, min_8bit_size, block, code, fp32 names) = flags" \
      "$work/ds8.txt" "$work/flags8.txt"
    [ "$(hash_of "$work/ds8.txt")" != "$(hash_of "$work/default.txt")" ] || fail "optim_bits 8 changed nothing"
    grep -qF "optimizer.params.block_wise has no effect: int8 states are always block-wise" "$work/ds8.txt" ||
      fail "no note for block_wise"
    printf '%s\n' '{"bf16": {"enabled": true, "bf16_optimizer_states": true}}' > "$work/ds_bf16s.json"
    run "$work/dsb.txt" 2 "${base[@]}" --ds-config "$work/ds_bf16s.json" || { cat "$work/dsb.txt"; fail "bf16 states ds_config"; }
    run "$work/flagsb.txt" 2 "${base[@]}" --dtype bf16 --optimizer-state-dtype bf16 ||
      { cat "$work/flagsb.txt"; fail "bf16 state flags"; }
    same_hash "ds_config bf16.bf16_optimizer_states = flags" "$work/dsb.txt" "$work/flagsb.txt"
    [ "$(hash_of "$work/dsb.txt")" != "$(hash_of "$work/default.txt")" ] || fail "bf16_optimizer_states changed nothing"
    # Bad configs: the key path is named, every rank exits non-zero, no hang.
    bad() {  # label expected-text json [flags...]
      local label=$1 text=$2 cfg=$3
      shift 3
      printf '%s\n' "$cfg" > "$work/bad.json"
      expect "$label" "$text" "${base[@]}" --deepspeed-config "$work/bad.json" "$@"
    }
    bad "unknown key" "zero_optimization.overlap_comm: unknown or unsupported key" \
      '{"zero_optimization": {"stage": 3, "overlap_comm": true}}'
    bad "param offload" "zero_optimization.offload_param.device: parameter offload is not supported" \
      '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}'
    bad "fp16 and bf16" "fp16.enabled and bf16.enabled: both are true" \
      '{"fp16": {"enabled": true}, "bf16": {"enabled": true}}'
    bad "scheduler" 'scheduler.type: "OneCycle" is not supported' '{"scheduler": {"type": "OneCycle"}}'
    bad "log warm-up" "scheduler.params.warmup_type: must be \"linear\"" \
      '{"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 2}}}'
    bad "conflict" "gradient_accumulation_steps = 2 conflicts with --gradient-accumulation-steps 4" \
      '{"gradient_accumulation_steps": 2}' --gradient-accumulation-steps 4
    bad "train_batch_size" "train_batch_size = 12 is not micro-batch 4 x gradient accumulation 1 x world size 2 = 8" \
      '{"train_batch_size": 12, "train_micro_batch_size_per_gpu": 4}'
    bad "type" "gradient_clipping: \"big\" is not a finite number" '{"gradient_clipping": "big"}'
    bad "range" "--clip (gradient_clipping in $work/bad.json) -1 must be a finite number >= 0" \
      '{"gradient_clipping": -1}'
    bad "not json" "not valid JSON" '{"zero_optimization": {'
    bad "optimizer" 'optimizer.type: "Lamb" is not supported' '{"optimizer": {"type": "Lamb"}}'
    bad "optim_bits" "optimizer.params.optim_bits: 4 is not 8 or 32" '{"optimizer": {"params": {"optim_bits": 4}}}'
    bad "state conflict" 'optimizer.params.optim_bits = "int8" conflicts with --optimizer-state-dtype "bf16" given explicitly' \
      '{"optimizer": {"params": {"optim_bits": 8}}}' --optimizer-state-dtype bf16
    bad "state keys disagree" 'bf16.bf16_optimizer_states = "bf16" and optimizer.params.optim_bits = "int8" disagree' \
      '{"bf16": {"bf16_optimizer_states": true}, "optimizer": {"params": {"optim_bits": 8}}}'
    bad "sgd states" "optimizer.params.optim_bits: unknown or unsupported key" \
      '{"optimizer": {"type": "SGD", "params": {"optim_bits": 8}}}'
    bad "bf16 master" "bf16.bf16_master_weights_and_grads: true is not supported" \
      '{"bf16": {"enabled": true, "bf16_master_weights_and_grads": true}}'
    bad "block_wise" "optimizer.params.block_wise: false (one scale per tensor) is not supported" \
      '{"optimizer": {"params": {"optim_bits": 8, "block_wise": false}}}'
    bad "fp32 names" 'optimizer.params.zeroshard_state_fp32: "embed.wte" is not a non-empty list of name patterns' \
      '{"optimizer": {"params": {"optim_bits": 8, "zeroshard_state_fp32": "embed.wte"}}}'
    bad "threshold with fp32" "--optimizer-state-min-numel (optimizer.params.min_8bit_size in $work/bad.json) applies to --optimizer-state-dtype bf16 or int8, not fp32" \
      '{"optimizer": {"params": {"min_8bit_size": 1024}}}'
    expect "missing file" "--deepspeed-config $work/none.json: does not exist" "${base[@]}" \
      --deepspeed-config "$work/none.json"
    ;;
  plot)
    py=""
    for p in python3 /usr/bin/python3; do
      "$p" -c 'import matplotlib' 2>/dev/null && { py=$p; break; }
    done
    [ -n "$py" ] || { echo "SKIP: no python3 with matplotlib (apt install python3-matplotlib)"; exit 77; }
    run "$work/a.txt" 2 "${tiny[@]}" --json-log "$work/bf16.jsonl" || { cat "$work/a.txt"; fail "run a"; }
    run "$work/b.txt" 2 "${tiny[@]}" --dtype fp32 --zero-stage 1 --json-log "$work/fp32.jsonl" ||
      { cat "$work/b.txt"; fail "run b"; }
    script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/plot_runs.py
    "$py" "$script" "$work/bf16.jsonl" "$work/fp32.jsonl" --out "$work/plots" || fail "plot_runs.py"
    for f in loss tokens_per_s memory comm; do
      png=$work/plots/$f.png
      [ -s "$png" ] || fail "$f.png missing"
      [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$f.png is not a PNG"
      "$py" -c 'import sys, matplotlib.image as m; a = m.imread(sys.argv[1]); assert a.shape[0] > 100 and a.std() > 0' "$png" ||
        fail "$f.png does not decode or is blank"
      echo "$f.png: $(stat -c %s "$png") bytes"
    done
    ;;
  isa)
    # oneDNN stays as it is (its own cap is ONEDNN_MAX_CPU_ISA): only our kernels change level,
    # and each level must give the same bits as the scalar reference.
    for dtype in fp32 bf16; do
      for off in "" --offload-optimizer; do
        ref=""
        for isa in scalar avx2 avx512; do
          ZS_MAX_ISA=$isa run "$work/$isa.txt" 2 "${tiny[@]}" --dtype "$dtype" $off ||
            { cat "$work/$isa.txt"; fail "ZS_MAX_ISA=$isa $dtype exited non-zero"; }
          line=$(grep -m1 '^kernel paths:' "$work/$isa.txt") || fail "no 'kernel paths:' line"
          grep -q '^cpu: .*features: ' "$work/$isa.txt" || fail "no 'cpu:' line"
          grep -qE '^gemm rates here \(\[[0-9]+ x [0-9]+\] x \[[0-9]+ x [0-9]+\], [0-9]+ threads?\): fp32 [0-9.]+ GFLOP/s, bf16 [0-9.]+' \
            "$work/$isa.txt" || fail "no 'gemm rates here' line"
          h=$(hash_of "$work/$isa.txt")
          echo "$dtype ${off:-resident} ZS_MAX_ISA=$isa: param_hash $h | $line"
          [ -n "$h" ] || fail "no param_hash line"
          [ -z "$ref" ] && ref=$h
          [ "$h" = "$ref" ] || fail "ZS_MAX_ISA=$isa $dtype $off param_hash $h differs from scalar's $ref"
        done
      done
    done
    grep -q 'cpu adam scalar | reductions scalar' "$work/scalar.txt" || fail "scalar cap not reported"
    ZS_MAX_ISA=avx9 run "$work/bad.txt" 2 "${tiny[@]}" && fail "ZS_MAX_ISA=avx9 accepted"
    n=$(grep -c 'ZS_MAX_ISA=avx9: unknown instruction-set cap (allowed: scalar, avx2, avx512)' "$work/bad.txt")
    [ "$n" -ge 1 ] || { cat "$work/bad.txt"; fail "bad cap message"; }
    echo "bad cap refused: $n message(s)"
    ;;
  resume)
    run "$work/full.txt" 2 "${tiny[@]}" --zero-stage 2 || { cat "$work/full.txt"; fail "full run"; }
    run "$work/a.txt" 2 "${tiny[@]}" --zero-stage 2 --save-dir "$work/ckpt" --save-every 3 ||
      { cat "$work/a.txt"; fail "saving run"; }
    run "$work/b.txt" 2 "${tiny[@]}" --zero-stage 2 --resume-from "$work/ckpt/step-00000003" ||
      { cat "$work/b.txt"; fail "resumed run"; }
    full=$(hash_of "$work/full.txt") resumed=$(hash_of "$work/b.txt")
    echo "uninterrupted $full, resumed from step 3 $resumed"
    [ "$full" = "$resumed" ] || fail "resumed param_hash differs"
    for s in 4 5 6; do
      a=$(grep -E "^step +$s/6" "$work/full.txt" | grep -oE 'loss [0-9.]+')
      b=$(grep -E "^step +$s/6" "$work/b.txt" | grep -oE 'loss [0-9.]+')
      [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $s: '$a' vs '$b'"
    done
    ;;
  errors)
    expect "unknown option" "unrecognised option '--bogus'" --bogus 1
    expect "missing data" "does not exist" --data "$work/nothing.txt"
    expect "bad stage" "ZeRO stage 5" --zero-stage 5
    expect "bad dtype" "--dtype 'fp8' is not one of fp32, bf16, fp16" --dtype fp8
    expect "heads" "heads" --width 66 --heads 4
    expect "accumulation" "--gradient-accumulation-steps 0 must be at least 1" --gradient-accumulation-steps 0
    # --micro-batches, the old name of --gradient-accumulation-steps, is gone in 0.3.
    expect "removed flag" "unrecognised option '--micro-batches'" --micro-batches 2
    expect "alias conflict" "--micro-batch-size 2 and --batch 3 disagree" --micro-batch-size 2 --batch 3
    expect "warm-up past the run" "--warmup 50 is outside 0..10 (it may not be longer than the run" \
      --warmup 50 --steps 10
    expect "beta" "--beta2 1 is outside [0, 1)" --beta2 1
    expect "eps" "--adam-eps 0 must be a finite number > 0" --adam-eps 0
    expect "lr" "--lr nan must be a finite number >= 0" --lr nan
    expect "clip" "--clip -1 must be a finite number >= 0" --clip -1
    expect "min lr ratio" "--min-lr-ratio 2 is outside [0, 1]" --min-lr-ratio 2
    expect "schedule" "--lr-schedule 'linear' is not one of cosine, constant" --lr-schedule linear
    expect "scaler on bf16" "--loss-scale applies to --dtype fp16 only" --loss-scale 128
    expect "static + dynamic" "--hysteresis applies to the dynamic scaler" --dtype fp16 --loss-scale 128 --hysteresis 2
    expect "min scale" "--min-loss-scale 1000000 is outside (0, 65536]" --dtype fp16 --min-loss-scale 1e6
    expect "adam flag on sgd" "--beta1 applies to --optimizer adamw, not sgd" --optimizer sgd --beta1 0.5
    expect "log mode" "--json-log-mode 'keep' is not one of new, append, overwrite" \
      --json-log "$work/x.jsonl" --json-log-mode keep
    expect "grad dtype" "gradient dtype" --dtype bf16 --grad-dtype fp16
    printf 'short' > "$work/short.txt"
    expect "data too short" "too short" --data "$work/short.txt"
    expect "config file" "--config $work/missing.cfg: does not exist" --config "$work/missing.cfg"
    expect "bad device" "--device 'tpu' is not one of cpu, cuda" --device tpu
    expect "watchdog" "--watchdog-timeout -1 is outside [0, 1e7] seconds" --watchdog-timeout -1
    expect "huge layers" "layers 100000000 (at most 100000)" --layers 100000000
    expect "huge batch" "tokens per micro-batch, more than the 16777216 allowed" --batch 1000000000
    expect "huge eval" "--eval-batches 1000000000 is outside 1..100000" --eval-batches 1000000000
    expect "huge sample" "--sample-tokens 1000000000 is outside 0..1000000" --sample-tokens 1000000000
    expect "huge threads" "threads 100000 is outside 0..1024" --threads 100000
    expect "shard group" "--shard-group-size 3 does not divide the 2 ranks" --shard-group-size 3
    expect "collectives" "--collectives 'tree' is not one of flat, hierarchical" --collectives tree
    if [ ! -e /dev/nvidia0 ]; then  # no GPU: a CPU build or a CUDA build must refuse cleanly
      expect "cuda without a GPU" "no CUDA" --device cuda
    fi
    ;;
  disagree)
    # Ranks started with different flags (mpirun's MPMD form): before any work, one message
    # naming the flag and both values, non-zero exit on every rank, no hang.
    mpmd() {  # label expected-text args-of-the-last-rank... (the others run $tiny as it is)
      local label=$1 text=$2 np=$3
      shift 3
      timeout 120 "${mpi[@]}" -np $((np - 1)) "$bin" "${tiny[@]}" : -np 1 "$bin" "${tiny[@]}" "$@" \
        > "$work/d.txt" 2>&1
      local rc=$?
      [ $rc -ne 0 ] || fail "$label: exit code 0"
      [ $rc -ne 124 ] || fail "$label: hung"
      grep -qF -- "$text" "$work/d.txt" || { cat "$work/d.txt"; fail "$label: no '$text'"; }
      n=$(grep -c "zs_train: error" "$work/d.txt")
      [ "$n" -eq 1 ] || { cat "$work/d.txt"; fail "$label: $n error lines, expected one"; }
      echo "$label: exit $rc, $(grep 'zs_train: error' "$work/d.txt")"
    }
    mpmd "lr at 2 ranks" "options: ranks disagree on --lr: 0.002 on rank 0, 0.003 on rank 1" 2 --lr 0.003
    mpmd "stage at 4 ranks" "options: ranks disagree on --zero-stage: 3 on rank 0, 1 on rank 3" 4 --zero-stage 1
    mpmd "seed" "options: ranks disagree on --seed: 1234 on rank 0, 7 on rank 1" 2 --seed 7
    mpmd "validation share" "ranks disagree on --val-fraction: 0.1 on rank 0, 0.2 on rank 1" 2 --val-fraction 0.2
    mpmd "shard group" "ranks disagree on --shard-group-size: 0 on rank 0, 2 on rank 3" 4 --shard-group-size 2
    ;;
  hsdp)
    # 4 ranks on 2 fake nodes (ZS_FAKE_NODES=2): hybrid sharding with the nodes as shard groups
    # agrees with flat sharding (losses to 4 decimals) and sends fewer bytes between nodes (the
    # link-class figures of the final line); shard groups of one rank are flat's bits at stage 1;
    # hierarchical collectives train the same model.
    export ZS_FAKE_NODES=2
    run "$work/flat.txt" 4 "${tiny[@]}" --collectives flat || { cat "$work/flat.txt"; fail "flat"; }
    run "$work/hsdp.txt" 4 "${tiny[@]}" --shard-group-size 2 || { cat "$work/hsdp.txt"; fail "hsdp"; }
    # The default across nodes of more than one rank: the two-level collectives.
    run "$work/hier.txt" 4 "${tiny[@]}" || { cat "$work/hier.txt"; fail "hier"; }
    grep -q "collectives: hierarchical (2 nodes x 2 ranks)" "$work/hier.txt" ||
      { grep -i collectives "$work/hier.txt"; fail "the default did not run hierarchical collectives"; }
    losses() { grep -oE '^step +[0-9]+/6 \| loss [0-9.]+' "$1" | awk '{print $NF}' | cut -c1-6; }
    for f in hsdp hier; do
      [ "$(losses "$work/flat.txt")" = "$(losses "$work/$f.txt")" ] ||
        fail "$f losses $(losses "$work/$f.txt" | tr '\n' ' ') vs flat $(losses "$work/flat.txt" | tr '\n' ' ')"
    done
    between() { grep -oE '[0-9.]+ [KMG]?i?B between nodes' "$1" | head -1; }
    to_bytes() { awk '{v=$1; u=$2; m=1; if(u=="KiB")m=1024; if(u=="MiB")m=1048576; if(u=="GiB")m=1073741824; printf "%d\n", v*m}'; }
    bf=$(between "$work/flat.txt" | to_bytes) bh=$(between "$work/hsdp.txt" | to_bytes)
    echo "between nodes per step: flat $bf B, hsdp $bh B"
    [ -n "$bf" ] && [ -n "$bh" ] && [ "$bh" -lt "$bf" ] || fail "hsdp sends $bh B between nodes, flat $bf"
    run "$work/f1.txt" 4 "${tiny[@]}" --zero-stage 1 --collectives flat || fail "flat stage 1"
    run "$work/h1.txt" 4 "${tiny[@]}" --zero-stage 1 --shard-group-size 1 --collectives flat ||
      fail "hsdp 1 stage 1"
    same_hash "shard groups of one rank, stage 1" "$work/f1.txt" "$work/h1.txt"
    unset ZS_FAKE_NODES
    ;;
  nonfinite)
    # Parameters that become non-finite stop the run at once (one message, exit 1 on every
    # rank, no NaN checkpoint or export), and the last good checkpoint still resumes bitwise.
    base=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --warmup 1 --eval-every 0
          --sample-tokens 0 --threads 1 --lr 1e30 --clip 0)
    bad=(--steps 6 --save-dir "$work/ck" --save-every 1 --keep 0
         --export-safetensors "$work/model.safetensors")
    timeout 120 "${mpi[@]}" -np 2 "$bin" "${base[@]}" "${bad[@]}" > "$work/n.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/n.txt"; fail "exit $rc"; }
    grep -q "zs_train: error: step 2: the loss is not finite" "$work/n.txt" ||
      { cat "$work/n.txt"; fail "no non-finite message"; }
    [ "$(grep -c 'zs_train: error' "$work/n.txt")" -eq 1 ] || fail "more than one message"
    [ -d "$work/ck/step-00000001" ] || fail "step 1's checkpoint is missing"
    [ ! -e "$work/ck/step-00000002" ] || fail "a checkpoint was written after the stop"
    [ ! -e "$work/model.safetensors" ] || fail "the non-finite model was exported"
    echo "stopped: $(grep 'zs_train: error' "$work/n.txt")"
    # The last good checkpoint (step 1, inside the warm-up, so --steps does not change it) loads
    # to the bits of an uninterrupted 1-step run.
    run "$work/one.txt" 2 "${base[@]}" --steps 1 || { cat "$work/one.txt"; fail "1-step run"; }
    run "$work/res.txt" 2 "${base[@]}" --steps 1 --save-dir "$work/ck" --resume ||
      { cat "$work/res.txt"; fail "resume"; }
    same_hash "resume from the last good checkpoint" "$work/one.txt" "$work/res.txt"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
