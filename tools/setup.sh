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
  openmpi-bin libopenmpi-dev clang-14 libclang-rt-14-dev libjansson-dev"
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

# Python packages of the tests (safetensors read-back of ZeRO checkpoints)
python3 -c "import safetensors.numpy" 2>/dev/null || python3 -m pip install -q safetensors numpy

if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" --werror "$@"
fi
ninja -C "$builddir"
