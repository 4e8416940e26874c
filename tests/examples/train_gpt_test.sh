#!/usr/bin/env bash
# End-to-end checks of train_gpt under mpirun, one case per ctest:
#   train_gpt_test.sh CASE TRAIN_GPT WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   stages     stages 0-3 at 2 ranks print the same param_hash (bf16 and fp32), and so does
#              optimizer offload; the loss falls
#   json       --json-log writes one object per step and a final object with the fixed keys
#   resume     save at step 3 of 6, resume: the same param_hash and losses as the uninterrupted run
#   errors     bad input: one clear message, non-zero exit on every rank, no hang
#   isa        our kernels capped at scalar, avx2 and avx512 (ZS_MAX_ISA) give the same
#              param_hash (fp32 and bf16, resident and offloaded Adam); the first lines name the
#              paths taken; a bad cap is refused on every rank
set -uo pipefail
case_name=$1 bin=$2 work=$3 mpirun=$4
shift 4
mpi=("$mpirun" "$@")
rm -rf "$work" && mkdir -p "$work"
tiny=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --steps 6 --warmup 2 --eval-every 3
      --eval-batches 1 --sample-tokens 8 --threads 1)
fail() { echo "FAIL: $*"; exit 1; }
hash_of() { grep -oE 'param_hash: [0-9a-f]+' "$1" | awk '{print $2}'; }

run() {  # out np args...
  local out=$1 np=$2
  shift 2
  "${mpi[@]}" -np "$np" "$bin" "$@" > "$out" 2>&1
}

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
steps = [r for r in rows if not r.get("final")]
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
k = f["kernels"]
for key in ("cpu", "features", "isa", "isa_cap", "onednn_isa_cap", "gemm", "gemm_dtype",
            "conversions", "elementwise", "cpu_adam", "reductions"):
    assert isinstance(k[key], str) and k[key], (key, k)
assert k["isa"] in ("scalar", "avx2", "avx512") and k["gemm"].startswith("onednn"), k
print("json log ok:", len(steps), "steps, final keys", sorted(f))
PY
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
    expect() {  # label expected-text args...
      local label=$1 text=$2
      shift 2
      timeout 120 "${mpi[@]}" -np 2 "$bin" "$@" > "$work/e.txt" 2>&1
      local rc=$?
      [ $rc -ne 0 ] || fail "$label: exit code 0"
      [ $rc -ne 124 ] || fail "$label: hung"
      grep -q -- "$text" "$work/e.txt" || { cat "$work/e.txt"; fail "$label: no '$text'"; }
      n=$(grep -c "train_gpt: error" "$work/e.txt")
      [ "$n" -eq 1 ] || { cat "$work/e.txt"; fail "$label: $n error lines, expected one"; }
      echo "$label: exit $rc, $(grep 'train_gpt: error' "$work/e.txt")"
    }
    expect "unknown option" "unrecognised option '--bogus'" --bogus 1
    expect "missing data" "does not exist" --data "$work/nothing.txt"
    expect "bad stage" "ZeRO stage 5" --zero-stage 5
    expect "bad dtype" "unknown dtype 'fp8'" --dtype fp8
    expect "heads" "heads" --width 66 --heads 4
    expect "micro-batches" "micro" --micro-batches 0
    expect "grad dtype" "gradient dtype" --dtype bf16 --grad-dtype fp16
    printf 'short' > "$work/short.txt"
    expect "data too short" "too short" --data "$work/short.txt"
    expect "config file" "cannot be read" --config "$work/missing.cfg"
    expect "bad device" "--device must be cpu or cuda" --device tpu
    if [ ! -e /dev/nvidia0 ]; then  # no GPU: a CPU build or a CUDA build must refuse cleanly
      expect "cuda without a GPU" "no CUDA" --device cuda
    fi
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
