#!/usr/bin/env bash
# zs_run and the memory tier end to end (docs/reliability.md, "Automatic restart" and "Checkpoint
# tiers"), one case per ctest:
#   zs_run_test.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]   (zs_run beside zs_train)
# Cases:
#   refused   no --save-dir in the job's arguments, a bad --world-policy, more ranks than --hosts'
#             slots: one message each, exit 2, nothing launched
#   kill      world-invariant, 2 ranks: one rank kill -9'd mid-run; zs_run relaunches with --resume
#             and the final param_hash is the uninterrupted run's; the log's failure and recovery
#   shrink    --np 4, pow2, ZS_RUN_TEST_SLOTS=3 (3 slots survive): a rank killed, the relaunch runs
#             on 2 ranks and ends with the uninterrupted 4-rank run's param_hash
#   mpirun    mpirun itself kill -9'd mid-run: the ranks it orphaned are killed (they would hold the
#             save directory's lock), the job is relaunched and ends with the uninterrupted hash
#   hosts     --hosts localhost:2,<an unreachable host>:2 --np 4: the launch fails, the probe drops
#             the host, the job goes on 2 ranks on localhost to the end
#   give_up   a job that always fails: --max-restarts 2 gives up at the third failure with one
#             message and exit 1; a refusal (exit 2 before any step) is not restarted
#   stop      SIGTERM to zs_run mid-run: the job is ended (no rank left), not restarted, exit 143
#   restart_fail  the relaunch itself killed while it restarts: launch 1 paused after step 12
#             (ZS_TEST_PAUSE_AFTER_STEP) with step 12's --save-async write begun, not committed
#             (.tmp-step-00000012), a rank kill -9'd; launch 2 resumes from step 8 and pauses
#             before its first step (ZS_TEST_PAUSE_AT_RESUME, once per save directory), a rank
#             kill -9'd; launch 3 resumes from step 8 again (the half-written step 12 unused) and
#             ends with the uninterrupted param_hash; the log's events and their fields, in order
#   memory    --save-memory-every 1: a job killed between disk saves resumes from the memory tier
#             (newer than the disk), bitwise; the tier is removed at the normal end; another run's
#             memory checkpoints are ignored (and removed), the disk's used; a memory directory
#             that cannot be made: one warning, the run completes with disk checkpoints
#   node      on the simulated cluster (scripts/sim_cluster.sh, 2 nodes x 2 ranks; exit 77 where
#             network namespaces cannot be made): node 2's processes kill -9'd and its link cut;
#             zs_run's probe drops it, the job goes on 2 ranks on node 1 and ends with the
#             uninterrupted 4-rank param_hash
#   shm_full  /dev/shm of 256 KiB (a private mount namespace; exit 77 where it cannot be made): the
#             first memory save fails, one warning, the run completes with disk checkpoints
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
zs_run="$(dirname "$bin")/zs_run"
# zs_run's --mpirun and --mpirun-arg from this test's mpirun and its flags.
margs=(--mpirun "${mpi[0]}")
for a in "${mpi[@]:1}"; do margs+=("--mpirun-arg=$a"); done
inv=(--layers 2 --heads 2 --width 64 --context 32 --batch 2 --warmup 2 --eval-every 0
     --eval-batches 1 --sample-tokens 0 --threads 1 --world-invariant --global-micro-batches 8
     --log-every 1)

# wait_line out regex seconds: until a line of out matches the extended regex.
wait_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do grep -qE "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  return 1
}
# wait_step out n seconds: until out holds the line of step n.
wait_step() { wait_line "$1" "^step +$2/" "$3"; }
# wait_paused out n seconds: until out says the job paused after step n (ZS_TEST_PAUSE_AFTER_STEP,
# core/settings.h: every rank sleeps there, so a kill lands at that step and never after the end).
wait_paused() { wait_line "$1" "^paused after step $2 " "$3"; }
# wait_resume_paused out k seconds: until out says a relaunch that resumed from step k paused
# before its first step (ZS_TEST_PAUSE_AT_RESUME, core/settings.h).
wait_resume_paused() { wait_line "$1" "^paused after resuming from step $2 " "$3"; }
# kill_rank ck: kill -9 one rank of the job saving into ck (its command line starts with zs_train
# and names this case's own directory: no other test's process matches). Prints its pid.
kill_rank() {
  local p
  p=$(pgrep -f -- "^$bin .*--save-dir $1 " | tail -1)
  [ -n "$p" ] || return 1
  kill -9 "$p" && echo "$p"
}
# kill_job ck: kill -9 every process of the job (ranks, then mpirun, then zs_run) saving into ck.
kill_job() {
  local p
  for p in $(pgrep -f -- "--save-dir $1 "); do kill -9 "$p" 2> /dev/null; done
}
# supervised out ck log np args...: zs_run in the background (pid in sup_pid), job args after ck.
supervised() {
  local out=$1 ck=$2 log=$3 np=$4
  shift 4
  timeout 300 "$zs_run" --np "$np" "${margs[@]}" --log "$log" -- "$bin" --save-dir "$ck" \
    "${inv[@]}" "$@" > "$out" 2>&1 &
  sup_pid=$!
}
# records log event: the log's records of that event, one JSON object a line.
records() { grep -F "\"event\":\"$2\"" "$1"; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }

