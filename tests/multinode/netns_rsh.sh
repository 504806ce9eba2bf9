#!/usr/bin/env bash
# netns_rsh.sh - mpirun's "ssh" for simulated hosts (plm_rsh_agent): runs the
# command it is given inside the network namespace of the host it names
# (10.77.0.<i+1> is host i of the qcclrun run $NETNS_PREFIX). ip netns exec
# also mounts that namespace's sysfs, so UCX sees the host's interface.
set -eu
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done # ssh-style options
host=$1
shift
case $host in
  10.77.0.*) i=$(( ${host##*.} - 1 )) ;;
  *) echo "netns_rsh: unknown host '$host'" >&2; exit 1 ;;
esac
# the PMIx server of that host listens on its own interface
export PMIX_MCA_ptl_tcp_if_include=qccl$i
exec ip netns exec "$NETNS_PREFIX-h$i" /bin/sh -c "$*"
