#!/usr/bin/env bash
# The scaling experiment of issue 17: zs_train over node layouts x configurations x link rates
# on the simulated cluster (scripts/sim_cluster.sh), each configuration's communication predicted
# by zs_plan (planner/comm_model.h) and measured (zs_train's log, and the namespaces' interface
# byte counters as ground truth); scripts/scaling_report.py writes the report.
#
#   scripts/scaling_experiment.sh [--out DIR] [--build DIR] [--rates "1gbit 10gbit"]
#       [--layouts "1x2 2x1 2x2 4x1"] [--configs "zero2 zero3 hier3 hsdp3 ..."] [--steps 8]
#       [--base-steps 3] [--links-dir DIR] [--fit] [--timeout SECONDS] [--quick]
#       [--check-bytes TOL] [--data FILE]
#       [-- ZS_TRAIN_MODEL_FLAGS...]
#
# Layout NxL: N nodes (namespaces) x L ranks per node, block placement. Configurations:
#   zero2  --zero-stage 2, flat collectives       zero3  --zero-stage 3, flat
#   hier3  --zero-stage 3 --collectives hierarchical (only where N > 1 and L > 1)
#   hsdp3  --zero-stage 3 --shard-group-size L    (HSDP, shard group = node; only where N > 1)
# ZeRO++ (issue 29), each zero3's flags (flat) plus its switches:
#   qwz3   --zero-quantized-weights                (int8 weight all-gathers)
#   hpz3   --zero-hpz-partition-size L             (node-local secondary shards; N > 1, L > 1)
#   qgz3   --zero-quantized-gradients              (int8 hierarchical gradient reduction; N > 1)
#   zpp3   all three                               (N > 1, L > 1)
# Model (after --, default below): a small GPT, fp32, 1 thread per rank, so that 4 ranks fit the
# 2 cores of the machines this was written on, and communication is a large share of a step.
#
# Method, per run (docs/scaling.md, "The scaling experiment"):
# * Every (layout, configuration, rate) runs twice, with --base-steps and --steps steps, otherwise
#   identical (no evaluation or sample but the final evaluation, the same in both). Bytes per step
#   = (bytes of the long run - bytes of the short run) / (steps - base-steps): start-up,
#   launch traffic, the final evaluation and the shutdown cancel.
# * Interface counters: in the head namespace, /sys/class/net/zsvK/statistics/rx_bytes is what
#   node K sent (its veth's far end), tx_bytes what it received, read before mpirun and after it
#   returns; they count Ethernet/IP/TCP headers and ACKs besides MPI's payload.
# * Step time: zs_train's median step time (max over ranks) of the long run.
# * Measured communication per step = step time - the reference's step time + the reference's
#   predicted (node-local) communication. The reference of a configuration runs its flags on one
#   node with as many ranks (--rate none: no inter-node link), so it shares the cores as the run
#   does (4 ranks on 2 cores are twice as slow whatever the network); what remains is what the
#   inter-node links add. A 1-rank run (no communication at all) is listed beside them. hpz3,
#   qgz3 and zpp3 need nodes: their reference runs with ZS_FAKE_NODES=N on its one node (the same
#   algorithms, every byte over shared memory), predicted by zs_plan with --nodes N and the
#   intra-node fit for both link classes (OUT/links/intra_only_RATE.json).
# * Link fits: data/links/sim_RATE.json if present (--links-dir to look elsewhere); --fit (or a
#   missing file) runs bench_collectives --fit-out on 1x2 (intra-node) and 2x1 (inter-node) first
#   and writes DIR/links/sim_RATE.json.
# --quick: one tiny configuration (2x1, zero3, 1gbit, 1 and 2 steps) for CI; --check-bytes TOL
# fails (exit 1) when the interface counters' inter-node bytes per step differ from the model's by
# more than TOL (relative), or zs_train's link counters from the model's figure for them at all. Exit 77 where the simulated cluster is unavailable (sim_cluster.sh's
# skip), 0 on success, 1 on a failed run or check.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

out=scaling_report
build="$root/build"
rates="1gbit 10gbit"
layouts="1x2 2x1 2x2 4x1"
configs="zero2 zero3 hier3 hsdp3 qwz3 hpz3 qgz3 zpp3"
steps=8
base_steps=3
links_dir="$root/data/links"
fit=0
timeout_s=900
quick=0
data="$root/data/corpus.txt"
check=()
model=(--layers 2 --width 128 --heads 4 --context 64 --batch 4 --dtype fp32 --threads 1)

while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --base-steps) base_steps="$2"; shift 2 ;;
    --links-dir) links_dir="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --fit) fit=1; shift ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --check-bytes) check=(--check-bytes "$2"); shift 2 ;;
    --) shift; model=("$@"); break ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "scaling_experiment: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  rates=1gbit layouts=2x1 configs=zero3 steps=2 base_steps=1
fi
[ "$steps" -gt "$base_steps" ] && [ "$base_steps" -ge 1 ] ||
  { echo "scaling_experiment: need --steps > --base-steps >= 1" >&2; exit 2; }
