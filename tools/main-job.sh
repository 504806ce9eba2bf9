#!/usr/bin/env bash
# The main job: install, build, then run qccl's collectives on 4 local ranks
# (plain and quantized) beside Open MPI, MPICH, Intel MPI, oneCCL and gloo,
# and print the table with each cell's best peer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh build
# the side-by-side peer: Open MPI from Debian (PyTorch's gloo joins in when
# torch is installed: pip install torch)
if ! command -v mpicc >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
# the other three peers (MPICH from Debian, Intel MPI and oneCCL from PyPI:
# about 600 MB the first time; QCCL_MAIN_PEERS=0 skips them, and a peer that
# fails to install is reported missing, not fatal)
if [ "${QCCL_MAIN_PEERS:-1}" != 0 ]; then
  bash tools/setup-peers.sh build || echo "main-job: some peers did not install (see above)"
fi
exec bash perf/main_job.sh build