case "$case_name" in
  refused)
    "$zs_run" --np 2 "${margs[@]}" -- "$bin" --steps 2 > "$work/o.txt" 2>&1
    rc=$?
    cat "$work/o.txt"
    [ $rc -eq 2 ] || fail "no --save-dir: exit $rc, expected 2"
    grep -q "zs_run: error: .*has no --save-dir: a relaunch resumes from the newest checkpoint" \
      "$work/o.txt" || fail "no --save-dir: the message"
    ! grep -q "zs_run: launch" "$work/o.txt" || fail "launched without --save-dir"
    "$zs_run" --np 2 --world-policy half -- "$bin" --save-dir "$work/ck" > "$work/o.txt" 2>&1
    [ $? -eq 2 ] && grep -q "world-policy half: pow2, same or any" "$work/o.txt" || fail "bad policy"
    "$zs_run" --np 4 --hosts a:1,b:2 -- "$bin" --save-dir "$work/ck" > "$work/o.txt" 2>&1
    [ $? -eq 2 ] && grep -q "np 4 but --hosts a:1,b:2 has 3 slots" "$work/o.txt" || fail "slots"
    ;;
  kill)
    run_ok "$work/ref.txt" 2 "${inv[@]}" --steps 30
    ck="$work/ck"
    ZS_TEST_PAUSE_AFTER_STEP=14 supervised "$work/s.txt" "$ck" "$work/run.jsonl" 2 --steps 30 \
      --save-every 4
    wait_paused "$work/s.txt" 14 120 || { kill_job "$ck"; cat "$work/s.txt"; fail "no pause at 14"; }
    echo "killed rank pid $(kill_rank "$ck")"
    wait "$sup_pid"
    rc=$?
    grep -E "^zs_run|^resumed from" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    [ "$(grep -c 'zs_run: launch' "$work/s.txt")" -eq 2 ] || fail "expected two launches"
    same_hash "uninterrupted vs a rank killed and restarted by zs_run" "$work/ref.txt" "$work/s.txt"
    records "$work/run.jsonl" failure
    records "$work/run.jsonl" recovery
    python3 - "$work/run.jsonl" <<'PY' || fail "the log's records"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
ev = [x["event"] for x in r]
assert ev == ["launch", "failure", "launch", "recovery", "end"], ev
f, rec = r[1], r[3]
assert f["exit_code"] != 0 and f["rank_signal"] == "SIGKILL" and f["new_np"] == 2, f
assert f["last_step"] >= 14 and rec["resumed_step"] % 4 == 0, (f, rec)
assert rec["steps_lost"] == f["last_step"] - rec["resumed_step"] >= 0, rec
assert 0 < rec["seconds_to_first_step"] < 120, rec
print(f"failure after step {f['last_step']}, resumed at {rec['resumed_step']} "
      f"({rec['steps_lost']} steps lost), first step {rec['seconds_to_first_step']:.2f} s later")
