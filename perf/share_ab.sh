#!/usr/bin/env bash
# perf/share_ab.sh [-r ROUNDS] [-s SIZE] [-n RANKS] [-B CPU] [build-dir]
#
# A/B of the shared AllGather and AlltoAll (src/collectives/shared_copy.c)
# against the ordinary schedule, with every buffer from qcclMemAlloc
# (`qccl-perf -R 1`). Each round measures the copy bandwidth (qccl-copybw,
# the bound) and the VM's mode (qccl-handoff), then runs each collective
# with sharing off (QCCL_SHM_SHARE_BYTES past the size) and on (the
# default), back to back, so that every pair meets the same machine. With
# -B CPU a busy loop runs on that CPU throughout and the ranks are bound
# to cores (qcclrun --bind core): one rank then gets half of its core, as
# beside a data-loader thread or a noisy neighbour. Prints one line per
# run, then per collective and mode the median call time and fraction of
# the copy bound, and the median of the paired off/on time ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=10 size=256M ranks=2 busy=""
while getopts "r:s:n:B:" o; do
  case $o in
    r) rounds=$OPTARG ;;
    s) size=$OPTARG ;;
    n) ranks=$OPTARG ;;
    B) busy=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-s SIZE] [-n RANKS] [-B CPU] [build-dir]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
build=${1:-build}
for t in qccl-perf qccl-copybw qccl-handoff; do
  [ -x "$build/perf/$t" ] || { echo "share_ab: $build/perf/$t missing (ninja -C $build)" >&2; exit 2; }
done
bind=()
hog=""
if [ -n "$busy" ]; then
  bind=(--bind core)
  taskset -c "$busy" sh -c 'while :; do :; done' &
  hog=$!
  trap 'kill $hog 2>/dev/null' EXIT
fi
out=$(mktemp)
echo "# share_ab: $ranks ranks, $size, $rounds rounds${busy:+, CPU $busy busy}; round handoff_ns copy_GBps coll mode median_us"
for i in $(seq 1 "$rounds"); do
  h=$("$build/perf/qccl-handoff" 2>/dev/null | tail -1 | awk '{print $3}')
  bw=$("$build/perf/qccl-copybw" -t "$(( ranks < $(nproc) ? ranks : $(nproc) ))" -b "$size" -e "$size" -n 10 | tail -1 | awk '{print $4}')
  for coll in allgather alltoall; do
    for mode in off on; do
      lim=8388608
      [ $mode = off ] && lim=1099511627776
      us=$(QCCL_SHM_SHARE_BYTES=$lim "$build/tools/qcclrun" -n "$ranks" "${bind[@]}" -- \
        "$build/perf/qccl-perf" $coll -b "$size" -e "$size" -n 10 -w 2 -R 1 -c 1 2>&1 |
        awk '$1=="[0]" && $2 ~ /^[0-9]+$/ {print $(NF-1); s=$2} END {if (!s) print "failed"}')
      echo "$i $h $bw $coll $mode $us" | tee -a "$out"
    done
  done
done
python3 - "$out" "$ranks" "$size" <<'EOF'
import collections, statistics as st, sys
sys.path.insert(0, "perf")
from compare import parse_size, phys_bytes  # noqa: E402 (the bounds of docs/PERF.md)
runs, n = collections.defaultdict(dict), int(sys.argv[2])
S = parse_size(sys.argv[3])
for line in open(sys.argv[1]):
    i, h, bw, coll, mode, us = line.split()
    if us == "failed":
        sys.exit(f"share_ab: round {i} {coll} {mode} failed")
    runs[(coll, i)][mode] = (float(us), float(bw))
for coll in ("allgather", "alltoall"):
    pairs = [v for k, v in runs.items() if k[0] == coll]
    for mode in ("off", "on"):
        t = [p[mode][0] for p in pairs]
        # the bound: the collective's minimal traffic at that round's copy
        # bandwidth; the fraction is bound time / call time
        f = [phys_bytes(coll, S, n) / (p[mode][1] * 1e9) * 1e6 / p[mode][0] for p in pairs]
        print(f"{coll:9s} {mode:3s}: median {st.median(t):9.0f} us, {st.median(f):.2f} of the "
              f"copy bound (range {min(f):.2f}-{max(f):.2f}), {len(t)} rounds")
    r = [p["off"][0] / p["on"][0] for p in pairs]
    print(f"{coll:9s} paired off/on time: median {st.median(r):.2f} "
          f"(range {min(r):.2f}-{max(r):.2f}), on faster in {sum(x > 1 for x in r)} of {len(r)}")
EOF
rm -f "$out"
