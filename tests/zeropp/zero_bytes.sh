#!/bin/bash
# zero_bytes.sh QCCLRUN ZERO_TEST PLACEMENT - runs zero_test --bytes on
# simulated hosts with --link-stats and checks that the inter-node bytes of
# the counters (summed over ranks) agree with what the hosts' links sent:
# the links carry the counted payload plus headers (TCP/IP, UCX) and the
# bootstrap, so they must read at least the counters and at most 8% (plus
# 2 MB of setup traffic) more. zero_test itself checks the counters against
# the analytic volumes. Without root (no network namespaces) the link
# counters are unavailable and only zero_test's own checks run.
set -u
qcclrun=$1 exe=$2 placement=$3
w=$(($(echo "$placement" | tr -cd ',' | wc -c) + 1))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$qcclrun" -n "$w" --placement "$placement" --link-stats "$dir/links.json" --timeout 180 -- \
  "$exe" --placement "$placement" --bytes >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc -eq 0 ] || { echo "zero_bytes: zero_test failed ($rc)"; exit 1; }
python3 - "$dir/out" "$dir/links.json" <<'PY'
import json, re, sys
out = open(sys.argv[1]).read()
counted = sum(int(m) for m in re.findall(r"ZERO_BYTES rank=\d+ inter=(\d+)", out))
try:
    links = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    print("zero_bytes: no link counters (no network namespaces): counters only")
    sys.exit(0)
tx = [h["tx_bytes"] for h in links["hosts"]]
if not links.get("netns") or any(t is None for t in tx):
    print("zero_bytes: link counters unavailable: counters only")
    sys.exit(0)
sent = sum(tx)
print("zero_bytes: counters %d bytes across nodes, links sent %d bytes (%.2f%% more)"
      % (counted, sent, 100.0 * (sent - counted) / max(counted, 1)))
if not (counted <= sent <= counted * 1.08 + 2e6):
    print("zero_bytes: FAIL: the links do not agree with the counters")
    sys.exit(1)
PY