train="$build/bin/zs_train"
bench="$build/bench/bench_collectives"
plan="$build/bin/zs_plan"
for b in "$train" "$plan"; do
  [ -x "$b" ] || { echo "scaling_experiment: $b not built (--build DIR)" >&2; exit 2; }
done
mkdir -p "$out/runs" "$out/links" || exit 1
out="$(cd "$out" && pwd)"
cores=$(nproc)
# Debian's python3 has python3-matplotlib; another python3 writes the report without plots.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
log() { echo "scaling_experiment: $*" >&2; }

# One sim_cluster run of COMMAND (in the head namespace); returns sim_cluster's status.
sim() {  # nodes ranks_per_node rate -- command...
  local n=$1 l=$2 r=$3; shift 4
  "$here/sim_cluster.sh" --nodes "$n" --ranks-per-node "$l" --rate "$r" --timeout "$timeout_s" \
    -- "$@"
}

links_for() {  # rate -> path of its links file (fits it when needed)
  local rate=$1 f="$links_dir/sim_$1.json"
  if [ "$fit" = 0 ] && [ -f "$f" ]; then echo "$f"; return 0; fi
  f="$out/links/sim_$rate.json"
  [ -f "$f" ] && { echo "$f"; return 0; }
  [ -x "$bench" ] || { log "$bench not built: cannot fit the links"; return 1; }
  local spec
  for spec in "1 2 intra_node" "2 1 inter_node"; do
    set -- $spec
    log "fitting $3 at $rate ($1 node(s) x $2 ranks)"
    sim "$1" "$2" "$rate" -- sh -c "mpirun \$ZS_SIM_MPIRUN_ARGS -np 2 '$bench' --ops all_gather \
      --min-bytes 1024 --max-bytes 16777216 --step 4 --iters 7 --warmup 2 --fit-out '$f' \
      --fit-class $3" >"$out/links/fit_${rate}_$3.txt" 2>&1
    local rc=$?
    [ $rc = 0 ] || { cat "$out/links/fit_${rate}_$3.txt" >&2; return $rc; }
  done
  echo "$f"
}

# shellcheck source=scripts/compare_lib.sh
source "$here/compare_lib.sh"

config_flags() {  # config N L -> zs_train flags, or nothing when it does not apply
  local z3="--zero-stage 3 --collectives flat" hpz="--zero-hpz-partition-size $3" f=""
  local qwz=--zero-quantized-weights qgz=--zero-quantized-gradients multi=0
  [ "$2" -gt 1 ] && [ "$3" -gt 1 ] && multi=1
  case "$1" in
    zero2) f="--zero-stage 2 --collectives flat" ;;
    zero3) f="$z3" ;;
    hier3) [ $multi = 0 ] || f="--zero-stage 3 --collectives hierarchical" ;;
    hsdp3) [ "$2" = 1 ] || f="--zero-stage 3 --shard-group-size $3" ;;
    qwz3) f="$z3 $qwz" ;;
    hpz3) [ $multi = 0 ] || f="$z3 $hpz" ;;
    qgz3) [ "$2" = 1 ] || f="$z3 $qgz" ;;
    zpp3) [ $multi = 0 ] || f="$z3 $qwz $hpz $qgz" ;;
    *) log "unknown configuration '$1'"; return 2 ;;
  esac
  echo "$f"
}

# Configurations that need nodes: their one-node reference runs with ZS_FAKE_NODES=N.
needs_nodes() { case "$1" in hpz3 | qgz3 | zpp3) return 0 ;; esac; return 1; }

# intra_only LINKS: a links file with the intra-node fit for both classes (the fake-node
# references' prediction: their "inter-node" bytes move over shared memory); prints its path.
intra_only() {
  local f
  f="$out/links/intra_only_$(basename "$1")"
  "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["inter_node"] = dict(d["intra_node"], fit="the intra-node fit (a one-node reference)")
json.dump(d, open(sys.argv[2], "w"), indent=2)' "$1" "$f" && echo "$f"
}

# The inner command: counters before, mpirun, counters after (JSON), in the head namespace.
inner="$out/runs/inner.sh"
cat >"$inner" <<'EOF'
#!/usr/bin/env bash
# $1: output prefix; the rest: zs_train and its arguments.
prefix=$1; shift
counters() {
  local first=1
  printf '{'
  for d in /sys/class/net/zsv*; do
    [ -d "$d" ] || continue
    [ $first = 1 ] || printf ', '
    first=0
    printf '"%s": {"node_sent": %s, "node_received": %s}' "$(basename "$d")" \
      "$(cat "$d/statistics/rx_bytes")" "$(cat "$d/statistics/tx_bytes")"
  done
  printf '}'
}
before=$(counters)
# shellcheck disable=SC2086
mpirun $ZS_SIM_MPIRUN_ARGS -np "$ZS_SIM_NP" "$@" >"$prefix.out" 2>&1
rc=$?
after=$(counters)
printf '{"before": %s, "after": %s, "rc": %d, "np": %s, "nodes": %s}\n' "$before" "$after" $rc \
  "$ZS_SIM_NP" "$ZS_SIM_NODES" >"$prefix.counters.json"
