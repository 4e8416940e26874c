# Shared by the zs_train end-to-end scripts (sourced, not run): their calling convention
#   SCRIPT CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# and the helpers every case uses. Sets case_name, bin, work (emptied), mpi (mpirun and its
# flags) and tiny (a 2-layer model that trains in well under a second per step; no --steps).
set -uo pipefail
case_name=$1 bin=$2 work=$3 mpirun=$4
shift 4
mpi=("$mpirun" "$@")
rm -rf "$work" && mkdir -p "$work"
tiny=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --warmup 2 --eval-every 3
      --eval-batches 1 --sample-tokens 8 --threads 1)

fail() { echo "FAIL: $*"; exit 1; }
hash_of() { grep -oE 'param_hash: [0-9a-f]+' "$1" | awk '{print $2}'; }

# expect label expected-text args...: zs_train at 2 ranks is refused with exactly
# one message holding expected-text, a non-zero exit (left in expect_rc), no hang and no step
# taken.
expect() {
  local label=$1 text=$2
  shift 2
  timeout 120 "${mpi[@]}" -np 2 "$bin" "$@" > "$work/e.txt" 2>&1
  local rc=$?
  [ $rc -ne 0 ] || { cat "$work/e.txt"; fail "$label: exit code 0"; }
  [ $rc -ne 124 ] || fail "$label: hung"
  grep -qF -- "$text" "$work/e.txt" || { cat "$work/e.txt"; fail "$label: no '$text'"; }
  local n
  n=$(grep -cE "zs_train: error" "$work/e.txt")
  [ "$n" -eq 1 ] || { cat "$work/e.txt"; fail "$label: $n error lines, expected one"; }
  ! grep -qE '^step +1/' "$work/e.txt" || fail "$label: a step was taken before the refusal"
  echo "$label: exit $rc, $(grep -E 'zs_train: error' "$work/e.txt")"
  expect_rc=$rc
}

# run out np args...: zs_train at np ranks, output to out; returns its exit status.
run() {
  local out=$1 np=$2
  shift 2
  "${mpi[@]}" -np "$np" "$bin" "$@" > "$out" 2>&1
}

# same_hash label out-a out-b: both runs printed the same param_hash.
same_hash() {
  local a b
  a=$(hash_of "$2") b=$(hash_of "$3")
  echo "$1: $a vs $b"
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$1: param_hash '$a' vs '$b'"
}

# run_ok out np args...: as run, and a non-zero exit fails the case (printing the output).
run_ok() {
  local out=$1
  run "$@"
  local rc=$?
  [ $rc -eq 0 ] || { cat "$out"; fail "$out: exit $rc"; }
}

# help_has text...: --help succeeds and prints every text.
help_has() {
  "$bin" --help > "$work/help.txt" || fail "--help"
  local t
  for t in "$@"; do grep -qF -- "$t" "$work/help.txt" || fail "--help: no '$t'"; done
}

# resumes_bitwise label np reference args...: zs_train at np ranks with args and --steps 12,
# saving every 6 steps, then resumed from step 6, prints reference's param_hash.
resumes_bitwise() {
  local label=$1 np=$2 ref=$3
  shift 3
  run_ok "$work/a.txt" "$np" "$@" --steps 12 --save-dir "$work/ckpt" --save-every 6
  run_ok "$work/b.txt" "$np" "$@" --steps 12 --resume-from "$work/ckpt/step-00000006"
  grep -qF "resumed from $work/ckpt/step-00000006" "$work/b.txt" || { cat "$work/b.txt"; fail "$label: not resumed"; }
  same_hash "$label: uninterrupted vs resumed at step 6" "$ref" "$work/b.txt"
}
