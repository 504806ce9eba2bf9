#!/usr/bin/env bash
# perf/main_job.sh [build-dir] - the short side-by-side that the README's
# first command (tools/main-job.sh) ends with: every collective on 4 local
# ranks at 64 KiB, 1 MiB and 16 MiB with plain (malloc) buffers, qccl next to
# Open MPI, MPICH, Intel MPI, oneCCL and gloo when they are installed (peers
# that are missing are skipped, with the command that installs them), the
# last column qccl over the best peer of the cell; then the quantization
# codec's table.
#
# The quantized collectives (QUANT below) run with `-q $QUANT_FORMAT` beside
# their plain peers (allgather_q against Open MPI's and gloo's allgather), so
# the bandwidths line up. As root it ends with what quantization is for:
# the collectives of one ZeRO-3 step across two simulated hosts on a 1
# Gbit/s link, plain against ZeRO++ (qccl-zero-bench), bytes on the wire
# included, and a quantized gather on a host stream overlapping the
# caller's work (qccl-overlap-bench).
#
# Every cell is the median of QCCL_MAIN_ROUNDS interleaved rounds (every
# library once per round): one round on a shared 2-vCPU machine swings a
# cell by 2x either way. Five, the number issue 18's targets are measured
# with: with three, a 4-rank SendRecv or AlltoAll cell moved by 0.6-1.3x
# between runs of the same build (docs/PERF.md).
#
# Each library makes QCCL_MAIN_WARMUP calls, a barrier, then QCCL_MAIN_ITERS
# timed calls per size, nccl-tests' defaults (-w 5 -n 20): with 4 ranks on 2
# cores the first calls after the barrier still measure the ranks settling
# on the cores (a 4-rank 1 MiB AllGather: 150-250 us medians with -n 10 -w
# 2, 100-115 us with -n 50; docs/PERF.md), for every library alike.
#
# Environment: QCCL_MAIN_RANKS (default 4), QCCL_MAIN_ITERS (default 20),
# QCCL_MAIN_WARMUP (default 5), QCCL_MAIN_ROUNDS (default 5).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ranks=${QCCL_MAIN_RANKS:-4}
iters=${QCCL_MAIN_ITERS:-20}
warmup=${QCCL_MAIN_WARMUP:-5}
rounds=${QCCL_MAIN_ROUNDS:-5}
# gloo runs when torch is there: the test suite's venv (tools/test-all.sh)
py=python3
[ -x .venv/bin/python ] && .venv/bin/python -c "import torch" 2>/dev/null && py=.venv/bin/python

PLAIN="allreduce,allgather,reducescatter,alltoall,broadcast,reduce,gather,scatter,sendrecv"
QUANT="allgather_q,reducescatter_q,allreduce_q"
QUANT_FORMAT="int8"

colls="$PLAIN${QUANT:+,$QUANT}"
echo "# qccl main job: $ranks local ranks, $(nproc) CPUs, $(date '+%Y-%m-%d %H:%M')"
"$py" perf/compare.py --build "$build" --ranks "$ranks" --colls "$colls" \
  --quant-format "$QUANT_FORMAT" -b 64K -e 16M -f 16 -n "$iters" -w "$warmup" --rounds "$rounds" \
  --latency-size 8K --no-docs --no-plot --compact --outdir "$build/main-job"
rc=$?

echo
"$build/perf/qccl-perf" quant -b 64K -e 16M -f 16 -n "$iters" -w 2
qrc=$?
[ "$qrc" -eq 77 ] && qrc=0  # a libqccl without the codec skips

if [ "$(id -u)" -eq 0 ]; then
  echo
  echo "# 2 simulated hosts x 2 ranks, 1 Gbit/s link: plain vs ZeRO++ (16 MiB of bf16)"
  "$build/tools/qcclrun" -n 4 --placement 0,0,1,1 --link 1gbit --no-prefix --timeout 300 -- \
    "$build/perf/qccl-zero-bench" -b 16M -n 3 -w 1
  zrc=$?
  [ "$rc" -eq 0 ] && rc=$zrc
  echo
  echo "# host streams: a 16 MiB qwZ gather queued on a stream while the caller works"
  echo "# (2 simulated hosts x 1 rank, 1 Gbit/s; 'sleep' stands for a GPU kernel)"
  "$build/tools/qcclrun" -n 2 --nodes 2 --link 1gbit --no-prefix --timeout 300 -- \
    "$build/perf/qccl-overlap-bench" -b 16M -n 3
  orc=$?
  [ "$rc" -eq 0 ] && rc=$orc
else
  echo "# (as root, the main job also runs plain vs ZeRO++ across two simulated hosts)"
fi

echo "# logs and JSON: $build/main-job/"
[ "$rc" -ne 0 ] && exit "$rc"
exit "$qrc"
