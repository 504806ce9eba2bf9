#!/usr/bin/env bash
# Installs the Python side of qccl's tests: a virtual environment at the
# repository root (.venv/) with torch (CPU use; PyPI's wheel brings its CUDA
# libraries anyway, ~3 GB), NumPy, DeepSpeed and pytest. Safe to run again:
# it does nothing when the venv already imports them. The qccl package itself
# is not installed there: the tests use it from python/ with the library of
# the build folder (QCCL_LIBRARY), as a checkout can.
#   usage: tools/setup-python.sh          (QCCL_VENV=dir to put it elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${QCCL_VENV:-.venv}
py=${PYTHON:-python3}
# pinned: the backend is written against torch 2.15's Python Backend API
# transformers and matplotlib: perf/gpt2_zero.py (issue 16's proof on a GPT-2)
pkgs="torch==2.15.0 deepspeed==0.19.8 numpy pytest transformers matplotlib"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
ok = m.version("torch").startswith("2.15.0") and m.version("deepspeed") == "0.19.8"
import numpy, pytest, transformers, matplotlib  # noqa: F401
sys.exit(0 if ok else 1)
PY
  echo "setup-python: $venv is ready"
  exit 0
fi

if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup-python: installing python3-venv"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq python3-venv >/dev/null
  py=python3
fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
echo "setup-python: installing $pkgs into $venv"
start=$(date +%s)
# DS_BUILD_OPS=0: DeepSpeed builds its C++ ops only when used (none on CPU here).
# pip compiles every module at install (~25 s of CPU): with
# PYTHONDONTWRITEBYTECODE set (as on the development machines) Python would
# otherwise compile torch again in every rank of every test.
# shellcheck disable=SC2086
DS_BUILD_OPS=0 "$venv/bin/pip" install -q --disable-pip-version-check $pkgs
echo "setup-python: done in $(( $(date +%s) - start )) s"
