#!/usr/bin/env bash
# launcher_test.sh CASE QCCLRUN FAKE_RANK - checks one behaviour of qcclrun.
#
# Each case runs qcclrun on fake_rank (see fake_rank.c for its actions) and
# checks the exit status, the output, the time taken and which processes and
# /dev/shm files are left. Pids and files of a case live in a private
# temporary folder, so cases may run in parallel. Exit 0: pass, 1: fail,
# 77: skip.
set -u

case_name=$1
QCCLRUN=$2
FAKE=$3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qcclrun-test.XXXXXX") || exit 1

cleanup() {
  local f pid
  for f in "$TMP"/pid.* "$TMP"/gc.*; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    rm -f "/dev/shm/qccl-$pid-launchertest" "/dev/shm/qccl-${pid}extra-launchertest"
  done
  rm -f "/dev/shm/qccl-$$-launchertest-other"
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL ($case_name): $*" >&2
  echo "--- stdout of the last run:" >&2
  head -c 4000 "$TMP/out" >&2 2>/dev/null
  echo "--- stderr of the last run:" >&2
  head -c 4000 "$TMP/err" >&2 2>/dev/null
  exit 1
}

now_ms() {
  local t=${EPOCHREALTIME//[.,]/}
  echo $((10#$t / 1000))
}

# run ARGS...: runs qcclrun; sets rc and ms (wall time), output in $TMP/out, $TMP/err.
run() {
  local t0
  t0=$(now_ms)
  echo "+ qcclrun $*"
  "$QCCLRUN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  ms=$(($(now_ms) - t0))
  echo "  exit $rc after $ms ms"
}

expect_rc() {
  [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1"
}

expect_err() {
  grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1'"
}

expect_ms_between() {
  ((ms >= $1 && ms <= $2)) || fail "took $ms ms, expected $1..$2 ms"
}

# alive PID: the process exists and is not a zombie.
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# expect_gone PIDFILE...: each process is gone (allowing 2 s for an exit in progress).
expect_gone() {
  local f pid i
  for f in "$@"; do
    [ -f "$f" ] || fail "missing pid file $f"
    pid=$(cat "$f")
    for ((i = 0; i < 20; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    alive "$pid" && fail "process $pid (from $(basename "$f")) is still alive"
  done
  return 0
}

case_env() {
  local i line port secret pid ports=() secrets=() pids=() first_secret
  FAKE_RANK_PASSTHRU=hello MASTER_ADDR=10.1.2.3 MASTER_PORT=1 QCCL_SECRET=stale \
    run -n 4 -- "$FAKE" env
  expect_rc 0
  [ "$(wc -l <"$TMP/out")" -eq 4 ] || fail "expected 4 lines on stdout"
  for i in 0 1 2 3; do
    [ "$(grep -c "^\[$i\] " "$TMP/out")" -eq 1 ] || fail "expected one line from rank $i"
    line=$(grep "^\[$i\] " "$TMP/out")
    re="^\[$i\] rank=$i world=4 local_rank=$i local_world=4 addr=127\.0\.0\.1 "
    re+="port=([0-9]+) secret=([0-9a-f]{32}) passthru=hello pid=([0-9]+)$"
    [[ $line =~ $re ]] || fail "rank $i: unexpected environment: $line"
    ports+=("${BASH_REMATCH[1]}")
    secrets+=("${BASH_REMATCH[2]}")
    pids+=("${BASH_REMATCH[3]}")
  done
  port=${ports[0]}
  secret=${secrets[0]}
  ((port > 1 && port <= 65535)) || fail "MASTER_PORT $port not a fresh port"
  for i in 1 2 3; do
    [ "${ports[$i]}" = "$port" ] || fail "ranks 0 and $i got different ports"
    [ "${secrets[$i]}" = "$secret" ] || fail "ranks 0 and $i got different secrets"
  done
  [ "$(printf '%s\n' "${pids[@]}" | sort -u | wc -l)" -eq 4 ] || fail "pids not distinct"
  first_secret=$secret
  run -n 1 -- "$FAKE" env
  expect_rc 0
  grep -q "secret=$first_secret" "$TMP/out" && fail "two jobs got the same secret"
  grep -q "^\[0\] rank=0 world=1 local_rank=0 local_world=1 " "$TMP/out" || fail "-n 1 env"
  return 0
}

case_prefix() {
  local i bad
  run -n 3 -- "$FAKE" lines
  expect_rc 0
  diff <(sort "$TMP/out") <(for i in 0 1 2; do printf '[%d] out-one\n[%d] out-two\n' $i $i; done | sort) ||
    fail "stdout lines not prefixed as expected"
  diff <(sort "$TMP/err") <(for i in 0 1 2; do printf '[%d] err-one\n[%d] err-two\n' $i $i; done | sort) ||
    fail "stderr lines not prefixed as expected"
  # 4 ranks write 400 long lines each in 7-byte pieces: no line may mix ranks.
  run -n 4 -- "$FAKE" burst 400
  expect_rc 0
  [ "$(wc -l <"$TMP/out")" -eq 1600 ] || fail "expected 1600 lines, got $(wc -l <"$TMP/out")"
  bad=$(grep -Evc '^\[([0-3])\] rank \1 line [0-9]+ x{200}$' "$TMP/out")
  [ "$bad" -eq 0 ] || fail "$bad lines are mixed or damaged"
  for i in 0 1 2 3; do
    diff <(grep "^\[$i\] " "$TMP/out" | cut -d' ' -f5) <(seq 0 399) >/dev/null ||
      fail "rank $i lines lost or out of order"
  done
  return 0
}

case_no_prefix() {
  run -n 1 --no-prefix -- "$FAKE" lines
  expect_rc 0
  cmp -s "$TMP/out" <(printf 'out-one\nout-two') || fail "stdout changed by --no-prefix"
  cmp -s "$TMP/err" <(printf 'err-one\nerr-two') || fail "stderr changed by --no-prefix"
  run -n 2 --no-prefix -- "$FAKE" burst 200
  expect_rc 0
  [ "$(grep -Ec '^rank [01] line [0-9]+ x{200}$' "$TMP/out")" -eq 400 ] ||
    fail "expected 400 intact unprefixed lines"
}

case_exit_codes() {
  run -n 3 -- "$FAKE" exit 0
  expect_rc 0
  [ -s "$TMP/err" ] && fail "stderr not empty for a clean run"
  run -n 3 -- "$FAKE" exit 77
  expect_rc 77
  run -n 3 -- "$FAKE" rank 1 exit 77
  expect_rc 77
  run -n 4 -- "$FAKE" rank 2 exit 5
  expect_rc 5
  expect_err "qcclrun: rank 2 exited with status 5"
  run -n 3 -- "$FAKE" rank 0 exit 77 rank 1 sleep 300 rank 1 exit 3
  expect_rc 3
  # The first rank to fail gives the status, not the lowest.
  run -n 3 --grace 1 -- "$FAKE" rank 0 sleep 500 rank 0 exit 4 rank 2 exit 6 hang
  expect_rc 6
  run -n 2 -- "$FAKE" rank 1 sigkill
  expect_rc 137
  expect_err "qcclrun: rank 1 killed by signal SIGKILL"
  run -n 2 -- "$TMP/no-such-program"
  expect_rc 127
  expect_err "cannot execute"
}

case_grace() {
  # Rank 0 fails after 0.3 s; ranks 1 and 2 hang, and every rank has a child.
  run -n 3 --grace 1 --timeout 50 -- "$FAKE" pidfile "$TMP/pid.%r" grandchild "$TMP/gc.%r" \
    rank 0 sleep 300 rank 0 exit 3 hang
  expect_rc 3
  expect_err "qcclrun: rank 0 exited with status 3"
  expect_ms_between 1250 15000
  expect_gone "$TMP"/pid.* "$TMP"/gc.*
  # The default grace is 3 s.
  run -n 2 --timeout 50 -- "$FAKE" rank 0 exit 2 hang
  expect_rc 2
  expect_ms_between 2950 20000
}

case_grace_kill() {
  run -n 2 --grace 0.5 --timeout 50 -- "$FAKE" pidfile "$TMP/pid.%r" ignore-term rank 0 exit 3 hang
  expect_rc 3
  expect_err "qcclrun: rank 1 killed by signal SIGKILL"
  expect_ms_between 2450 20000
  expect_gone "$TMP"/pid.*
}

case_timeout() {
  run -n 2 --timeout 2 -- "$FAKE" pidfile "$TMP/pid.%r" hang
  expect_rc 124
  expect_err "qcclrun: timeout after 2 s"
  expect_ms_between 1950 10000
  expect_gone "$TMP"/pid.*
  run -n 3 --timeout 0.5 -- "$FAKE" hang
  expect_rc 124
  expect_ms_between 450 8000
  run -n 2 --timeout 20 -- "$FAKE" exit 0
  expect_rc 0
  expect_ms_between 0 10000
}

# usage_case STATUS TEXT ARGS...: qcclrun ARGS exits STATUS naming TEXT on stderr.
usage_case() {
  local want=$1 text=$2
  shift 2
  run "$@"
  expect_rc "$want"
  [ "$want" -eq 0 ] || expect_err "$text"
}

case_usage() {
  usage_case 2 "'--'"
  usage_case 2 "'--'" -n 2
  usage_case 2 "'--'" -n 2 "$FAKE"
  usage_case 2 "no program" -n 2 --
  usage_case 2 "-n" -- "$FAKE"
  usage_case 2 "-n" -n -- "$FAKE"
  usage_case 2 "'0'" -n 0 -- "$FAKE"
  usage_case 2 "'1025'" -n 1025 -- "$FAKE"
  usage_case 2 "'abc'" -n abc -- "$FAKE"
  usage_case 2 "'4x'" -n 4x -- "$FAKE"
  usage_case 2 "--timeout" --timeout xyz -n 2 -- "$FAKE"
  usage_case 2 "'xyz'" --timeout xyz -n 2 -- "$FAKE"
  usage_case 2 "'0'" --timeout 0 -n 2 -- "$FAKE"
  usage_case 2 "--grace" -n 2 --grace -1 -- "$FAKE"
  usage_case 2 "'nan'" -n 2 --grace nan -- "$FAKE"
  usage_case 2 "'--bogus'" -n 2 --bogus -- "$FAKE"
  usage_case 0 "" -h
  grep -q "^usage: qcclrun -n N" "$TMP/out" || fail "-h prints no usage on stdout"
  usage_case 0 "" --help
  grep -q -- "--grace" "$TMP/out" || fail "--help does not list --grace"
  usage_case 0 "" -n 1 --timeout=5 --grace=0.25 --no-prefix -- "$FAKE" exit 0
}

case_shm() {
  local other=/dev/shm/qccl-$$-launchertest-other f pid
  [[ -d /dev/shm && -w /dev/shm ]] || {
    echo "SKIP: /dev/shm is not writable"
    exit 77
  }
  : >"$other" || fail "cannot create $other"
  run -n 3 -- "$FAKE" pidfile "$TMP/pid.%r" touch "/dev/shm/qccl-%p-launchertest" \
    touch "/dev/shm/qccl-%pextra-launchertest"
  expect_rc 0
  for f in "$TMP"/pid.*; do
    pid=$(cat "$f")
    [ -e "/dev/shm/qccl-$pid-launchertest" ] && fail "qccl-$pid-launchertest not removed"
    [ -e "/dev/shm/qccl-${pid}extra-launchertest" ] || fail "qccl-${pid}extra-* removed"
    rm -f "/dev/shm/qccl-${pid}extra-launchertest"
  done
  [ -e "$other" ] || fail "another job's segment $other was removed"
  rm -f "$TMP"/pid.*
  # Also when the job is killed.
  run -n 2 --timeout 1 -- "$FAKE" pidfile "$TMP/pid.%r" touch "/dev/shm/qccl-%p-launchertest" hang
  expect_rc 124
  for f in "$TMP"/pid.*; do
    pid=$(cat "$f")
    [ -e "/dev/shm/qccl-$pid-launchertest" ] && fail "qccl-$pid-launchertest not removed"
  done
  [ -e "$other" ] || fail "another job's segment $other was removed"
  return 0
}

case_zombie() {
  # Rank 1 waits for rank 0 (exited 0 at once) to vanish; a zombie would not.
  run -n 2 --timeout 30 -- "$FAKE" rank 0 pidfile "$TMP/z" rank 1 zombie-check "$TMP/z"
  expect_rc 0
}

# signal_case SIG STATUS MIN_MS MAX_MS [ACTION...]
signal_case() {
  local sig=$1 want=$2 lo=$3 hi=$4 qpid i t0
  shift 4
  rm -f "$TMP"/pid.*
  echo "+ qcclrun -n 2 -- fake_rank $* (then SIG$sig)"
  "$QCCLRUN" -n 2 -- "$FAKE" pidfile "$TMP/pid.%r" "$@" hang >"$TMP/out" 2>"$TMP/err" &
  qpid=$!
  for ((i = 0; i < 200; i++)); do
    [ -f "$TMP/pid.0" ] && [ -f "$TMP/pid.1" ] && break
    sleep 0.05
  done
  [[ -f $TMP/pid.0 && -f $TMP/pid.1 ]] || fail "ranks did not start"
  t0=$(now_ms)
  kill -"$sig" "$qpid"
  wait "$qpid"
  rc=$?
  ms=$(($(now_ms) - t0))
  echo "  exit $rc after $ms ms"
  expect_rc "$want"
  expect_ms_between "$lo" "$hi"
  expect_gone "$TMP"/pid.*
}

case_signals() {
  signal_case TERM 143 0 6000
  signal_case INT 130 0 6000
  signal_case TERM 143 1900 10000 ignore-term # SIGKILL 2 s after SIGTERM
}

case_leftover() {
  # Every rank exits 0 but leaves a child that holds its output pipes.
  run -n 2 --timeout 30 -- "$FAKE" pidfile "$TMP/pid.%r" grandchild "$TMP/gc.%r" exit 0
  expect_rc 0
  expect_ms_between 0 10000
  expect_gone "$TMP"/gc.*
}

case_start_fail() {
  local f
  # 40 descriptors cannot hold the pipes of 100 ranks: qcclrun stops the ranks it started.
  (
    ulimit -n 40
    run -n 100 --timeout 30 -- "$FAKE" pidfile "$TMP/pid.%r" hang
    exit "$rc"
  )
  rc=$?
  expect_rc 1
  expect_err "cannot start rank"
  for f in "$TMP"/pid.*; do
    [ -f "$f" ] && expect_gone "$f"
  done
  return 0
}

case $case_name in
  env | prefix | no_prefix | exit_codes | grace | grace_kill | timeout | usage | shm | zombie | \
    signals | leftover | start_fail)
    "case_$case_name"
    echo "PASS ($case_name)"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
