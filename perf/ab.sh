#!/usr/bin/env bash
# perf/ab.sh BASE_BUILD NEW_BUILD [rounds] - did a change slow the blocking
# calls? A/B of two builds of qccl-perf (e.g. the previous commit's and this
# one's), interleaved in one run: each round runs A then B (B then A on odd
# rounds) for the 8 KiB latency (median of 2000 calls) and the 1 MiB and
# 256 MiB busbw of AllReduce and AllGather on 2 local ranks, plain malloc
# buffers. Prints per point the median over rounds of each build, and B/A.
#
#   git worktree add /tmp/base HEAD~1 && meson setup /tmp/base/b /tmp/base \
#     -Dtests=false && ninja -C /tmp/base/b
#   perf/ab.sh /tmp/base/b build 7
set -euo pipefail
A=${1:?base build folder}
B=${2:?new build folder}
rounds=${3:-5}
ranks=${QCCL_AB_RANKS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() { # run BUILD LABEL ROUND
  local b=$1 label=$2 r=$3
  for coll in allreduce allgather; do
    "$b/tools/qcclrun" -n "$ranks" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b 8K -e 8K \
      -n 2000 -w 200 | awk -v c="$coll" -v l="$label" '$1 == 8192 { print l, c, "lat8K_us", $(NF-1) }'
    "$b/tools/qcclrun" -n "$ranks" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b 1M -e 1M \
      -n 50 -w 5 | awk -v c="$coll" -v l="$label" '$1 == 1048576 { print l, c, "busbw1M", $8 }'
    "$b/tools/qcclrun" -n "$ranks" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b 256M -e 256M \
      -n 5 -w 1 | awk -v c="$coll" -v l="$label" '$1 == 268435456 { print l, c, "busbw256M", $8 }'
  done >> "$out/rows"
}

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    run "$A" A "$r"; run "$B" B "$r"
  else
    run "$B" B "$r"; run "$A" A "$r"
  fi
done

python3 - "$out/rows" "$rounds" "$ranks" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
vals = {}
for lab, coll, metric, v in rows:
    vals.setdefault((coll, metric), {}).setdefault(lab, []).append(float(v))
print(f"# perf/ab.sh: {sys.argv[2]} interleaved rounds, {sys.argv[3]} ranks, medians")
print(f"{'collective':<10} {'metric':<10} {'A':>9} {'B':>9} {'B/A':>6}")
for (coll, metric), d in sorted(vals.items()):
    a, b = statistics.median(d["A"]), statistics.median(d["B"])
    print(f"{coll:<10} {metric:<10} {a:9.2f} {b:9.2f} {b / a:6.3f}")
PY
