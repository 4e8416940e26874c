#!/usr/bin/env bash
# zs_train --save-async end to end (docs/checkpoints.md, "Asynchronous saves"), one case per ctest:
#   zs_train_save_async.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   same     at 1, 2 and 4 ranks, ZeRO stages 1 and 3: the checkpoints written with --save-async
#            are byte for byte those of a synchronous save of the same steps (shard files, and the
#            manifests but for the run id), and the param_hash is the same
#   resume   a run resumed from an asynchronous checkpoint ends with the uninterrupted run's
#            param_hash; the JSON log has one "save" record per save with its stall and write time
#   overlap  --save-every 1 with each background write slowed (ZS_TEST_SAVE_DELAY_MS, tests only):
#            every save finds the previous write running, waits and says so; every checkpoint is
#            complete; the bits are those of a run that does not save
#   kill     the job killed (kill -9, every rank and mpirun) while a background write is in flight:
#            the previous checkpoint is complete, the interrupted one is not, --resume continues
#            from the previous one to the uninterrupted run's param_hash
#   error    the temporary directory of an in-flight write replaced by a file: one clear message,
#            a non-zero exit of every rank, no hang, no complete checkpoint of that step
#   plan     zs_plan --save-async counts the snapshot: the size of rank 0's shard file, at stages
#            0, 1 and 3, and its table has the row; the memory check's refusal names it
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

# same_files label dir-a dir-b step...: the checkpoints of each step hold the same files, the
# shards byte for byte, the manifests equal but for the run id.
same_files() {
  local label=$1 a=$2 b=$3 st d f
  shift 3
  for st in "$@"; do
    d=$(printf 'step-%08d' "$st")
    [ -f "$a/$d/manifest.json" ] && [ -f "$b/$d/manifest.json" ] || fail "$label: $d incomplete"
    [ "$(ls "$a/$d")" = "$(ls "$b/$d")" ] || fail "$label: $d holds other files"
    for f in "$a/$d"/shard-*.bin; do
      cmp -s "$f" "$b/$d/$(basename "$f")" || fail "$label: $d/$(basename "$f") differs"
    done
    python3 - "$a/$d/manifest.json" "$b/$d/manifest.json" <<'PY' || fail "$label: $d's manifests differ"
import json, sys
a, b = (json.load(open(p))["body"] for p in sys.argv[1:])
for m in (a, b):
    m.pop("run_id", None)
sys.exit(a != b)
PY
  done
}

# kill_job pattern mpirun-pid: kill -9 the ranks whose command line holds `pattern` (this case's
# own save directory), then mpirun.
kill_job() {
  local p
  for p in $(pgrep -f -- "$1"); do [ "$p" != "$2" ] && kill -9 "$p" 2>/dev/null; done
  kill -9 "$2" 2>/dev/null
  wait "$2" 2>/dev/null
}

# wait_for file seconds: until the path exists.
wait_for() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
  return 1
}

case "$case_name" in
  same)
    for np in 1 2 4; do
      for stage in 1 3; do
        l="np $np stage $stage"
        run_ok "$work/s.txt" "$np" "${tiny[@]}" --steps 4 --zero-stage "$stage" \
          --save-dir "$work/s$np$stage" --save-every 2 --keep 0
        run_ok "$work/a.txt" "$np" "${tiny[@]}" --steps 4 --zero-stage "$stage" \
          --save-dir "$work/a$np$stage" --save-every 2 --keep 0 --save-async
        grep -q "written in background" "$work/a.txt" || { cat "$work/a.txt"; fail "$l: no async save line"; }
        same_files "$l" "$work/s$np$stage" "$work/a$np$stage" 2 4
        same_hash "$l: sync vs async" "$work/s.txt" "$work/a.txt"
        echo "$l: steps 2 and 4 identical ($(ls "$work/a$np$stage/step-00000004" | tr '\n' ' '))"
      done
    done
    ;;
  resume)
    run_ok "$work/ref.txt" 2 "${tiny[@]}" --steps 12
    run_ok "$work/a.txt" 2 "${tiny[@]}" --steps 12 --save-dir "$work/ck" --save-every 6 \
      --save-async --json-log "$work/a.jsonl"
    run_ok "$work/b.txt" 2 "${tiny[@]}" --steps 12 --resume-from "$work/ck/step-00000006"
    grep -qF "resumed from $work/ck/step-00000006" "$work/b.txt" || { cat "$work/b.txt"; fail "not resumed"; }
    same_hash "uninterrupted vs resumed from an async checkpoint at step 6" "$work/ref.txt" "$work/b.txt"
    same_hash "uninterrupted vs saving asynchronously" "$work/ref.txt" "$work/a.txt"
    python3 - "$work/a.jsonl" <<'PY' || fail "the log's save records"
import json, sys
saves = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "save"]
assert [r["step"] for r in saves] == [6, 12], saves
for r in saves:
    assert r["async"] and r["stall_s"] >= r["snapshot_s"] >= 0 and r["write_s"] > 0, r
    assert abs(r["stall_s"] - r["snapshot_s"] - r["waited_s"] - r["commit_s"]) < 1e-6, r
    assert r["bytes"] > 0, r
