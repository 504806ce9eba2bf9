#!/usr/bin/env bash
# zero_ckpt.sh - ZeRO checkpoints across world sizes and stages, their
# atomicity and their integrity checks, with real ranks (qcclrun).
#   usage: zero_ckpt.sh QCCLRUN ZERO_TRAIN QCCL_ZERO_CKPT
# 1. W = 4, stage 3 trains 3 steps, saves, trains on (the uninterrupted
#    run; it records its masters and moments at the save and its step
#    after it, see zero_train.c --save).
# 2. Loads at W = 2 (stage 1), W = 3 (stage 3), W = 2 (stage 2), W = 1
#    (stage 3): masters and moments equal the saved ones bit for bit, and
#    the next step equals the uninterrupted run's within both runs' bounds.
# 3. kill -9 of rank 1 half-way through a later save (the test hook
#    QCCL_ZERO_TEST_KILL_IN_SAVE): the previous checkpoint still loads and
#    gives the same step.
# 4. qccl-zero-ckpt list / verify / consolidate; the safetensors file read
#    back by Python's safetensors equals the saved masters.
# 5. A model with a parameter of another name: the load fails naming the
#    manifest. One flipped byte in a shard file, a truncated shard file and a
#    flipped byte in the manifest: the load fails on every rank naming the
#    file, and verify fails naming it.
set -u
run=$1 train=$2 ckpt=$3
seed=${QCCL_TEST_SEED:-$(( (RANDOM << 15) ^ RANDOM ))}
echo "seed $seed (replay: QCCL_TEST_SEED=$seed)"
dir=$(mktemp -d /tmp/zero_ckpt.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
common=(--opts adamw --seed "$seed")

"$run" -n 4 --timeout 120 -- "$train" --stages 3 "${common[@]}" --batch 3 --steps 4 \
  --save "$dir/ck" --save-at 3 || bad "W=4 stage 3 save run"
[ -f "$dir/ck/expect-3.bin" ] || { bad "no expect file"; exit 1; }

for c in "2 1 6" "3 3 4" "2 2 6" "1 3 12"; do
  set -- $c
  "$run" -n "$1" --timeout 120 -- "$train" --stages "$2" "${common[@]}" --batch "$3" --steps 4 \
    --load "$dir/ck" --start 3 || bad "load at W=$1 stage $2"
done

# a save killed half-way: latest still names the step-3 checkpoint
before=$(cat "$dir/ck/latest")
QCCL_ZERO_TEST_KILL_IN_SAVE=1 "$run" -n 4 --timeout 120 -- "$train" --stages 3 "${common[@]}" \
  --batch 3 --steps 5 --save "$dir/ck" --save-at 4 > "$dir/kill.log" 2>&1 &&
  bad "the run with a rank killed during the save succeeded"
[ "$(cat "$dir/ck/latest")" = "$before" ] || bad "latest changed by a failed save"
ls -d "$dir"/ck/ckpt-00000004-* > /dev/null 2>&1 || bad "the killed save left no partial checkpoint (hook not reached?)"
"$run" -n 2 --timeout 120 -- "$train" --stages 3 "${common[@]}" --batch 6 --steps 4 \
  --load "$dir/ck" --start 3 || bad "load after the killed save"

# the CLI
"$ckpt" list "$dir/ck" | grep -q "world size 4, stage 3" || bad "qccl-zero-ckpt list"
"$ckpt" verify "$dir/ck" || bad "qccl-zero-ckpt verify of a good checkpoint"
"$ckpt" consolidate "$dir/ck" "$dir/model.safetensors" || bad "qccl-zero-ckpt consolidate"
python3 - "$dir/model.safetensors" "$dir/ck/state-3.bin" <<'PY' || bad "safetensors read-back"
import sys
import numpy as np
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
names = ["l1.weight", "l1.bias", "l2.weight", "l2.bias", "l3.weight", "l3.bias"]
counts = [91, 13, 143, 11, 55, 5]
state = np.fromfile(sys.argv[2], dtype="<f4")
off = 0
for n, c in zip(names, counts):
    want = state[off:off + c]  # the masters at the save, then the two moments
    off += 3 * c
    got = t[n]
    assert got.dtype == np.float32 and got.shape == (c,), (n, got.dtype, got.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), n
assert sorted(t) == sorted(names), sorted(t)
print("safetensors: %d tensors equal the saved masters" % len(t))
PY

# corruption: a flipped byte, a truncated file, a flipped manifest byte
latest=$(cut -d' ' -f1 "$dir/ck/latest")
corrupt() { # corrupt <name> <file> <how>
  rm -rf "$dir/bad"
  cp -r "$dir/ck" "$dir/bad"
  f="$dir/bad/$latest/$2"
  size=$(stat -c %s "$f")
  case $3 in
    flip) off=$(( (seed % (size - 80)) + 70 ))
          printf "$(printf '\\x%02x' $(( ($(od -An -tu1 -j "$off" -N1 "$f") ^ 0x10) )))" |
            dd of="$f" bs=1 seek="$off" conv=notrunc status=none ;;
    trunc) truncate -s $(( size - 4 )) "$f" ;;
  esac
  "$run" -n 2 --timeout 120 -- "$train" --stages 2 "${common[@]}" --batch 6 --steps 4 \
    --load "$dir/bad" --start 3 --expect-fail "$2" || bad "$1: load"
  out=$("$ckpt" verify "$dir/bad" 2>&1) && bad "$1: verify passed"
  echo "$out" | grep -q "$2" || bad "$1: verify does not name $2: $out"
}
# a model that does not match: the error names the manifest
"$run" -n 2 --timeout 120 -- "$train" --stages 2 "${common[@]}" --batch 6 --steps 4 \
  --load "$dir/ck" --start 3 --mismatch --expect-fail manifest.json || bad "mismatched model"

corrupt "flipped shard byte" rank1.shard flip
corrupt "truncated shard" rank3.shard trunc
corrupt "flipped manifest byte" manifest.json flip

[ $fail -eq 0 ] && echo "zero_ckpt: PASS" || echo "zero_ckpt: FAIL (seed $seed)"
exit $fail