PY
    ;;
  shrink)
    run_ok "$work/ref.txt" 4 "${inv[@]}" --steps 24
    ck="$work/ck"
    ZS_RUN_TEST_SLOTS=3 ZS_TEST_PAUSE_AFTER_STEP=10 supervised "$work/s.txt" "$ck" "$work/run.jsonl" \
      4 --steps 24 --save-every 4
    wait_paused "$work/s.txt" 10 180 || { kill_job "$ck"; cat "$work/s.txt"; fail "no pause at 10"; }
    kill_rank "$ck" > /dev/null
    wait "$sup_pid"
    rc=$?
    grep -E "^zs_run|^resumed from|^zeroshard zs_train" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    grep -q "zs_run: 3 slots survive: relaunching on 2 ranks (--world-policy pow2)" "$work/s.txt" ||
      fail "no shrink message"
    grep -q "^zeroshard zs_train: 2 ranks" "$work/s.txt" || fail "the relaunch is not on 2 ranks"
    [ "$(records "$work/run.jsonl" failure | field new_np)" = 2 ] || fail "the log's new_np"
    same_hash "uninterrupted at 4 ranks vs killed at 4, continued at 2" "$work/ref.txt" "$work/s.txt"
    ;;
  restart_fail)
    # Why it cannot race: each kill lands on a paused job (every rank asleep in the hook), launch 1
    # after step 12 and its saves, launch 2 after its checkpoint load; launch 3 pauses nowhere
    # (ZS_TEST_PAUSE_AFTER_STEP needs a run from step 0; the resume pause left its marker in ck).
    run_ok "$work/ref.txt" 2 "${inv[@]}" --steps 24
    ck="$work/ck"
    ZS_TEST_PAUSE_AFTER_STEP=12 ZS_TEST_PAUSE_AT_RESUME=8 supervised "$work/s.txt" "$ck" \
      "$work/run.jsonl" 2 --steps 24 --save-every 4 --save-async
    wait_paused "$work/s.txt" 12 120 || { kill_job "$ck"; cat "$work/s.txt"; fail "no pause at 12"; }
    # Step 12's background write was begun after step 8's was committed; nothing commits it.
    [ -f "$ck/step-00000008/manifest.json" ] && [ -d "$ck/.tmp-step-00000012" ] &&
      [ ! -e "$ck/.tmp-step-00000012/manifest.json" ] && [ ! -e "$ck/step-00000012" ] ||
      { kill_job "$ck"; ls -la "$ck"; fail "not step 8 complete and step 12 half-written"; }
    echo "launch 1 paused after step 12: $(ls -A "$ck" | tr '\n' ' ')"
    echo "killed rank pid $(kill_rank "$ck") of launch 1"
    wait_resume_paused "$work/s.txt" 8 120 ||
      { kill_job "$ck"; cat "$work/s.txt"; fail "launch 2 did not pause at its resume from step 8"; }
    [ -d "$ck/.tmp-step-00000012" ] && [ ! -e "$ck/step-00000012" ] ||
      { kill_job "$ck"; ls -la "$ck"; fail "the half-written step 12 is gone before launch 3"; }
    echo "launch 2 paused after resuming: $(ls -A "$ck" | tr '\n' ' ')"
    echo "killed rank pid $(kill_rank "$ck") of launch 2"
    wait "$sup_pid"
    rc=$?
    grep -E "^zs_run|^resumed from|^paused after" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    [ "$(grep -c 'zs_run: launch' "$work/s.txt")" -eq 3 ] || fail "expected three launches"
    [ "$(grep -c "^resumed from $ck/step-00000008 (step 8," "$work/s.txt")" -eq 2 ] ||
      fail "launches 2 and 3 did not both resume from step 8"
    ! grep -q "^resumed from .*tmp-step" "$work/s.txt" || fail "resumed from a half-written save"
    grep -qE "^zs_run: the job failed \(.*\) before its first step$" "$work/s.txt" ||
      fail "launch 2's failure not said to be before its first step"
    [ "$(cat "$ck/.test-paused-at-resume")" = 8 ] || fail "the resume pause's marker"
    same_hash "uninterrupted vs killed, and killed again while restarting, under zs_run" \
      "$work/ref.txt" "$work/s.txt"
    python3 - "$work/run.jsonl" "$ck" <<'PY' || fail "the log's records"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
ev = [x["event"] for x in r]
# No recovery record for launch 2: one is written at a relaunch's first step line.
assert ev == ["launch", "failure", "launch", "failure", "launch", "recovery", "end"], ev
assert [x["attempt"] for x in r] == [1, 1, 2, 2, 3, 3, 3], r
f1, f2, rec, end = r[1], r[3], r[5], r[6]
for f in (f1, f2):
    assert f["exit_code"] not in (None, 0, 2) and f["rank_signal"] == "SIGKILL", f
    assert f["new_np"] == 2 and f["hosts_lost"] == [], f
# Launch 2 printed no step line: its failure carries launch 1's last step.
assert f1["last_step"] == 12 and f2["last_step"] == 12, (f1, f2)
assert all(x["command"][-1] == "--resume" for x in (r[2], r[4])), (r[2], r[4])
assert rec["resumed_from"] == sys.argv[2] + "/step-00000008" and rec["resumed_step"] == 8, rec
assert rec["steps_lost"] == 4 and 0 < rec["seconds_to_first_step"] < 120, rec
assert end["exit_code"] == 0 and end["last_step"] == 24, end
print(f"failures after step {f1['last_step']} (exit {f1['exit_code']}, rank {f1['rank']}) and "
      f"before launch 2's first step (exit {f2['exit_code']}, rank {f2['rank']}); launch 3 "
      f"resumed at {rec['resumed_step']} ({rec['steps_lost']} steps lost), first step "
      f"{rec['seconds_to_first_step']:.2f} s after the second failure")
PY
    ;;
  mpirun)
    run_ok "$work/ref.txt" 2 "${inv[@]}" --steps 30
    ck="$work/ck"
    ZS_TEST_PAUSE_AFTER_STEP=10 supervised "$work/s.txt" "$ck" "$work/run.jsonl" 2 --steps 30 \
      --save-every 4 --save-memory-every 1
    wait_paused "$work/s.txt" 10 120 || { kill_job "$ck"; cat "$work/s.txt"; fail "no pause at 10"; }
    ranks=$(pgrep -f -- "^$bin .*--save-dir $ck " | tr '\n' ' ')
    kill -9 "$(pgrep -f -- "^${mpi[0]} .*--save-dir $ck ")" || fail "no mpirun found"
    wait "$sup_pid"
    rc=$?
    grep -E "^zs_run|^resumed from" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    grep -qE "zs_run: killed [0-9]+ process(es)? the job left behind" "$work/s.txt" ||
      echo "(no rank outlived mpirun)"
    for p in $ranks; do
      ! grep -q -- "--save-dir $ck " "/proc/$p/cmdline" 2> /dev/null || fail "rank $p of launch 1 alive"
    done
    same_hash "uninterrupted vs mpirun killed and restarted by zs_run" "$work/ref.txt" "$work/s.txt"
    ;;
  hosts)
    ck="$work/ck"
    timeout 300 "$zs_run" --np 4 --hosts localhost:2,zs-no-such-host.invalid:2 --probe-timeout 30 \
      "${margs[@]}" --log "$work/run.jsonl" -- "$bin" "${inv[@]}" --steps 6 --save-dir "$ck" \
      > "$work/s.txt" 2>&1
    rc=$?
    grep -E "^zs_run" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    grep -q "relaunching on 2 ranks" "$work/s.txt" || fail "not relaunched on 2 ranks"
    lost=$(records "$work/run.jsonl" failure | field hosts_lost)
    [ "$lost" = "['zs-no-such-host.invalid']" ] || fail "hosts_lost: $lost"
    grep -qE "^step +6/6" "$work/s.txt" || fail "did not reach the last step"
    ;;
  give_up)
    timeout 120 "$zs_run" --np 1 "${margs[@]}" --max-restarts 2 --log "$work/run.jsonl" -- \
      sh -c 'echo step; exit 3' --save-dir "$work/ck" > "$work/s.txt" 2>&1
    rc=$?
    cat "$work/s.txt"
    [ $rc -eq 1 ] || fail "exit $rc, expected 1"
    [ "$(grep -c 'zs_run: launch' "$work/s.txt")" -eq 3 ] || fail "expected 3 launches"
    [ "$(grep -c 'zs_run: giving up' "$work/s.txt")" -eq 1 ] || fail "expected one giving-up line"
    grep -q "zs_run: giving up: 3 failures within 60 minutes, more than --max-restarts 2 allows" \
      "$work/s.txt" || fail "the message"
    [ "$(records "$work/run.jsonl" give_up | wc -l)" -eq 1 ] || fail "the log's give_up"
    # zs_train refusing its flags (exit 2 before a step) is not restarted.
    timeout 120 "$zs_run" --np 2 "${margs[@]}" -- "$bin" --save-dir "$work/ck2" --steps -1 \
      > "$work/r.txt" 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat "$work/r.txt"; fail "refused flags: exit $rc"; }
    [ "$(grep -c 'zs_run: launch' "$work/r.txt")" -eq 1 ] || fail "a refused job was relaunched"
    grep -q "giving up: the job was refused before its first step" "$work/r.txt" || fail "refusal"
    ;;
  stop)
    ck="$work/ck"
    supervised "$work/s.txt" "$ck" "$work/run.jsonl" 2 --steps 100000 --save-every 50
    wait_step "$work/s.txt" 5 120 || { kill_job "$ck"; cat "$work/s.txt"; fail "no step 5"; }
    kill -TERM "$sup_pid"
    wait "$sup_pid"
    rc=$?
    tail -3 "$work/s.txt"
    [ $rc -eq 143 ] || fail "exit $rc, expected 143"
    [ "$(grep -c 'zs_run: launch' "$work/s.txt")" -eq 1 ] || fail "relaunched after SIGTERM"
    grep -q "zs_run: stopped by SIGTERM" "$work/s.txt" || fail "no stop message"
    sleep 1
    ! pgrep -f -- "--save-dir $ck " > /dev/null || { kill_job "$ck"; fail "processes left"; }
    ;;
  memory)
    run_ok "$work/ref.txt" 2 "${inv[@]}" --steps 20
    ck="$work/ck"
    ZS_TEST_PAUSE_AFTER_STEP=14 "${mpi[@]}" -np 2 "$bin" "${inv[@]}" --steps 20 --save-dir "$ck" \
      --save-every 10 --save-memory-every 1 > "$work/a.txt" 2>&1 &
    mpid=$!
    wait_paused "$work/a.txt" 14 120 || { kill_job "$ck"; cat "$work/a.txt"; fail "no pause at 14"; }
    kill_job "$ck"
    wait "$mpid" 2> /dev/null
    run_id=$(python3 -c "import json; print(json.load(open('$ck/owner.json'))['run_id'])")
    mem="/dev/shm/zeroshard-$run_id"
    echo "killed; disk: $(ls "$ck" | tr '\n' ' '); memory: $(ls "$mem" | tr '\n' ' ')"
    run_ok "$work/b.txt" 2 "${inv[@]}" --steps 20 --save-dir "$ck" --save-every 10 \
      --save-memory-every 1 --resume
    grep -E "^resume|^resumed|^memory tier" "$work/b.txt"
    grep -qE "^resumed from $mem/step-000000(1[1-9]) " "$work/b.txt" || fail "not resumed from memory"
    same_hash "uninterrupted vs resumed from the memory tier" "$work/ref.txt" "$work/b.txt"
    [ ! -e "$mem" ] || fail "$mem left after the normal end"
    # Another run's memory checkpoints in --memory-dir: never loaded.
    m2="$work/shm-other"
    ZS_TEST_PAUSE_AFTER_STEP=12 "${mpi[@]}" -np 2 "$bin" "${inv[@]}" --steps 20 --save-dir "$work/ckA" \
      --save-memory-every 1 --memory-dir "$m2" > "$work/c.txt" 2>&1 &
    mpid=$!
    wait_paused "$work/c.txt" 12 120 || { kill_job "$work/ckA"; cat "$work/c.txt"; fail "no pause at 12"; }
    kill_job "$work/ckA"
    wait "$mpid" 2> /dev/null
    # Run B's checkpoint of step 4 (its step 8 removed: as if killed after step 4's save).
    run_ok "$work/ref8.txt" 2 "${inv[@]}" --steps 8 --save-dir "$work/ckB" --save-every 4
    rm -rf "$work/ckB/step-00000008"
    run_ok "$work/e.txt" 2 "${inv[@]}" --steps 8 --save-dir "$work/ckB" --save-every 4 \
      --save-memory-every 1 --memory-dir "$m2" --resume
    grep -E "^resume|^resumed|^memory tier" "$work/e.txt"
    grep -q "^resume: ignored in the memory tier $m2: step-000000" "$work/e.txt" || fail "not said"
    grep -q "^resumed from $work/ckB/step-00000004 " "$work/e.txt" || fail "not resumed from disk"
    grep -q "^memory tier $m2: removed the memory checkpoints of run " "$work/e.txt" ||
      fail "the other run's memory checkpoints were not removed"
    same_hash "uninterrupted vs resumed past another run's memory checkpoints" "$work/ref8.txt" "$work/e.txt"
    # A memory directory that cannot be made: one warning, disk checkpoints only.
    touch "$work/file"
    run_ok "$work/f.txt" 2 "${inv[@]}" --steps 4 --save-dir "$work/ckC" --save-memory-every 1 \
      --memory-dir "$work/file/shm"
    grep "warning" "$work/f.txt"
    [ "$(grep -c 'zs_train: warning: --save-memory-every: the memory tier cannot be used' "$work/f.txt")" -eq 1 ] ||
      fail "expected one warning"
    [ -f "$work/ckC/step-00000004/manifest.json" ] || fail "no disk checkpoint"
    ;;
  node)
    [ -n "${ZS_SIM_ID:-}" ] || {  # re-run inside a simulated cluster of 2 nodes x 2 ranks
      sim="$(dirname "$(dirname "$(dirname "${BASH_SOURCE[0]}")")")/scripts/sim_cluster.sh"
      exec bash "$sim" --nodes 2 --ranks-per-node 2 --rate none --timeout 360 -- \
        bash "${BASH_SOURCE[0]}" node "$bin" "$work" "$mpirun" "$@"
    }
    sim=()
    for a in $ZS_SIM_MPIRUN_ARGS; do sim+=("$a"); done
    # zs_run gives --host itself: the simulated cluster's arguments without it.
    sargs=()
    for ((i = 0; i < ${#sim[@]}; i++)); do
      [ "${sim[i]}" = --host ] && { i=$((i + 1)); continue; }
      sargs+=("--mpirun-arg=${sim[i]}")
    done
    "$mpirun" "${sim[@]}" -np 4 "$bin" "${inv[@]}" --steps 24 > "$work/ref.txt" 2>&1 ||
      { cat "$work/ref.txt"; fail "the uninterrupted run on the simulated cluster"; }
    ck="$work/ck"
    timeout 300 "$zs_run" --np 4 --hosts "$ZS_SIM_HOSTS" --probe-timeout 15 --mpirun "$mpirun" \
      "${sargs[@]}" --log "$work/run.jsonl" -- "$bin" --save-dir "$ck" "${inv[@]}" --steps 24 \
      --save-every 4 --watchdog-timeout 10 > "$work/s.txt" 2>&1 &
    sup_pid=$!
    wait_step "$work/s.txt" 10 180 || { kill_job "$ck"; cat "$work/s.txt"; fail "no step 10"; }
    node2="zs-$ZS_SIM_ID-n2"
    # The processes first, so that their connections close (mpirun then sees its daemon gone),
    # then the link, so that the probe cannot reach the node.
    for p in $(ip netns pids "$node2"); do kill -9 "$p" 2> /dev/null; done
    sleep 0.5
    ip -n "zs-$ZS_SIM_ID-head" link set zsv2 down
    echo "node 2 lost after step $(grep -cE '^step +[0-9]+/' "$work/s.txt")"
    wait "$sup_pid"
    rc=$?
    grep -E "^zs_run|^resumed from|^zeroshard zs_train" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "zs_run exit $rc"; }
    lost=$(records "$work/run.jsonl" failure | head -1 | field hosts_lost)
    echo "hosts lost: $lost"
    grep -q "relaunching on 2 ranks" "$work/s.txt" || fail "not relaunched on 2 ranks"
    records "$work/run.jsonl" recovery
    same_hash "uninterrupted at 4 ranks on 2 nodes vs node 2 lost, continued on node 1" \
      "$work/ref.txt" "$work/s.txt"
    ;;
  shm_full)
    command -v unshare > /dev/null || { echo "SKIP: no unshare"; exit 77; }
    unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm' 2> /dev/null ||
      { echo "SKIP: cannot mount a private /dev/shm (needs root and mount namespaces)"; exit 77; }
    ZS_COLLECTIVES_SHM=0 timeout 120 unshare -m sh -c \
      'mount -t tmpfs -o size=256k tmpfs /dev/shm && exec "$@"' sh \
      "${mpi[@]}" -x ZS_COLLECTIVES_SHM -np 2 "$bin" "${inv[@]}" --steps 6 --save-dir "$work/ck" \
      --save-every 3 --save-memory-every 1 > "$work/s.txt" 2>&1
    rc=$?
    grep -E "warning|saved" "$work/s.txt"
    [ $rc -eq 0 ] || { cat "$work/s.txt"; fail "exit $rc with a full /dev/shm"; }
    [ "$(grep -c 'zs_train: warning: the memory checkpoint of step 1 failed' "$work/s.txt")" -eq 1 ] ||
      fail "expected one warning at step 1"
    ! grep -q "saved memory checkpoint" "$work/s.txt" || fail "a memory checkpoint after the warning"
    [ -f "$work/ck/step-00000006/manifest.json" ] || fail "no disk checkpoint"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
