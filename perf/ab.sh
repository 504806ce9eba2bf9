#!/usr/bin/env bash
# perf/ab.sh BASE_BUILD NEW_BUILD [rounds] - did a change slow the blocking
# calls? A/B of two builds of qccl-perf (e.g. the previous commit's and this
# one's), interleaved in one run: each round runs A then B (B then A on odd
# rounds) for the 8 KiB latency (median of 2000 calls) and the 1 MiB and
# 256 MiB busbw of AllReduce and AllGather on 2 local ranks, plain malloc
# buffers. Prints per point the median over rounds of each build, and B/A.
# Across simulated hosts: QCCL_AB_NODES=2 QCCL_AB_LINK=1gbit (qcclrun's
# --nodes and --link), and QCCL_AB_BIG=16M for a large point that takes
# seconds rather than minutes on a slow link.
#
#   git worktree add /tmp/base HEAD~1 && meson setup /tmp/base/b /tmp/base \
#     -Dtests=false && ninja -C /tmp/base/b
#   perf/ab.sh /tmp/base/b build 7
set -euo pipefail
A=${1:?base build folder}
B=${2:?new build folder}
rounds=${3:-5}
ranks=${QCCL_AB_RANKS:-2}
big=${QCCL_AB_BIG:-256M}
big_bytes=$(python3 -c "import sys; s=sys.argv[1]; print(int(s[:-1]) << {'K': 10, 'M': 20, 'G': 30}[s[-1]])" "$big")
hosts=()
if [ -n "${QCCL_AB_NODES:-}" ]; then
  hosts=(--nodes "$QCCL_AB_NODES")
  [ -n "${QCCL_AB_LINK:-}" ] && hosts+=(--link "$QCCL_AB_LINK")
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() { # run BUILD LABEL ROUND
  local b=$1 label=$2 r=$3
  for coll in allreduce allgather; do
    "$b/tools/qcclrun" -n "$ranks" "${hosts[@]}" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b 8K -e 8K \
      -n 2000 -w 200 | awk -v c="$coll" -v l="$label" '$1 == 8192 { print l, c, "lat8K_us", $(NF-1) }'
    "$b/tools/qcclrun" -n "$ranks" "${hosts[@]}" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b 1M -e 1M \
      -n 50 -w 5 | awk -v c="$coll" -v l="$label" '$1 == 1048576 { print l, c, "busbw1M", $8 }'
    "$b/tools/qcclrun" -n "$ranks" "${hosts[@]}" --no-prefix -- "$b/perf/qccl-perf" "$coll" -b "$big" -e "$big" \
      -n 5 -w 1 | awk -v c="$coll" -v l="$label" -v n="$big_bytes" -v m="busbw$big" \
      '$1 == n { print l, c, m, $8 }'
  done >> "$out/rows"
}

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    run "$A" A "$r"; run "$B" B "$r"
  else
    run "$B" B "$r"; run "$A" A "$r"
  fi
done

python3 - "$out/rows" "$rounds" "$ranks ranks${QCCL_AB_NODES:+ on $QCCL_AB_NODES hosts}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
vals = {}
for lab, coll, metric, v in rows:
    vals.setdefault((coll, metric), {}).setdefault(lab, []).append(float(v))
print(f"# perf/ab.sh: {sys.argv[2]} interleaved rounds, {sys.argv[3]}, medians")
print(f"{'collective':<10} {'metric':<10} {'A':>9} {'B':>9} {'B/A':>6}")
for (coll, metric), d in sorted(vals.items()):
    a, b = statistics.median(d["A"]), statistics.median(d["B"])
    print(f"{coll:<10} {metric:<10} {a:9.2f} {b:9.2f} {b / a:6.3f}")
PY
