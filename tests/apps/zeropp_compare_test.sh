#!/usr/bin/env bash
# The smoke of scripts/zeropp_compare.sh (ctest zeropp_compare_smoke): its --quick mode (a tiny
# model, 10 steps per run, 4 ranks as 2 fake nodes) must write table.md with one row per
# configuration, plain ZeRO-3 the reference; every ZeRO++ configuration must end with a
# numeric validation loss within 5% of ZeRO-3's and send fewer bytes between nodes per step than
# ZeRO-3; and zeropp_loss.png must be written.
#   zeropp_compare_test.sh ROOT BUILD WORKDIR
# Exit 77 (skip) when the script's Python has no matplotlib: the table is still checked.
set -u
root=$1 build=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"
bash "$root/scripts/zeropp_compare.sh" --quick --build "$build" --out "$work"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 77 ] || fail "zeropp_compare.sh exited $rc"
table=$work/table.md
[ -f "$table" ] || fail "no $table"
[ "$(grep -c '^|' "$table")" = 7 ] || fail "table.md has other rows than header, rule and five"
# cell LABEL COLUMN: the row's cell (awk field, the first cell is 2), blanks trimmed.
cell() {
  awk -F'|' -v n=" $1 " -v c="$2" '$2 == n { gsub(/^ +| +$/, "", $c); print $c }' "$table"
}
ref_loss=$(cell "ZeRO-3" 3) ref_inter=$(cell "ZeRO-3" 8)
[ "$(cell "ZeRO-3" 4)" = reference ] && [[ $ref_loss =~ ^[0-9.]+$ ]] ||
  fail "the ZeRO-3 row is not the reference with a numeric loss"
for label in "+ qwZ" "+ hpZ" "+ qgZ" "+ qwZ + hpZ + qgZ"; do
  loss=$(cell "$label" 3) inter=$(cell "$label" 8)
  [ -n "$loss" ] || fail "table.md has no row '$label'"
  [[ $loss =~ ^[0-9.]+$ ]] || fail "$label: no numeric validation loss ('$loss'): the run failed"
  echo "$label: val loss $loss (ZeRO-3 $ref_loss), MB between nodes $inter (ZeRO-3 $ref_inter)"
  awk -v a="$loss" -v b="$ref_loss" 'BEGIN { d = (a - b) / b; exit !(d < 0.05 && d > -0.05) }' ||
    fail "$label: validation loss $loss not within 5% of ZeRO-3's $ref_loss"
  awk -v a="$inter" -v b="$ref_inter" 'BEGIN { exit !(a < b) }' ||
    fail "$label: $inter MB between nodes per step, not less than ZeRO-3's $ref_inter"
done
if [ "$rc" = 77 ]; then echo "SKIP: no matplotlib for the figure"; exit 77; fi
[ "$(head -c 4 "$work/zeropp_loss.png" | tail -c 3)" = PNG ] || fail "zeropp_loss.png is not a PNG"
echo "PASS: table.md with five rows, every ZeRO++ configuration within 5%, zeropp_loss.png written"
