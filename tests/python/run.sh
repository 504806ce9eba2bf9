#!/usr/bin/env bash
# Runs one pytest file on N real ranks: qcclrun -n N -- .venv/bin/python -m
# pytest FILE, each rank a process running the same tests in the same order.
# Skips (77) when tools/setup-python.sh has not made the venv.
#   usage: run.sh QCCLRUN NRANKS TIMEOUT FILE [pytest args...]
set -uo pipefail
qcclrun=$1 nranks=$2 timeout=$3 file=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${QCCL_VENV:-$root/.venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, numpy, pytest' 2>/dev/null; then
  echo "no Python venv with torch at $venv: run tools/setup-python.sh (skipped)"
  exit 77
fi
export PYTHONPATH="$root/python:$here${PYTHONPATH:+:$PYTHONPATH}"
export QCCLRUN="$qcclrun"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$qcclrun" -n "$nranks" --timeout "$timeout" -- "$venv/bin/python" -m pytest -q \
  -p no:cacheprovider -x "$here/$file" "$@"
