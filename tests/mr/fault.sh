#!/bin/bash
# fault.sh - drives one fault test of mr_fault through qcclrun and judges it
# by the survivors' verdicts (qcclrun's own status is non-zero whenever the
# victim was killed, so it cannot decide).
#
#   fault.sh QCCLRUN MR_FAULT W MODE COLL TIMEOUT [extra mr_fault args]
#
# Runs QCCL_TIMEOUT=TIMEOUT qcclrun -n W [--placement $MR_FAULT_PLACEMENT]
# --grace G -- MR_FAULT --mode MODE
# --coll COLL, with a grace longer than the timeout so that qcclrun does not
# end the survivors before they report. Passes when:
#   - exactly W-1 "MRFAULT verdict" lines say PASS and none says FAIL
#     (mr_fault checks the result code, the elapsed time, later calls, the
#     abort time and /dev/shm itself);
#   - each verdict's elapsed time is within its printed limit (checked again
#     here, from the numbers);
#   - in abort mode, the victim's own line says PASS;
#   - the whole job ends within 3 * TIMEOUT + 60 s.
set -u
if [ $# -lt 6 ]; then
  echo "usage: $0 QCCLRUN MR_FAULT W MODE COLL TIMEOUT [args]" >&2
  exit 2
fi
qcclrun=$1 exe=$2 W=$3 mode=$4 coll=$5 T=$6
shift 6
slack=${QCCL_MR_FAULT_SLACK:-6}
grace=$((T * 2 + slack + 10))
limit=$((T * 3 + 60))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
# MR_FAULT_PLACEMENT (optional): put the ranks on simulated hosts
place=()
[ -n "${MR_FAULT_PLACEMENT:-}" ] && place=(--placement "$MR_FAULT_PLACEMENT")
QCCL_TIMEOUT=$T QCCL_MR_FAULT_SLACK=$slack "$qcclrun" -n "$W" "${place[@]}" --timeout "$limit" --grace "$grace" \
  -- "$exe" --mode "$mode" --coll "$coll" "$@" >"$out" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$out"
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "fault.sh: qcclrun exited $rc after $wall s (W=$W mode=$mode coll=$coll QCCL_TIMEOUT=$T)"

if grep -q 'MRFAULT SKIP' "$out"; then
  echo "fault.sh: SKIP"
  exit 77
fi
fail=0
expect=$((W - 1))
[ "$mode" = link-down ] && expect=$W # the victim must fail like the others
pass_n=$(grep -c 'MRFAULT verdict .* PASS' "$out")
fail_n=$(grep -c 'MRFAULT verdict .* FAIL' "$out")
if [ "$fail_n" -ne 0 ] || [ "$pass_n" -ne "$expect" ]; then
  echo "fault.sh: FAIL: $pass_n rank(s) passed, $fail_n failed, expected $expect passes"
  fail=1
fi
# re-check every printed elapsed time against its printed limit
bad=$(grep 'MRFAULT verdict' "$out" | sed -n 's/.*elapsed=\([0-9.]*\) limit=\([0-9.]*\).*/\1 \2/p' |
  awk '$1 > $2 { n++ } END { print n + 0 }')
if [ "$bad" -ne 0 ]; then
  echo "fault.sh: FAIL: $bad survivor(s) took longer than QCCL_TIMEOUT + slack"
  fail=1
fi
if [ "$mode" = abort ] && ! grep -q 'MRFAULT victim .* PASS' "$out"; then
  echo "fault.sh: FAIL: the aborting victim did not report PASS"
  fail=1
fi
if awk -v w="$wall" -v l="$limit" 'BEGIN { exit !(w + 0 > l + 0) }'; then
  echo "fault.sh: FAIL: the job took $wall s (limit $limit s)"
  fail=1
fi
if [ $fail -eq 0 ]; then echo "fault.sh: PASS"; fi
exit $fail
