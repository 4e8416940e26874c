#!/usr/bin/env bash
# zs_train with ZeRO++'s three techniques together (issue 29), on 4 ranks over 2 fake nodes
# (ZS_FAKE_NODES=2), one case per ctest; each case is a failure DeepSpeed's tracker reports:
#   zs_train_zeropp.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   odd      #4852 (qwZ crashes): sizes that are not multiples of anything (width 40, context 17,
#            vocab 263) with blocks larger than whole parameters (1024): it trains, the same
#            bits twice
#   nodes    #4886 (loss going to infinity across nodes) and #6926 (gradient norm stuck at 0):
#            every step's loss and gradient norm are finite and > 0, the norm within 10% of plain
#            ZeRO-3's at every step, the last loss within 2%; fewer bytes between nodes
#   fp16     the same with fp16 and the dynamic loss scaler: the loss scale and the skipped steps
#            follow plain ZeRO-3's (an overflow in a quantized gradient is still seen)
#   resume   #7606 (a bad first loss after resume): a resumed run's first loss and its final bits
#            equal the uninterrupted run's
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

export ZS_FAKE_NODES=2
zpp=(--zero-quantized-weights --zero-hpz-partition-size 2 --zero-quantized-gradients)
py=/usr/bin/python3

# field LOG NAME: NAME of every step record, one per line.
field() { grep '"type":"step"' "$1" | grep -oE "\"$2\":[^,}]*" | cut -d: -f2; }
inter_of() { grep -oE '[0-9.]+ [KMG]?i?B between nodes' "$1" | head -1; }

# compare PLAIN_LOG ZPP_LOG TOL_NORM: losses and norms finite and > 0, norms within TOL_NORM of
# plain's at every step, the last loss within 2%, loss scale and skipped flags equal.
compare() {
  "$py" - "$1" "$2" "$3" <<'PY' || fail "the ZeRO++ run strays from plain ZeRO-3 (above)"
import json, math, sys
def steps(p):
    return [r for r in map(json.loads, open(p)) if r.get("type") == "step"]
plain, zpp, tol = steps(sys.argv[1]), steps(sys.argv[2]), float(sys.argv[3])
assert len(plain) == len(zpp) > 0, (len(plain), len(zpp))
worst = 0.0
for p, q in zip(plain, zpp):
    for k in ("loss", "grad_norm"):
        assert math.isfinite(q[k]) and q[k] > 0, f"step {q['step']}: {k} {q[k]}"
    assert q["loss_scale"] == p["loss_scale"], f"step {q['step']}: loss scale {q['loss_scale']} vs {p['loss_scale']}"
    assert q["skipped"] == p["skipped"], f"step {q['step']}: skipped {q['skipped']} vs {p['skipped']}"
    if not p["skipped"]:
        worst = max(worst, abs(q["grad_norm"] - p["grad_norm"]) / p["grad_norm"])
last = abs(zpp[-1]["loss"] - plain[-1]["loss"]) / plain[-1]["loss"]
print(f"{len(zpp)} steps: gradient norm within {100 * worst:.2f}% of plain ZeRO-3's at every step, "
      f"last loss {zpp[-1]['loss']:.4f} vs {plain[-1]['loss']:.4f} ({100 * last:+.2f}%), "
      f"loss scales and skips equal")
assert worst <= tol, f"gradient norm differs by {100 * worst:.2f}% > {100 * tol:.0f}%"
assert last <= 0.02, f"last loss differs by {100 * last:.2f}%"
PY
}

case "$case_name" in
  odd)
    odd=(--layers 2 --heads 2 --width 40 --context 17 --vocab 263 --batch 4 --warmup 2
         --eval-every 3 --eval-batches 1 --sample-tokens 8 --threads 1)
    blocks=(--zero-quantized-weights-block 1024 --zero-quantized-gradients-block 1024)
    run_ok "$work/a.txt" 4 "${odd[@]}" --steps 4 "${zpp[@]}" "${blocks[@]}"
    run_ok "$work/b.txt" 4 "${odd[@]}" --steps 4 "${zpp[@]}" "${blocks[@]}"
    same_hash "odd sizes, blocks of 1024, twice" "$work/a.txt" "$work/b.txt"
    ;;
  nodes | fp16)
    extra=()
    [ "$case_name" = fp16 ] && extra=(--dtype fp16)
    run_ok "$work/p.txt" 4 "${tiny[@]}" --steps 12 "${extra[@]}" --json-log "$work/p.jsonl"
    run_ok "$work/z.txt" 4 "${tiny[@]}" --steps 12 "${extra[@]}" "${zpp[@]}" --json-log "$work/z.jsonl"
    compare "$work/p.jsonl" "$work/z.jsonl" 0.10
    echo "between nodes per step: plain $(inter_of "$work/p.txt"), ZeRO++ $(inter_of "$work/z.txt")"
    [ "$(inter_of "$work/p.txt")" != "$(inter_of "$work/z.txt")" ] || fail "no fewer bytes between nodes"
    ;;
  resume)
    run_ok "$work/a.txt" 4 "${tiny[@]}" "${zpp[@]}" --steps 8 --save-dir "$work/ckpt" --save-every 4 \
      --json-log "$work/a.jsonl"
    run_ok "$work/b.txt" 4 "${tiny[@]}" "${zpp[@]}" --steps 8 --resume-from "$work/ckpt/step-00000004" \
      --json-log "$work/b.jsonl"
    grep -qF "resumed from $work/ckpt/step-00000004" "$work/b.txt" || { cat "$work/b.txt"; fail "not resumed"; }
    same_hash "uninterrupted vs resumed at step 4" "$work/a.txt" "$work/b.txt"
    a5=$(field "$work/a.jsonl" loss | sed -n 5p) b1=$(field "$work/b.jsonl" loss | head -1)
    [ -n "$a5" ] && [ "$a5" = "$b1" ] || fail "the first loss after resume '$b1' is not the uninterrupted run's '$a5'"
    echo "first loss after resume $b1 = uninterrupted"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
