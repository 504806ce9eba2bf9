#!/usr/bin/env bash
# netns_rank.sh - a rank started by mpirun on a simulated host: takes the
# host's identity from its network namespace (the simulated hosts share one
# hostname and boot id) and its bootstrap interface from its address.
set -eu
ns=$(ip netns identify $$)
[ -n "$ns" ] || { echo "netns_rank: not in a named network namespace" >&2; exit 1; }
export QCCL_HOST_ID="mpirun-$ns"
QCCL_SOCKET_IFNAME=$(ip -o -4 addr show | awk '$4 ~ /^10\.77\.0\./ {print $2; exit}')
export QCCL_SOCKET_IFNAME
exec "$@"
