#!/usr/bin/env bash
# zs_train's checkpoints under misuse (docs/checkpoints.md), one case per ctest:
#   zs_train_ckpt_misuse.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   lora_fp32  a LoRA fine-tune on an fp32 base (--init-safetensors from a short pretrain), killed
#              after step 3's save, continues with --resume: steps 4-6 and param_hash equal the
#              uninterrupted run's; it also continues at 1 rank; a changed --lora-alpha is refused
#              naming it and both values
#   lora_bf16  the same on a bf16 base from --init-from-hf; --resume-from with the same weights
#              from --init-safetensors is the same base; without the base, or on another
#              pretrain's, the resume is refused naming both bases and where each came from
#   lora_int8  the same on an int8 base (--int8-compute dequantize) with --resume-from; a changed
#              --base-dtype and --lora-rank are refused naming them
#   owner      a fresh run into a --save-dir holding another run's checkpoints is refused before
#              any step (naming the directory, its steps and the choices) and changes nothing;
#              --overwrite replaces them with a note; --resume-from into another run's directory
#              is refused
#   lock       a second job saving into a directory another job is writing is refused, naming
#              the first one's pid and host; the first one finishes
#   shared     ranks that see different directories under one --save-dir (each rank in its own
#              working directory, a relative path) are refused before any work
# Refusals: one message, non-zero exit on every rank, no step taken.
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
# Open MPI's session directory: one per test (concurrent mpiruns collide otherwise), short (it
# holds sockets).
export OMPI_MCA_orte_tmpdir_base=$(mktemp -d)
trap 'rm -rf "$OMPI_MCA_orte_tmpdir_base"' EXIT
same_tail() {  # label full resumed: steps 4-6 losses and param_hash bitwise
  local s a b
  for s in 4 5 6; do
    a=$(grep -E "^step +$s/6" "$2" | grep -oE 'loss [0-9.]+')
    b=$(grep -E "^step +$s/6" "$3" | grep -oE 'loss [0-9.]+')
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$1: step $s: '$a' vs '$b'"
  done
  a=$(hash_of "$2") b=$(hash_of "$3")
  echo "$1: steps 4-6 $(grep -E '^step +[456]/6' "$3" | grep -oE '\| loss [0-9.]+' | tr -d '|' | tr '\n' ' ')| param_hash $a vs $b"
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$1: param_hash '$a' vs '$b'"
}

# A short pretrain: the base the fine-tunes start from.
pretrain() {
  run_ok "$work/pre.txt" 2 "${tiny[@]}" --steps 3 --export-safetensors "$work/base.safetensors" \
    --export-hf "$work/base-hf"
}

# lora_case BASE_DTYPE INIT_FLAG INIT_PATH RESUME_MODE [extra flags]: the uninterrupted 6-step
# fine-tune saving at 3 and 6; its step-6 checkpoint removed (killed after step 3's save); the
# resumed run; the resume at 1 rank.
lora_case() {
  local dtype=$1 init_flag=$2 init=$3 mode=$4
  shift 4
  pretrain
  ft=("${tiny[@]}" --steps 6 --lora-rank 4 --base-dtype "$dtype" "$@")
  run_ok "$work/full.txt" 2 "${ft[@]}" "$init_flag" "$init" --save-dir "$work/ck" --save-every 3 --keep 0
  grep -q "frozen" "$work/full.txt" || fail "no frozen base in the fine-tune"
  cp -r "$work/ck" "$work/ck1"
  rm -rf "$work/ck/step-00000006"
  if [ "$mode" = resume ]; then
    run_ok "$work/res.txt" 2 "${ft[@]}" "$init_flag" "$init" --save-dir "$work/ck" --resume
  else
    run_ok "$work/res.txt" 2 "${ft[@]}" "$init_flag" "$init" --resume-from "$work/ck/step-00000003"
  fi
  grep -q "resumed from .*step-00000003" "$work/res.txt" || { cat "$work/res.txt"; fail "not resumed"; }
  same_tail "$dtype base, --$mode (step 3)" "$work/full.txt" "$work/res.txt"
  # Another world size: completes (the sums run in another order: no bitwise claim).
  run_ok "$work/one.txt" 1 "${ft[@]}" "$init_flag" "$init" --resume-from "$work/ck1/step-00000003"
  grep -qE '^step +6/6' "$work/one.txt" || fail "the 1-rank resume did not reach step 6"
  echo "$dtype base: resumed at 1 rank from a 2-rank checkpoint: $(grep -oE 'param_hash: [0-9a-f]+' "$work/one.txt")"
}

