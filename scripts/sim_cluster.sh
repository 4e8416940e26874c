#!/usr/bin/env bash
# A simulated cluster on one machine: N "nodes" as Linux network namespaces, joined by veth links
# to a bridge, each link shaped with tc; runs COMMAND with what mpirun needs to launch ranks on
# them, and always tears everything down.
#
#   scripts/sim_cluster.sh [--nodes N] [--ranks-per-node R] [--rate 1gbit|none] [--delay 1ms]
#                          [--timeout SECONDS] [--] COMMAND [ARGS...]
#
# Example (2 nodes x 2 ranks, 1 Gbit/s links):
#   scripts/sim_cluster.sh --nodes 2 --ranks-per-node 2 -- \
#     sh -c 'mpirun $ZS_SIM_MPIRUN_ARGS -np $ZS_SIM_NP build/bench/bench_collectives'
#
# Layout, for one invocation with id ID (unique: the random suffix of its state directory) and
# subnet 10.X.0.0/24:
#   namespace zs-ID-head   the bridge zsbr (10.X.0.254/24); COMMAND runs here, so mpirun and
#                          its connections to the daemons use the simulated links too
#   namespace zs-ID-nK     node K (1..N): loopback and eth0 = 10.X.0.K/24, the far end of a veth
#                          pair whose near end (zsvK) is a port of the bridge
# Every namespace has its own loopback; no interface of the machine's own namespace is touched,
# so traffic stays on these links and on loopback, and concurrent invocations never collide (the
# same subnet in two invocations lives in different namespaces).
#
# Shaping: tc tbf at --rate on both ends of each node's veth pair (eth0's egress: what the node
# sends; zsvK's egress in the head namespace: what it receives), so a node's link carries --rate
# each way; a message between two nodes passes the sender's and the receiver's link. --delay adds
# netem latency on the same interfaces where the kernel has netem; the script checks once and says
# when it does not (latency is then what the veth path gives, tens of microseconds).
#
# What COMMAND gets in its environment:
#   ZS_SIM_HOSTS        10.X.0.1:R,10.X.0.2:R,...   (mpirun --host syntax)
#   ZS_SIM_NODES, ZS_SIM_RANKS_PER_NODE, ZS_SIM_NP (= N*R), ZS_SIM_SUBNET (10.X.0.0/24),
#   ZS_SIM_RATE, ZS_SIM_DELAY (empty when none is applied), ZS_SIM_ID, ZS_SIM_STATE (directory)
#   ZS_SIM_AGENT        the rsh agent of this cluster (a generated wrapper of
#                       scripts/sim_cluster_agent.sh)
#   ZS_SIM_MPIRUN_ARGS  the mpirun arguments that launch across the nodes, word-split as is:
#       --host $ZS_SIM_HOSTS --mca plm rsh --mca plm_rsh_agent $ZS_SIM_AGENT
#       --mca plm_rsh_no_tree_spawn 1 --mca rtc ^hwloc --mca btl self,vader,tcp
#       --mca btl_tcp_if_include SUBNET --mca oob_tcp_if_include SUBNET --bind-to none
#       --allow-run-as-root
#     Why each one: the agent replaces ssh (it enters the node's namespace, see
#     sim_cluster_agent.sh); no tree spawn, so every daemon is started from the head; without
#     "rtc ^hwloc" the daemons sometimes segfault in hwloc's shared topology; TCP and the
#     daemons' out-of-band channel only on the simulated subnet; ranks of one node use shared
#     memory (vader), which needs each node's own host name and session directory (the agent
#     gives both); root: the namespaces need it anyway.
#   OMPI_MCA_mpi_yield_when_idle=1 (unless already set): N*R ranks usually outnumber this
#     machine's cores, so waiting ranks yield the core instead of spinning (at 2x2 on 2 cores,
#     1 MiB all-gathers ran 2.3-3.5x faster); it costs latency where ranks have a core each (2 ranks:
#     about 4 us instead of 1.5 us on shared memory). `--mca mpi_yield_when_idle 0` on the mpirun
#     line overrides it (an MCA parameter may appear only once on the command line, hence the
#     environment).
#
# Exit status: COMMAND's; 124 when --timeout ran out (COMMAND and everything in the namespaces is
# killed); 77 when namespaces cannot be made here (not root, no iproute2 or tc, no permission to
# create namespaces), with a message saying why: ctest reads 77 as SKIPPED (SKIP_RETURN_CODE).
# Teardown (kill what still runs in the namespaces, delete them, remove the state directory) runs
# on every exit: success, failure, timeout, Ctrl-C or TERM: the cluster lives exactly as long as
# COMMAND.
#
# Needs: root (or CAP_SYS_ADMIN + CAP_NET_ADMIN), iproute2 (ip), tc (iproute2 as well), unshare
# and hostname (util-linux, hostname), timeout (coreutils). Installs nothing.
set -uo pipefail

