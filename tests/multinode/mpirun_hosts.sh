#!/usr/bin/env bash
# mpirun_hosts.sh - qccl ranks launched by Open MPI's mpirun across simulated
# hosts, as a cluster's own launcher would start them (env bootstrap from
# OMPI_COMM_WORLD_*), instead of by qcclrun.
#
#   usage: mpirun_hosts.sh QCCLRUN PROG [ARGS...]
#
# qcclrun makes two hosts (network namespaces on a bridge) and starts this
# script once, inside host 0 ("--nodes 2 --placement 0"). The script then
# runs `mpirun -np 4 --host 10.77.0.1:2,10.77.0.2:2 PROG`: mpirun reaches
# host 1 through an rsh agent that enters that host's namespace instead of
# ssh (netns_rsh.sh), and every rank goes through netns_rank.sh, which
# gives it its host's identity. Needs root and mpirun; skips (77) without.
# The ranks meet through mpirun's PMIx server (nothing qccl-specific set);
# MPIRUN_HOSTS_COMM_ID=1 gives them QCCL_COMM_ID instead (the rendezvous
# without PMIx, which then only carries the secret). MPIRUN_HOSTS_BARE=1
# passes no QCCL_* variable at all: each rank has only the QCCL_HOST_ID that
# the simulation needs (the hosts share one hostname and boot id).
# MPIRUN_HOSTS_LINK=RATE throttles the link (qcclrun --link), and
# MPIRUN_HOSTS_TIMEOUT=S bounds the run (default 200 s); perf/hosts_bench.py
# uses it to run Open MPI over the same simulated hosts as qccl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${MPIRUN_HOSTS_INNER:-}" != 1 ]; then
  qcclrun=$1
  shift
  command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: simulated hosts need root"; exit 77; }
  link=()
  [ -z "${MPIRUN_HOSTS_LINK:-}" ] || link=(--link "$MPIRUN_HOSTS_LINK")
  MPIRUN_HOSTS_INNER=1 exec "$qcclrun" -n 1 --nodes 2 --placement 0 "${link[@]}" \
    --timeout "${MPIRUN_HOSTS_TIMEOUT:-200}" -- "$0" "$@"
fi

# inside host 0: qcclrun's rank variables are not for mpirun's ranks
if [ "${QCCLRUN_NETNS:-0}" != 1 ]; then
  echo "SKIP: qcclrun could not make network namespaces"
  exit 77
fi
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE QCCL_HOST_ID MASTER_ADDR MASTER_PORT
qccl_env=(-x QCCL_TIMEOUT=60 -x QCCL_MR_QUICK=1)
if [ "${MPIRUN_HOSTS_BARE:-0}" = 1 ]; then
  # mpirun's local ranks inherit this environment: leave nothing of qccl's
  for v in $(compgen -v QCCL_); do unset "$v"; done
  qccl_env=()
  export NETNS_RANK_BARE=1
fi
me=$(ip netns identify $$)
prefix=${me%-h0}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("10.77.0.1", 0)); print(s.getsockname()[1])')
export NETNS_PREFIX=$prefix
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=qccl0
if [ "${MPIRUN_HOSTS_COMM_ID:-0}" = 1 ]; then
  qccl_env+=(-x QCCL_COMM_ID=10.77.0.1:$port)
  echo "mpirun across $prefix-h0 and $prefix-h1, rendezvous QCCL_COMM_ID=10.77.0.1:$port"
else
  echo "mpirun across $prefix-h0 and $prefix-h1, rendezvous through PMIx"
fi
set -x
mpirun --allow-run-as-root --oversubscribe -np 4 --host 10.77.0.1:2,10.77.0.2:2 \
  --mca plm_rsh_agent "$here/netns_rsh.sh" --mca btl tcp,self \
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
  ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} -x NETNS_PREFIX ${NETNS_RANK_BARE:+-x NETNS_RANK_BARE} \
  "${qccl_env[@]}" \
  "$here/netns_rank.sh" "$@"
