#!/bin/sh
# The "ssh" of the simulated cluster (scripts/sim_cluster.sh): Open MPI's rsh launcher runs
#   sim_cluster_agent.sh STATE HOST COMMAND...
# (through the wrapper $STATE/agent, which adds STATE) to start its daemon on HOST. Instead of
# logging in anywhere, the agent looks HOST up in $STATE/hosts ("ADDRESS NAMESPACE HOSTNAME" per
# line) and runs COMMAND as a remote shell would (the words joined and parsed by sh) inside:
# * that node's network namespace (ip netns exec),
# * a UTS namespace of its own whose host name is the node's (unshare --uts; hostname): Open MPI
#   names shared-memory segments and session directories after the host name, so two nodes with
#   the same name collide when their ranks use shared memory,
# * its own Open MPI session directory (OMPI_MCA_orte_tmpdir_base=$STATE/tmp-nK), for the same
#   reason.
# Everything else (the environment, the file system) is the caller's, as on a shared-file-system
# cluster.
set -eu
[ $# -ge 3 ] || { echo "sim_cluster_agent: usage: sim_cluster_agent.sh STATE HOST COMMAND..." >&2; exit 2; }
state=$1
host=$2
shift 2
line=$(awk -v h="$host" '$1 == h { print; exit }' "$state/hosts")
[ -n "$line" ] || { echo "sim_cluster_agent: unknown host $host (not in $state/hosts)" >&2; exit 255; }
ns=$(echo "$line" | awk '{print $2}')
name=$(echo "$line" | awk '{print $3}')
k=${ns##*-n}
export OMPI_MCA_orte_tmpdir_base="$state/tmp-n$k"
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && shift && eval "$*"' sim-node "$name" "$@"
