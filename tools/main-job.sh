#!/usr/bin/env bash
# The main job: install, build, then run qccl's collectives on 4 local ranks
# (plain and quantized, side by side) and print the table.
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
exec bash perf/main_job.sh build
