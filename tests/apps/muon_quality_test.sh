#!/usr/bin/env bash
# The smoke of scripts/muon_quality.sh (ctest muon_quality_smoke): its --quick mode on the default
# model only (a tiny model, 10 steps per run, AdamW and Muon + AdamW at three learning rates; the
# Llama run needs token shards, made with Hugging Face tokenizers) must write table.md with one
# row per optimizer, each with a final validation loss at every rate, one of them in bold (the
# best), and a step ("N of 10") or "not reached" in the last column, and muon_quality.png.
#   muon_quality_test.sh ROOT BUILD WORKDIR
# Exit 77 (skip) when the script's Python has no matplotlib: the table is still checked.
set -u
root=$1 build=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"
bash "$root/scripts/muon_quality.sh" --quick --models default --build "$build" --out "$work"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 77 ] || fail "muon_quality.sh exited $rc"
table=$work/table.md
[ -f "$table" ] || fail "no $table"
[ "$(grep -c '^|' "$table")" = 4 ] || fail "table.md has other rows than header, rule and two"
num='\**[0-9]+\.[0-9]{4}\**'
for opt in "AdamW" "Muon \+ AdamW"; do
  row=$(grep -E "^\| $opt \|" "$table") || fail "no row for $opt"
  echo "$row" | grep -Eq "^\| $opt \| $num \| $num \| $num \| [0-9e.-]+ \|" ||
    fail "the $opt row has not three final losses and a best rate: $row"
  [ "$(echo "$row" | grep -o '\*\*[0-9.]*\*\*' | wc -l)" = 1 ] || fail "not one best in: $row"
  echo "$row" | grep -Eq "\| ([0-9]+ of 10|not reached) \|$" || fail "no step column in: $row"
done
if [ "$rc" = 77 ]; then echo "SKIP: no matplotlib for the figure"; exit 77; fi
[ "$(head -c 4 "$work/muon_quality.png" | tail -c 3)" = PNG ] || fail "muon_quality.png is not a PNG"
echo "PASS: table.md with two rows, muon_quality.png written"
