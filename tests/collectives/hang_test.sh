#!/bin/sh
# hang_test.sh NP MPIRUN [FLAGS...] -- PROGRAM: runs PROGRAM (hang_test) on NP ranks with
# ZS_WATCHDOG_S=2 and passes when the job ends with a non-zero status in under 30 s and the
# watchdog's report names the divergence: rank NP-1 never arrived at seq 6 all_reduce.
np=$1
shift
dir=$(mktemp -d)
export TMPDIR="$dir"
export ZS_WATCHDOG_S=2
start=$(date +%s)
out=$("$@" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
printf '%s\n' "$out"
rm -rf "$dir"
echo "hang_test.sh: exit status $rc after ${elapsed} s"
fail=0
[ "$rc" -ne 0 ] || { echo "hang_test.sh: the job exited 0" >&2; fail=1; }
[ "$elapsed" -lt 30 ] || { echo "hang_test.sh: took ${elapsed} s (>= 30)" >&2; fail=1; }
last=$((np - 1))
for pattern in "zeroshard watchdog: rank [0-9]+: seq 6 all_reduce 32 B fp32 has not completed" \
  "zeroshard watchdog: rank $last never arrived at seq 6 all_reduce 32 B fp32: its last collective is seq 5 all_reduce" \
  "zeroshard watchdog: rank 0: last completed seq 5 all_reduce 32 B fp32; in flight seq 6"; do
  if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "hang_test.sh: no line matches '$pattern'" >&2
    fail=1
  fi
done
exit $fail
