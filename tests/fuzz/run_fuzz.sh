#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on a fresh corpus (seeded by
# tests/fuzz/seeds/<target>/ if present) and passes its verdict on: a crash,
# an over-read or a broken check fails the test and leaves the input in the
# working directory (crash-*), the way libFuzzer prints it.
#   usage: run_fuzz.sh TARGET SECONDS
set -euo pipefail
target=$(realpath "$1")
secs=$2
name=$(basename "$target")
work=$(mktemp -d "/tmp/qccl-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
seeds="$(dirname "$(realpath "$0")")/seeds/$name"
mkdir -p "$work/corpus"
if [ -d "$seeds" ]; then cp "$seeds"/* "$work/corpus/" 2>/dev/null || true; fi
cd "$work"
"$target" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$PWD/" corpus 2>&1 | grep -v '^#[0-9]*\s*\(NEW\|REDUCE\|pulse\)' || {
  rc=${PIPESTATUS[0]}
  ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null | while read -r f; do
    echo "input that failed: $(od -An -c "$f" | head -5)"
  done
  exit "$rc"
}
