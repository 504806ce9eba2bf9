#!/usr/bin/env bash
# info_check.sh QCCLRUN QCCL_INFO DATA_DIR CASE INTRA INTER - runs qccl-info
# and checks its output (every expected line must appear). INTRA and INTER
# are the device-buffer transports the build gives inside and across nodes
# (from meson: cuda_ipc / nccl / shm, nccl / ucx).
#   alone      version, build features, ISA, host, this machine's topology
#   file       QCCL_TOPO_FILE=topo_2s_pcie.xml: the 4 GPUs and their NICs
#   badfile    a missing QCCL_TOPO_FILE: exit 1 and the variable named
#   ranks2     qcclrun -n 2: rank map and path table of one node
#   ranks2x2i  qcclrun -n 4 --placement 0,1,0,1: map and paths per rank
set -uo pipefail
run=$1 info=$2 data=$3 case=$4 intra=${5:-shm} inter=${6:-ucx}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
expect() { # expect PATTERN (fixed string)
  if ! grep -qF -- "$1" "$out"; then
    echo "FAIL ($case): no line with: $1"
    fail=1
  fi
}
case $case in
  alone)
    "$info" > "$out" 2>&1; rc=$?
    expect "qccl 0.1.0"; expect "build: CUDA"; expect "quantization ISA: "
    expect "host: "; expect "topology: "; expect "(this machine)"; expect "numa 0: cpus"
    ;;
  file)
    QCCL_TOPO_FILE=$data/topo_2s_pcie.xml "$info" > "$out" 2>&1; rc=$?
    expect "2 packages, 2 NUMA nodes, 8 cores, 8 PUs, 4 GPUs, 5 NICs (QCCL_TOPO_FILE="
    expect "gpu 0 0000:11:00.0 [10de:2330] cuda0 numa 0 -> nic 1 mlx5_0 0000:12:00.0 numa 0 (2 hops)"
    expect "gpu 3 0000:99:00.0 [10de:2330] cuda3 numa 1 -> nic 4 mlx5_3 0000:9a:00.0 numa 1 (2 hops)"
    expect "nic 0 eno1 0000:01:00.0"
    ;;
  badfile)
    QCCL_TOPO_FILE=/nonexistent/topo.xml "$info" > "$out" 2>&1; rc=$?
    expect "QCCL_TOPO_FILE='/nonexistent/topo.xml'"
    if [ "$rc" -ne 1 ]; then echo "FAIL ($case): exit $rc, expected 1"; fail=1; fi
    rc=0
    ;;
  ranks2)
    "$run" -n 2 --timeout 60 -- "$info" > "$out" 2>&1; rc=$?
    expect "[0] ranks: 2 on 1 node"
    expect "[0]   rank 0: node 0 of 1, local rank 0 of 2 (node ranks 0-1, leader 0); node sizes 2..2 (equal)"
    expect "[0]   rank 1: node 0 of 1, local rank 1 of 2"
    expect "[0]   rank 0: self 0; shm 1"
    expect "[0]   rank 1: self 1; shm 0"
    ;;
  ranks2x2i)
    "$run" -n 4 --placement 0,1,0,1 --timeout 90 -- "$info" > "$out" 2>&1; rc=$?
    expect "[0] ranks: 4 on 2 nodes"
    expect "[0]   rank 1: host qccl-host1-"
    expect "[0]   rank 3: node 1 of 2, local rank 1 of 2 (node ranks 1,3, leader 1); node sizes 2..2 (equal)"
    expect "[0]   rank 0: self 0; shm 2; ucx 1,3"
    expect "[0]   rank 3: self 3; shm 1; ucx 0,2"
    # rank 0's device row: peer 2 by INTRA, 1 and 3 by INTER, kinds in the
    # order self, shm, ucx, cuda_ipc, nccl
    if [ "$intra" = "$inter" ]; then
      row="self 0; $intra 1-3"
    else
      declare -A order=([shm]=1 [ucx]=2 [cuda_ipc]=3 [nccl]=4)
      if [ "${order[$intra]}" -lt "${order[$inter]}" ]; then
        row="self 0; $intra 2; $inter 1,3"
      else
        row="self 0; $inter 1,3; $intra 2"
      fi
    fi
    expect "path table (device buffers"
    expect "[0]   rank 0: $row"
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
if [ "$rc" -ne 0 ]; then echo "FAIL ($case): qccl-info exited $rc"; fail=1; fi
if [ "$fail" -ne 0 ]; then echo "---- output ----"; cat "$out"; exit 1; fi
cat "$out"
echo "ok ($case)"