exit $rc
EOF
chmod +x "$inner"

run_train() {  # name nodes rpn rate steps flags...
  local name=$1 n=$2 l=$3 rate=$4 s=$5; shift 5
  local prefix="$out/runs/$name.s$s" fake=()
  [ "$fake_nodes" = 0 ] || fake=(env "ZS_FAKE_NODES=$fake_nodes")
  rm -f "$prefix.jsonl"
  sim "$n" "$l" "$rate" -- "$inner" "$prefix" "${fake[@]}" "$train" --data "$data" --steps "$s" \
    --warmup 0 --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --json-log "$prefix.jsonl" \
    "${model[@]}" "$@"
  local rc=$?
  if [ $rc = 77 ]; then return 77; fi
  [ $rc = 0 ] || { log "run $name ($s steps) failed ($rc):"; tail -20 "$prefix.out" >&2; }
  return $rc
}

failed=0
fake_nodes=0  # > 0 while a fake-node reference runs (ZS_FAKE_NODES for zs_train, zs_plan's --nodes)
manifest="$out/manifest.jsonl"
: >"$manifest"

# A configuration's reference: its flags on one node of N*L ranks (HSDP: also its group size).
ref_name() {  # cfg nodes rpn
  if [ "$1" = hsdp3 ]; then echo "ref_$1_1x$(($2 * $3))_s$3"
  elif needs_nodes "$1"; then echo "ref_$1_1x$(($2 * $3))_f$2"
  else echo "ref_$1_1x$(($2 * $3))"; fi
}

# Both runs of one configuration, zs_plan's prediction for it, and its manifest line.
run_config() {  # name cfg nodes rpn rate links role flags...
  local name=$1 cfg=$2 n=$3 l=$4 rate=$5 links=$6 role=$7 ok=1 s rc
  shift 7
  log "$name: $((n * l)) ranks, $*"
  for s in "$base_steps" "$steps"; do
    run_train "$name" "$n" "$l" "$rate" "$s" "$@"
    rc=$?
    [ $rc = 77 ] && return 77
    [ $rc = 0 ] || { ok=0; failed=1; }
  done
  # The prediction: zs_plan with the model's dimensions as zs_train builds them.
  # shellcheck disable=SC2046
  "$plan" --family gpt $(printf '%s\n' "${model[@]}" | "$here/scaling_report.py" --plan-args) \
    --ranks $((n * l)) --nodes "$((fake_nodes > 0 ? fake_nodes : n))" "$@" ${links:+--links "$links"} \
    --json >"$out/runs/$name.plan.json" 2>"$out/runs/$name.plan.err" ||
    { log "zs_plan failed for $name:"; cat "$out/runs/$name.plan.err" >&2; failed=1; }
  printf '{"name": "%s", "config": "%s", "nodes": %s, "ranks_per_node": %s, "rate": "%s", '\
'"steps": %s, "base_steps": %s, "ok": %s, "links": "%s", "cores": %s, "role": "%s"}\n' \
    "$name" "$cfg" "$n" "$l" "$rate" "$steps" "$base_steps" "$ok" "$links" "$cores" "$role" \
    >>"$manifest"
}

# References: 1 rank (no communication at all), and each configuration's flags on one node with
# as many ranks (rate none: no inter-node link exists), which shares the cores the same way.
links1=$(links_for "${rates%% *}")
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { failed=1; links1=""; }
run_config ref_1x1 zero3 1 1 none "$links1" compute --zero-stage 3 || exit 77
done_refs=" "
for layout in $layouts; do
  n=${layout%x*} l=${layout#*x}
  for cfg in $configs; do
    flags=$(config_flags "$cfg" "$n" "$l") || exit 2
    [ -n "$flags" ] && [ "$n" -gt 1 ] || continue
    # The same flags, so the hierarchical and HSDP references run their own (node-local) paths.
    ref=$(ref_name "$cfg" "$n" "$l")
    case "$done_refs" in *" $ref "*) continue ;; esac
    done_refs="$done_refs$ref "
    ref_links=$links1
    if needs_nodes "$cfg"; then
      fake_nodes=$n
      [ -z "$links1" ] || ref_links=$(intra_only "$links1") || failed=1
    fi
    # shellcheck disable=SC2086
    run_config "$ref" "$cfg" 1 $((n * l)) none "$ref_links" reference $flags || exit 77
    fake_nodes=0
  done
done
for rate in $rates; do
  links=$(links_for "$rate")
  rc=$?
  [ $rc = 77 ] && exit 77
  [ $rc = 0 ] || { failed=1; links=""; }
  for layout in $layouts; do
    n=${layout%x*} l=${layout#*x}
    for cfg in $configs; do
      flags=$(config_flags "$cfg" "$n" "$l") || exit 2
      [ -n "$flags" ] || continue
      # shellcheck disable=SC2086
      run_config "${cfg}_${layout}_$rate" "$cfg" "$n" "$l" "$rate" "$links" \
        "$(ref_name "$cfg" "$n" "$l")" $flags || exit 77
    done
  done
done
"$py" "$here/scaling_report.py" "$out" "${check[@]}" || failed=1
exit $failed
