#!/usr/bin/env bash
# nccl_preload.sh - an unmodified NCCL program (nccl_unmodified, linked with
# the CUDA toolkit's libnccl.so.2) runs on qccl's drop-in:
#   1. it is bound to NVIDIA's library: NEEDED libnccl.so.2, which ldd
#      resolves outside the drop-in's folder;
#   2. with LD_PRELOAD=<drop-in> on 4 ranks: correct results, version 22899;
#   3. with the drop-in first on LD_LIBRARY_PATH, on 2 ranks: the same;
#   4. with QCCL_POLICY quantizing all-gathers and reduce-scatters, on 4
#      ranks (and on 2 simulated hosts x 2 ranks when multihost is 1): the
#      program's own error report shows quantized results (nonzero errors,
#      within its tolerance), and qccl's TRACE lines say which calls ran
#      quantized: the all-gather and the reduce-scatter of every rank.
#   usage: nccl_preload.sh QCCLRUN PROGRAM DROPIN_DIR MULTIHOST(0|1)
set -uo pipefail
qcclrun=$1 prog=$2 lib=$3 multihost=$4
dropin=$lib/libnccl.so.2
# meson puts its build folders on LD_LIBRARY_PATH: start from nothing, so
# that each run below takes the drop-in only by the means it names
unset LD_LIBRARY_PATH LD_PRELOAD
work=$(mktemp -d "${TMPDIR:-/tmp}/qccl-nccl-preload.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. bound to NVIDIA's library
readelf -d "$prog" | grep -q 'NEEDED.*\[libnccl.so.2\]' || fail "$prog does not need libnccl.so.2"
real=$(ldd "$prog" | awk '/libnccl.so.2/ {print $3}')
[ -n "$real" ] || fail "ldd finds no libnccl.so.2 for $prog"
[ "$(readlink -f "$real")" != "$(readlink -f "$dropin")" ] || fail "$prog resolves to the drop-in by itself"
echo "without the drop-in, $prog loads $real"

run() { # run LABEL NRANKS [qcclrun options] -- env...: output in $work/LABEL.out
  local label=$1; shift
  "$@" > "$work/$label.out" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { cat "$work/$label.out"; fail "$label: exit $rc"; }
  local n
  n=$(grep -c "nccl version 22899" "$work/$label.out")
  [ "$n" -eq "$want_ranks" ] || { cat "$work/$label.out"; fail "$label: $n of $want_ranks ranks report version 22899"; }
  echo "$label: ok"
}

# 2. LD_PRELOAD
want_ranks=4
run preload "$qcclrun" -n 4 --timeout 120 -- env LD_PRELOAD="$dropin" "$prog" "$work" 0
grep "max error" "$work/preload.out" | head -1

# 3. LD_LIBRARY_PATH
want_ranks=2
run library_path "$qcclrun" -n 2 --timeout 120 -- \
  env LD_LIBRARY_PATH="$lib" "$prog" "$work" 0

# 4. QCCL_POLICY, unchanged program
policy() { # policy LABEL [qcclrun placement options]
  local label=$1; shift
  want_ranks=4
  run "$label" env QCCL_POLICY=allgather:int8:b256,reducescatter:int8:b256 QCCL_DEBUG=TRACE \
    QCCL_DEBUG_SUBSYS=ZERO "$qcclrun" -n 4 "$@" --timeout 120 -- \
    env LD_PRELOAD="$dropin" "$prog" "$work" 0.5
  local ag rs
  ag=$(grep -c "policy: allgather of .* runs quantized" "$work/$label.out")
  rs=$(grep -c "policy: reducescatter of .* runs quantized" "$work/$label.out")
  [ "$ag" -eq 4 ] && [ "$rs" -eq 4 ] || { cat "$work/$label.out"; fail "$label: $ag all-gathers and $rs reduce-scatters ran quantized, expected 4 each"; }
  # the program itself sees quantized values: its gather error is not 0
  grep "max error" "$work/$label.out" | grep -qv "allgather 0 " || fail "$label: exact results"
  grep "max error" "$work/$label.out" | grep -q "allgather 0 " && fail "$label: a rank gathered exact values"
  grep "max error" "$work/$label.out" | head -1
  grep -m1 "QCCL_POLICY" "$work/$label.out"
}
policy policy_1host
if [ "$multihost" = 1 ]; then
  policy policy_2x2 --nodes 2
fi
echo "ok"
