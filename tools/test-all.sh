#!/usr/bin/env bash
# The full test suite, as CI runs it: install, build with warnings as
# errors, check formatting, run every meson test suite, then rebuild with
# AddressSanitizer + UndefinedBehaviorSanitizer and run the unit,
# multi-rank and engine suites again, then the engine suite under
# ThreadSanitizer. Ends with one line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash tools/setup.sh build || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

passed=0 failed=0 skipped=0
count() { # count <testlog.json> <label>
  read -r p f s < <(python3 - "$1" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    t = json.loads(line)
    r = t["result"]
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
        # what the failed test printed, last lines, so a CI log says why
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        sys.stderr.write("---- %s: %s; its last lines:\n" % (t["name"], r))
        sys.stderr.write("\n".join(out.splitlines()[-30:]) + "\n")
print(p, f, s)
PY
)
  echo "$2: $p passed, $f failed, $s skipped"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

# formatting of every C / CUDA file (clang-format 14, the repo's .clang-format)
bad=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs -r clang-format --dry-run -Werror 2>&1 | grep -c "error:" || true)
if [ "$bad" -eq 0 ]; then
  echo "format: ok"; passed=$((passed + 1))
else
  echo "format: $bad clang-format findings (run clang-format -i)"; failed=$((failed + 1))
fi

# the Python side (suite python): a venv with torch, NumPy, DeepSpeed, pytest
if bash tools/setup-python.sh; then
  echo "python setup: ok"
else
  echo "python setup: failed (the python suite skips)"; failed=$((failed + 1))
fi

meson test -C build --print-errorlogs --num-processes 2 > build/test-output.txt 2>&1
tail -n 30 build/test-output.txt
count build/meson-logs/testlog.json "release build"

# sanitizer build: unit, multi-rank, codec, topology, ZeRO++ and ZeRO suites
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan --werror -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dcuda=disabled > /dev/null
fi
if ninja -C build-asan > build-asan-ninja.txt 2>&1; then
  # QCCL_MR_QUICK=1: the multi-rank programs' lighter set (no 2^22 count
  # slot; the release build above runs it): the full set took 12.6 of CI's
  # 33-35 minutes here
  QCCL_MR_QUICK=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --num-processes 2 --suite unit --suite mr --suite engine \
    --suite quant --suite topology --suite zeropp --suite zero > build-asan/test-output.txt 2>&1
  tail -n 30 build-asan/test-output.txt
  count build-asan/meson-logs/testlog.json "sanitizer build"
else
  tail -n 40 build-asan-ninja.txt
  echo "sanitizer build: failed to build"; failed=$((failed + 1))
fi
rm -f build-asan-ninja.txt

# thread-sanitizer build: the engine suite (host streams, abort from another
# thread) and the ZeRO prefetch tests, without UCX (its init trips TSan) and without CUDA; only what the
# suite runs is built
if [ ! -f build-tsan/build.ninja ]; then
  meson setup build-tsan --werror -Dbuildtype=debugoptimized -Db_sanitize=thread \
    -Db_lundef=false -Dcuda=disabled -Ducx=disabled > /dev/null
fi
if ninja -C build-tsan tools/qcclrun tests/engine/eng_stream tests/engine/eng_fault \
  tests/zero/zero_train > build-tsan-ninja.txt 2>&1; then
  TSAN_OPTIONS=halt_on_error=1 \
    meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 2 --suite engine \
    > build-tsan/test-output.txt 2>&1
  tail -n 15 build-tsan/test-output.txt
  count build-tsan/meson-logs/testlog.json "thread-sanitizer build"
  # the ZeRO engine's stage-3 prefetch (gathers queued on a host stream)
  TSAN_OPTIONS=halt_on_error=1 \
    meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 2 --logbase zero \
    zero_train_prefetch zero_train_prefetch_zeropp > build-tsan/test-output-zero.txt 2>&1
  tail -n 8 build-tsan/test-output-zero.txt
  count build-tsan/meson-logs/zero.json "thread-sanitizer build, ZeRO prefetch"
else
  tail -n 40 build-tsan-ninja.txt
  echo "thread-sanitizer build: failed to build"; failed=$((failed + 1))
fi
rm -f build-tsan-ninja.txt

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
