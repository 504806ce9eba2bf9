#!/usr/bin/env bash
# netns_rank.sh - a rank started by mpirun on a simulated host: takes the
# host's identity from its network namespace (the simulated hosts share one
# hostname and boot id) and its bootstrap interface from its address
# (NETNS_RANK_BARE=1: the identity only).
set -eu
ns=$(ip netns identify $$)
[ -n "$ns" ] || { echo "netns_rank: not in a named network namespace" >&2; exit 1; }
export QCCL_HOST_ID="mpirun-$ns"
if [ "${NETNS_RANK_BARE:-0}" = 1 ]; then
  # nothing else of qccl's: say so, for the test's log
  echo "netns_rank: $ns: $(env | grep '^QCCL_' | tr '\n' ' ')" >&2
  exec "$@"
fi
QCCL_SOCKET_IFNAME=$(ip -o -4 addr show | awk '$4 ~ /^10\.77\.0\./ {print $2; exit}')
export QCCL_SOCKET_IFNAME
exec "$@"
