#!/usr/bin/env bash
# Crash injection for checkpoints: rank 0 of a 2-rank job dies (_exit, no cleanup) at each write
# point of a save in turn; every time, the latest complete checkpoint in the directory still
# loads to the exact hash it was saved with (the step-1 checkpoint, or the step-2 one when the
# death came after its commit rename).
#   crash_save_test.sh CRASH_SAVE MPIRUN [mpirun flags...]
set -uo pipefail
bin=$1
shift
mpi=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A run without a death counts the write points of the second save and gives both hashes.
"${mpi[@]}" -np 2 "$bin" "$work/full" save 100000 > "$work/full.txt" 2>&1 || { cat "$work/full.txt"; fail "clean run"; }
points=$(awk '/^points/ {print $2}' "$work/full.txt")
h1=$(awk '/^step 1 hash/ {print $4}' "$work/full.txt")
h2=$(awk '/^step 2 hash/ {print $4}' "$work/full.txt")
[ -n "$points" ] && [ "$points" -ge 8 ] || fail "write points '$points'"
echo "rank 0 has $points write points per save; step 1 $h1, step 2 $h2"
old=0 new=0
for ((k = 0; k < points; k++)); do
  dir="$work/k$k"
  timeout 60 "${mpi[@]}" -np 2 "$bin" "$dir" save "$k" > "$work/save.txt" 2>&1
  rc=$?
  [ $rc -ne 124 ] || fail "point $k: the job hung after rank 0 died"
  [ $rc -ne 0 ] || { cat "$work/save.txt"; fail "point $k: rank 0 did not die"; }
  grep -q "dying at write point $k" "$work/save.txt" || { cat "$work/save.txt"; fail "point $k: no death"; }
  "${mpi[@]}" -np 2 "$bin" "$dir" check > "$work/check.txt" 2>&1 ||
    { cat "$work/check.txt"; fail "point $k: the latest checkpoint does not load"; }
  line=$(grep '^latest' "$work/check.txt")
  h=$(echo "$line" | awk '{print $4}')
  case "$line" in
    *step-00000001*) [ "$h" = "$h1" ] || fail "point $k: step 1 loads as $h, saved as $h1"; old=$((old + 1)) ;;
    *step-00000002*) [ "$h" = "$h2" ] || fail "point $k: step 2 loads as $h, saved as $h2"; new=$((new + 1)) ;;
    *) fail "point $k: $line" ;;
  esac
done
echo "PASS: $points deaths; the latest checkpoint was step 1 after $old and step 2 after $new, each exact"