case "$case_name" in
  lora_fp32)
    lora_case fp32 --init-safetensors "$work/base.safetensors" resume
    expect "changed --lora-alpha" '--lora-alpha 16.0 in this run, 8.0 in the checkpoint' \
      "${ft[@]}" --lora-alpha 16 --init-safetensors "$work/base.safetensors" \
      --resume-from "$work/ck1/step-00000003"
    ;;
  lora_bf16)
    lora_case bf16 --init-from-hf "$work/base-hf" resume
    # The frozen base is not in the checkpoint: resuming without it is refused, naming both.
    expect "resume without the base" \
      "trained on frozen base" "${ft[@]}" --resume-from "$work/ck1/step-00000003"
    grep -qE "trained on frozen base [0-9a-f]{16} \(from --init-from-hf $work/base-hf\); this run's base \(random init: no --init-safetensors or --init-from-hf given\) is [0-9a-f]{16}: give the same base" "$work/e.txt" ||
      { cat "$work/e.txt"; fail "the message does not name both bases and their sources"; }
    # The same weights through --init-safetensors: the same base. Another pretrain's: refused.
    run_ok "$work/st.txt" 2 "${ft[@]}" --init-safetensors "$work/base.safetensors" \
      --resume-from "$work/ck1/step-00000003"
    [ "$(hash_of "$work/st.txt")" = "$(hash_of "$work/full.txt")" ] || fail "--init-safetensors resume"
    run_ok "$work/pre2.txt" 2 "${tiny[@]}" --steps 2 --seed 9 --export-safetensors "$work/other.safetensors"
    expect "resume on another base" "this run's base (from --init-safetensors $work/other.safetensors) is" \
      "${ft[@]}" --init-safetensors "$work/other.safetensors" --resume-from "$work/ck1/step-00000003"
    ;;
  lora_int8)
    lora_case int8 --init-safetensors "$work/base.safetensors" resume-from --int8-compute dequantize
    base=("${tiny[@]}" --steps 6 --init-safetensors "$work/base.safetensors"
          --resume-from "$work/ck1/step-00000003")
    expect "changed --base-dtype" '--base-dtype bf16 in this run, int8 in the checkpoint' \
      "${base[@]}" --lora-rank 4 --base-dtype bf16
    expect "changed --lora-rank" '--lora-rank 8 in this run, 4 in the checkpoint' \
      "${base[@]}" --lora-rank 8 --base-dtype int8 --int8-compute dequantize
    ;;
  owner)
    a=("${tiny[@]}" --steps 6 --save-dir "$work/ck" --save-every 3)
    run_ok "$work/a.txt" 2 "${a[@]}" --keep 0
    before=$(cd "$work/ck" && find . -type f | sort | xargs md5sum)
    # A fresh run (here another seed) into it: refused before any step, nothing changed.
    expect "fresh run into another run's directory" \
      "$work/ck holds the checkpoints of another run (run " "${a[@]}" --seed 7 --keep 1
    grep -qF "steps 3, 6); this run starts fresh: give --resume to continue it, --overwrite to replace it, or another --save-dir" "$work/e.txt" ||
      { cat "$work/e.txt"; fail "the refusal does not name the steps and the choices"; }
    after=$(cd "$work/ck" && find . -type f | sort | xargs md5sum)
    [ "$before" = "$after" ] || fail "the refused run changed the directory"
    # --overwrite: the old run's checkpoints go first, with a note; the new run owns them.
    run_ok "$work/b.txt" 2 "${a[@]}" --seed 7 --overwrite --keep 1
    grep -qE "^--overwrite: removed the checkpoints of run [0-9a-f]{16} from $work/ck \(steps 3, 6\)" "$work/b.txt" ||
      { cat "$work/b.txt"; fail "no note of what --overwrite removed"; }
    [ "$(ls "$work/ck" | grep -c '^step-')" -eq 1 ] && [ -d "$work/ck/step-00000006" ] ||
      { ls "$work/ck"; fail "--keep 1 left $(ls "$work/ck")"; }
    run_ok "$work/c.txt" 2 "${a[@]}" --seed 7 --resume  # continues run b: nothing left to do
    grep -q "resumed from $work/ck/step-00000006" "$work/c.txt" || fail "did not resume run b"
    [ "$(hash_of "$work/b.txt")" = "$(hash_of "$work/c.txt")" ] || fail "--resume continued another run"
    # --resume-from a checkpoint of run a (saved elsewhere) into run b's directory: refused.
    run_ok "$work/a2.txt" 2 "${tiny[@]}" --steps 6 --save-dir "$work/other" --save-every 3
    expect "--resume-from into another run's directory" "$work/ck holds the checkpoints of another run" \
      "${a[@]}" --resume-from "$work/other/step-00000003"
    grep -qF "this run continues run" "$work/e.txt" || fail "the refusal does not say which run continues"
    expect "--overwrite with --resume" "--overwrite starts a fresh run" "${a[@]}" --resume --overwrite
    expect "--overwrite without --save-dir" "--overwrite needs --save-dir" "${tiny[@]}" --overwrite
    ;;
  lock)
    # Job 1 writes the directory for a while; job 2 is refused while it runs. Each mpirun has its
    # own session directory.
    mkdir -p "$OMPI_MCA_orte_tmpdir_base/first"
    long=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --threads 1 --warmup 2
          --eval-every 0 --sample-tokens 0 --steps 1500 --save-dir "$work/ck" --save-every 500)
    OMPI_MCA_orte_tmpdir_base=$OMPI_MCA_orte_tmpdir_base/first "${mpi[@]}" -np 1 "$bin" \
      "${long[@]}" > "$work/first.txt" 2>&1 &
    first=$!
    for _ in $(seq 600); do grep -qE '^step +1/' "$work/first.txt" && break; sleep 0.1; done
    grep -qE '^step +1/' "$work/first.txt" || { cat "$work/first.txt"; fail "job 1 did not start"; }
    expect "second writer" "another job is writing checkpoints into this directory (pid " \
      "${tiny[@]}" --steps 6 --save-dir "$work/ck"
    grep -qE "\(pid [0-9]+ on host $(hostname) since [0-9T:-]+Z, run [0-9a-f]{16}\)" "$work/e.txt" ||
      { cat "$work/e.txt"; fail "the refusal does not name the other job"; }
    kill -0 "$first" 2>/dev/null || { cat "$work/first.txt"; fail "job 1 ended before job 2 was refused"; }
    wait "$first" || { cat "$work/first.txt"; fail "job 1 failed"; }
    [ -d "$work/ck/step-00001500" ] || fail "job 1's last checkpoint is missing"
    ;;
  shared)
    # mpirun's MPMD form with a working directory per rank: one relative --save-dir, two
    # directories (as node-local paths are).
    mkdir -p "$work/node0" "$work/node1"
    timeout 120 "${mpi[@]}" -np 1 -wdir "$work/node0" "$bin" "${tiny[@]}" --steps 6 --save-dir ck : \
      -np 1 -wdir "$work/node1" "$bin" "${tiny[@]}" --steps 6 --save-dir ck > "$work/e.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/e.txt"; fail "exit $rc"; }
    grep -qF "the save directory must be shared by every rank: rank 1 (host " "$work/e.txt" ||
      { cat "$work/e.txt"; fail "no message about the directory"; }
    [ "$(grep -c 'zs_train: error' "$work/e.txt")" -eq 1 ] || { cat "$work/e.txt"; fail "not one message"; }
    ! grep -qE '^step +1/' "$work/e.txt" || fail "a step was taken"
    [ -z "$(ls -A "$work/node0/ck")" ] || fail "left behind: $(ls -A "$work/node0/ck")"
    echo "not shared: exit $rc, $(grep 'zs_train: error' "$work/e.txt")"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
