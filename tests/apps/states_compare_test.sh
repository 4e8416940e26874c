#!/usr/bin/env bash
# The smoke of scripts/states_compare.sh (ctest states_compare_smoke): its --quick mode (a tiny
# model, 10 steps per run) must write table.md with one row per state configuration (fp32 the
# reference; optimizer bytes fp32 > bf16 > int8, the two int8 code books equal) and states.png.
#   states_compare_test.sh ROOT BUILD WORKDIR
# Exit 77 (skip) when the script's Python has no matplotlib: the table is still checked.
set -u
root=$1 build=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"
bash "$root/scripts/states_compare.sh" --quick --build "$build" --out "$work"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 77 ] || fail "states_compare.sh exited $rc"
table=$work/table.md
[ -f "$table" ] || fail "no $table"
# optimizer_bytes NAME: the row's tracked optimizer bytes per rank, digits only.
optimizer_bytes() {
  awk -F'|' -v n=" $1 " '$2 == n { print $7 }' "$table" | awk '{ gsub(",", "", $1); print $1 }'
}
for n in fp32 bf16 int8-float8 int8-dynamic; do
  [ "$(grep -c "^| $n |" "$table")" = 1 ] || fail "table.md has not one row for $n"
done
[ "$(grep -c '^|' "$table")" = 6 ] || fail "table.md has other rows than header, rule and four"
grep -q '^| fp32 | [0-9.]* | reference | [0-9.]* | reference |' "$table" ||
  fail "the fp32 row is not the reference with numeric losses"
fp32=$(optimizer_bytes fp32) bf16=$(optimizer_bytes bf16)
f8=$(optimizer_bytes int8-float8) dyn=$(optimizer_bytes int8-dynamic)
echo "optimizer bytes per rank: fp32 $fp32, bf16 $bf16, int8 $f8 (float8), $dyn (dynamic)"
if ! { [ "$fp32" -gt "$bf16" ] && [ "$bf16" -gt "$f8" ] && [ "$f8" = "$dyn" ]; }; then
  fail "optimizer bytes not fp32 > bf16 > int8 (both code books equal)"
fi
if [ "$rc" = 77 ]; then echo "SKIP: no matplotlib for the figure"; exit 77; fi
[ "$(head -c 4 "$work/states.png" | tail -c 3)" = PNG ] || fail "states.png is not a PNG"
echo "PASS: table.md with four rows, states.png written"