print("save records:", [(r["step"], round(r["stall_s"], 4), round(r["write_s"], 4)) for r in saves])
PY
    ;;
  overlap)
    run_ok "$work/ref.txt" 2 "${tiny[@]}" --steps 4
    ZS_TEST_SAVE_DELAY_MS=700 timeout 120 "${mpi[@]}" -x ZS_TEST_SAVE_DELAY_MS -np 2 "$bin" "${tiny[@]}" \
      --steps 4 --save-dir "$work/ck" --save-every 1 --keep 0 --save-async \
      --json-log "$work/a.jsonl" > "$work/a.txt" 2>&1 || { cat "$work/a.txt"; fail "exit $?"; }
    grep -E "still running|end of run|saved checkpoint" "$work/a.txt"
    n=$(grep -c "was still running; waited" "$work/a.txt")
    [ "$n" -eq 3 ] || fail "$n saves said they waited, expected 3 (steps 2, 3, 4)"
    for st in 1 2 3 4; do
      [ -f "$work/ck/step-0000000$st/manifest.json" ] || fail "step $st incomplete"
    done
    ! ls -A "$work/ck" | grep -q '^\.tmp' || fail "a temporary directory is left"
    same_hash "no saves vs a background write every step" "$work/ref.txt" "$work/a.txt"
    python3 - "$work/a.jsonl" <<'PY' || fail "the log's save records"
import json, sys
saves = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "save"]
assert [r["step"] for r in saves] == [1, 2, 3, 4], saves
for r in saves[1:]:
    assert r["waited_s"] > 0.2 and r["stall_s"] >= r["waited_s"], r
assert saves[-1]["final_wait_s"] > 0.2, saves[-1]
print("waits:", [round(r["waited_s"], 3) for r in saves], "end:", round(saves[-1]["final_wait_s"], 3))
PY
    ;;
  kill)
    run_ok "$work/ref.txt" 2 "${tiny[@]}" --steps 8
    ck="$work/ck"
    ZS_TEST_SAVE_DELAY_MS=4000 "${mpi[@]}" -x ZS_TEST_SAVE_DELAY_MS -np 2 "$bin" "${tiny[@]}" \
      --steps 8 --save-dir "$ck" --save-every 4 --save-async > "$work/k.txt" 2>&1 &
    mpid=$!
    # Step 4's write ends after 4 s and is committed at step 8's save, whose write then sleeps.
    if ! wait_for "$ck/step-00000004/manifest.json" 60 || ! wait_for "$ck/.tmp-step-00000008" 10; then
      kill_job "--save-dir $ck " "$mpid"; cat "$work/k.txt"; fail "step 4 not committed, or step 8 not started"
    fi
    kill_job "--save-dir $ck " "$mpid"
    [ ! -e "$ck/step-00000008" ] || fail "step 8 completed before the kill"
    echo "killed during step 8's background write: $(ls -A "$ck" | tr '\n' ' ')"
    run_ok "$work/r.txt" 2 "${tiny[@]}" --steps 8 --save-dir "$ck" --save-every 4 --save-async --resume
    grep -qF "resumed from $ck/step-00000004" "$work/r.txt" || { cat "$work/r.txt"; fail "not resumed from step 4"; }
    same_hash "uninterrupted vs killed during a background write and resumed" "$work/ref.txt" "$work/r.txt"
    [ -f "$ck/step-00000008/manifest.json" ] && [ ! -e "$ck/.tmp-step-00000008" ] ||
      fail "the resumed run's step 8 checkpoint"
    ;;
  error)
    ck="$work/ck"
    ZS_TEST_SAVE_DELAY_MS=3000 timeout 120 "${mpi[@]}" -x ZS_TEST_SAVE_DELAY_MS -np 2 "$bin" "${tiny[@]}" \
      --steps 6 --save-dir "$ck" --save-every 2 --save-async > "$work/e.txt" 2>&1 &
    tpid=$!
    wait_for "$ck/.tmp-step-00000002" 60 || { kill "$tpid"; cat "$work/e.txt"; fail "no write started"; }
    # The write sleeps before it opens its file: its directory is now a file.
    rm -rf "$ck/.tmp-step-00000002" && touch "$ck/.tmp-step-00000002"
    wait "$tpid"
    rc=$?
    cat "$work/e.txt"
    [ $rc -ne 124 ] || fail "hung after a failed background write"
    [ $rc -ne 0 ] || fail "exit code 0 after a failed background write"
    n=$(grep -c "zs_train: error" "$work/e.txt")
    [ "$n" -eq 1 ] || fail "$n error lines, expected one"
    grep -q "zs_train: error: the background write of checkpoint step 2 failed: .*shard-0000" "$work/e.txt" ||
      fail "the message does not name the step and the file"
    grep -qiE "exited with non-zero|non-zero status|exit code" "$work/e.txt" || echo "(mpirun named no rank's status)"
    [ ! -e "$ck/step-00000002" ] || fail "step 2 was committed"
    echo "failed background write: exit $rc"
    ;;
  plan)
    plan_bin="$(dirname "$bin")/zs_plan"
    for stage in 0 1 3; do
      run_ok "$work/p.txt" 2 "${tiny[@]}" --steps 2 --zero-stage "$stage" --save-dir "$work/p$stage" --save-async
      have=$(stat -c %s "$work/p$stage/step-00000002/shard-00000.bin")
      want=$("$plan_bin" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 --batch 4 --ranks 2 \
        --zero-stage "$stage" --save-async --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["save_async_snapshot_bytes"])') ||
        fail "zs_plan, stage $stage"
      echo "stage $stage: zs_plan's snapshot $want bytes, rank 0's shard file $have bytes"
      [ "$have" = "$want" ] || fail "stage $stage: zs_plan counts $want, the file has $have"
    done
    "$plan_bin" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 --batch 4 --ranks 2 --save-async |
      grep -q "checkpoint snapshot" || fail "zs_plan's table has no snapshot row"
    # The memory check before work counts it too: an oversized model's refusal names it.
    expect "oversized, --save-async" "checkpoint snapshot" --steps 2 --layers 48 --width 8192 \
      --heads 64 --threads 1 --save-dir "$work/big" --save-async
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