nodes=2
rpn=2
rate=1gbit
delay=""
timeout_s=0
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) rpn=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "sim_cluster: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "sim_cluster: no COMMAND given" >&2; usage >&2; exit 2; }
case "$nodes$rpn$timeout_s" in *[!0-9]*) echo "sim_cluster: --nodes, --ranks-per-node and --timeout take integers" >&2; exit 2 ;; esac
if [ "$nodes" -lt 1 ] || [ "$nodes" -gt 250 ] || [ "$rpn" -lt 1 ]; then
  echo "sim_cluster: need 1 <= --nodes <= 250 and --ranks-per-node >= 1" >&2
  exit 2
fi

skip() { echo "sim_cluster: SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
PATH=$PATH:/usr/sbin:/sbin
for tool in ip tc unshare hostname timeout; do
  command -v $tool >/dev/null 2>&1 || skip "'$tool' not found (ip and tc: iproute2; unshare: util-linux)"
done

here=$(cd "$(dirname "$0")" && pwd)
state=$(mktemp -d /tmp/zs-sim.XXXXXX) || { echo "sim_cluster: mktemp failed" >&2; exit 1; }
id=${state##*.}
id=$(printf '%s' "$id" | tr 'A-Z' 'a-z')
# The second octet only makes addresses readable per run (10.X.0.K); isolation comes from the
# namespaces, so two runs with the same X do not collide.
x=$(( ($$ % 200) + 20 ))
subnet="10.$x.0.0/24"
head="zs-$id-head"
made=()  # namespaces created so far, for teardown

teardown() {
  local rc=$?
  trap - EXIT INT TERM
  # What still runs in a node namespace (daemons, ranks) belongs to this invocation: end it.
  local ns pids
  for ns in "${made[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
  done
  for ns in "${made[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [ -z "$pids" ] && break
      sleep 0.2
    done
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null || echo "sim_cluster: could not delete namespace $ns" >&2
  done
  rm -rf "$state"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkns() {
  ip netns add "$1" 2>"$state/err" || {
    local why
    why=$(cat "$state/err")
    [ ${#made[@]} -eq 0 ] && skip "cannot create a network namespace here: $why"
    echo "sim_cluster: ip netns add $1 failed: $why" >&2
    exit 1
  }
  made+=("$1")
  ip -n "$1" link set lo up
}
die() { echo "sim_cluster: $*" >&2; exit 1; }

mkns "$head"
ip -n "$head" link add zsbr type bridge || die "cannot create a bridge"
ip -n "$head" addr add "10.$x.0.254/24" dev zsbr
ip -n "$head" link set zsbr up

# tbf's bucket: 1 ms at the rate, at least 64 KiB (a GSO packet must fit), and a queue of 20 ms.
burst_bytes() {
  local r=$1 n unit bps
  n=${r%%[a-zA-Z]*}
  unit=${r#"$n"}
  case "$unit" in
    gbit|Gbit) bps=$(awk -v n="$n" 'BEGIN{print n*1e9}') ;;
    mbit|Mbit) bps=$(awk -v n="$n" 'BEGIN{print n*1e6}') ;;
    kbit|Kbit) bps=$(awk -v n="$n" 'BEGIN{print n*1e3}') ;;
    *) die "--rate takes NUMBER{gbit,mbit,kbit} or none (got $r)" ;;
  esac
  awk -v b="$bps" 'BEGIN{x=b/8/1000; if (x<65536) x=65536; printf "%d", x}'
}
netem_ok=""
shape() {  # shape NS DEV
  local ns=$1 dev=$2
  if [ -n "$delay" ] && [ "$netem_ok" = yes ]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" || die "netem on $ns/$dev failed"
    [ "$rate" = none ] ||
      tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" \
        burst "$(burst_bytes "$rate")" latency 20ms || die "tbf on $ns/$dev failed"
  elif [ "$rate" != none ]; then
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst "$(burst_bytes "$rate")" \
      latency 20ms || die "tbf on $ns/$dev failed (does the kernel have sch_tbf?)"
  fi
}

hosts=""
for k in $(seq 1 "$nodes"); do
  ns="zs-$id-n$k"
  mkns "$ns"
  ip -n "$head" link add "zsv$k" type veth peer name eth0 netns "$ns" || die "cannot create a veth pair"
  ip -n "$head" link set "zsv$k" master zsbr
  ip -n "$head" link set "zsv$k" up
  ip -n "$ns" addr add "10.$x.0.$k/24" dev eth0
  ip -n "$ns" link set eth0 up
  if [ $k -eq 1 ]; then
    # netem: checked once, on the first link, before shaping anything.
    if tc -n "$ns" qdisc add dev eth0 root netem delay 1ms 2>/dev/null; then
      netem_ok=yes
      tc -n "$ns" qdisc del dev eth0 root
    else
      netem_ok=no
    fi
  fi
  shape "$ns" eth0
  shape "$head" "zsv$k"
  # Each node's host name and Open MPI session directory (read by the agent).
  mkdir -p "$state/tmp-n$k"
  printf '%s %s %s\n' "10.$x.0.$k" "$ns" "zs-$id-node$k" >>"$state/hosts"
  hosts+="${hosts:+,}10.$x.0.$k:$rpn"
done

applied_delay=""
if [ -n "$delay" ]; then
  if [ "$netem_ok" = yes ]; then
    applied_delay=$delay
  else
    echo "sim_cluster: the kernel has no netem qdisc: --delay $delay is not applied (latency is the veth path's own)" >&2
  fi
fi
netem_note="netem available"
[ "$netem_ok" = no ] && netem_note="no netem in this kernel: no latency added"

# The agent mpirun calls instead of ssh: a wrapper with this cluster's state directory built in,
# so that the mpirun argument has no spaces.
cat >"$state/agent" <<EOF
#!/bin/sh
exec "$here/sim_cluster_agent.sh" "$state" "\$@"
EOF
chmod +x "$state/agent"

mpirun_args="--host $hosts --mca plm rsh --mca plm_rsh_agent $state/agent"
mpirun_args+=" --mca plm_rsh_no_tree_spawn 1 --mca rtc ^hwloc --mca btl self,vader,tcp"
mpirun_args+=" --mca btl_tcp_if_include $subnet --mca oob_tcp_if_include $subnet --bind-to none"
mpirun_args+=" --allow-run-as-root"

export ZS_SIM_HOSTS=$hosts ZS_SIM_NODES=$nodes ZS_SIM_RANKS_PER_NODE=$rpn
export ZS_SIM_NP=$((nodes * rpn)) ZS_SIM_SUBNET=$subnet ZS_SIM_RATE=$rate
export ZS_SIM_DELAY=$applied_delay ZS_SIM_ID=$id ZS_SIM_STATE=$state ZS_SIM_AGENT=$state/agent
export ZS_SIM_MPIRUN_ARGS=$mpirun_args
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

echo "sim_cluster: $nodes node(s) x $rpn rank(s), links $rate${applied_delay:+ + $applied_delay delay} ($netem_note), subnet $subnet, id $id" >&2

if [ "$timeout_s" -gt 0 ]; then
  ip netns exec "$head" timeout --kill-after=10 "$timeout_s" "$@" &
else
  ip netns exec "$head" "$@" &
fi
child=$!
# Waiting in the background lets INT/TERM reach the traps at once; teardown then kills what runs.
wait $child
rc=$?
if [ "$timeout_s" -gt 0 ] && [ $rc -eq 124 ]; then
  echo "sim_cluster: COMMAND did not finish within --timeout $timeout_s s; killed" >&2
fi
exit $rc
