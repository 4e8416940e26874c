# zs_plan's figures against the trainer's trackers (sourced by zs_plan_lora_test.sh and
# zs_train_llama.sh, not run; the sourcing script defines fail).
# plan_equals_tracked LABEL LOG PLAN CATEGORY...: each category's peak bytes in LOG's final record
# (memory_bytes, max over ranks) equals PLAN's (zs_plan --json) <category>_bytes to the byte, and
# so do the activations, oneDNN's GEMM scratchpads included (zs_plan given the run's --batch and
# --threads: the library sizes them for the thread count; docs/memory.md).
plan_equals_tracked() {
  local label=$1 log=$2 plan=$3
  shift 3
  local mem ta pa c line=""
  mem=$(tail -1 "$log" | grep -o '"memory_bytes":{[^}]*}')
  tracked() { grep -o "\"$1\":[0-9]*" <<<"$mem" | cut -d: -f2; }
  planned() { grep -o "\"$1\": [0-9]*" <<<"$plan" | head -1 | awk '{print $2}'; }
  for c in "$@"; do
    [ -n "$(tracked "$c")" ] && [ "$(tracked "$c")" = "$(planned "${c}_bytes")" ] ||
      fail "$label: $c tracked '$(tracked "$c")', planned '$(planned "${c}_bytes")'"
    line+="$c $(tracked "$c") "
  done
  ta=$(tracked activations) pa=$(planned activations_bytes)
  [ -n "$ta" ] && [ "$ta" = "$pa" ] || fail "$label: activations tracked '$ta', planned '$pa'"
  echo "$label: ${line}activations $ta (of which oneDNN scratchpads $(planned gemm_scratchpads_bytes)) equal"
}

# links_equal label log plan: the trainer's link counters in log's last record (bytes within and
# between nodes, all ranks, per step) equal zs_plan's counted bytes per link class.
links_equal() {
  local label=$1 log=$2 plan=$3 class got want
  for class in intra inter; do
    got=$(tail -1 "$log" | grep -o "\"comm_bytes_${class}_all_ranks\":[0-9]*" | cut -d: -f2)
    want=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["communication"]["counted_'$class'_bytes_all_ranks"])' <<<"$plan")
    [ -n "$got" ] && [ "$got" = "$want" ] ||
      fail "$label: $class-node bytes per step counted '$got', zs_plan '$want'"
    echo "$label: $class-node bytes per step (all ranks) $got = zs_plan's"
  done
}
