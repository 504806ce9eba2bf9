#!/usr/bin/env bash
# The main job: install, build, then run qccl's collectives on 4 local ranks
# (plain and quantized, side by side) and print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh build
exec bash perf/main_job.sh build
