#!/usr/bin/env bash
# Installs what qccl needs on Debian 12 (as root, via apt-get) and builds it
# into build/ with warnings as errors. Safe to run again: it installs only
# what is missing and reuses the build folder.
#   usage: tools/setup.sh [build-dir] [extra meson options...]
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
shift || true

pkgs="meson ninja-build pkg-config gcc g++ libhwloc-dev hwloc libucx-dev iproute2 python3 clang-format
  openmpi-bin libopenmpi-dev clang-14 libclang-rt-14-dev libpmix-dev libjansson-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $missing >/dev/null
fi

# A real Slurm for tests/launch/slurm.sh (its daemons are started by the
# test, with its own configuration). Optional: without it that test skips
# and everything else runs.
slurm_pkgs="slurmd slurmctld slurm-client munge"
slurm_missing=""
for p in $slurm_pkgs; do dpkg -s "$p" >/dev/null 2>&1 || slurm_missing="$slurm_missing $p"; done
if [ -n "$slurm_missing" ]; then
  echo "setup: installing$slurm_missing (optional: the Slurm test)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # shellcheck disable=SC2086
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    $slurm_missing >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      $slurm_missing >/dev/null 2>&1 ||
      echo "setup: could not install$slurm_missing; the Slurm test (launch_slurm) will skip"
  fi
fi
# Python packages of the tests (safetensors read-back of ZeRO checkpoints)
python3 -c "import safetensors.numpy" 2>/dev/null || python3 -m pip install -q safetensors numpy

if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" --werror "$@"
fi
ninja -C "$builddir"
