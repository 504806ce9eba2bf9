#!/usr/bin/env bash
# launcher_test.sh CASE QCCLRUN FAKE_RANK - checks one behaviour of qcclrun.
#
# Each case runs qcclrun on fake_rank (see fake_rank.c for its actions) and
# checks the exit status, the output, the time taken and which processes and
# /dev/shm files are left. Pids and files of a case live in a private
# temporary folder, so cases may run in parallel. Exit 0: pass, 1: fail,
# 77: skip.
#
# The nodes_* cases test --nodes (simulated hosts). They need root for
# network namespaces (else they skip), except nodes_usage and nodes_fallback.
# A run's namespaces are named qccl-<its qcclrun pid>-*, and the pid is read
# from the ranks' QCCL_HOST_ID, so parallel runs are told apart.
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
  if [ -n "${killed_qpid:-}" ]; then # nodes_killed failed before its --cleanup
    for f in "$TMP"/pid.*; do
      [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
    done
    for f in $(ip netns list 2>/dev/null | grep -o "^qccl-$killed_qpid-[a-z0-9]*"); do
      ip netns del "$f"
    done
  fi
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
    [[ -f $f && $f != *.tmp ]] && expect_gone "$f" # *.tmp: a rank killed while writing
  done
  return 0
}

# ---- --nodes: simulated hosts ----

# need_netns: skips unless root (the namespaces need it) with iproute2.
need_netns() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: --nodes needs root for network namespaces"
    exit 77
  fi
  if ! command -v ip >/dev/null && [ ! -x /usr/sbin/ip ]; then
    echo "SKIP: ip (iproute2) is not installed"
    exit 77
  fi
}

# skip_without_netns: skips when the last run fell back to one host.
skip_without_netns() {
  if grep -q " netns=0$" "$TMP/out"; then
    echo "SKIP: qcclrun could not make network namespaces (QCCLRUN_NETNS=0)"
    exit 77
  fi
}

# run_pid: the qcclrun pid of the last run, from the ranks' QCCL_HOST_ID.
run_pid() {
  grep -o 'hostid=qccl-host[0-9]*-[0-9]*' "$TMP/out" | head -1 | sed 's/.*-//'
}

# tcp_args N BYTES: sets tcp to the fake_rank actions by which rank 0 serves
# and ranks 1..N-1 send BYTES each.
tcp_args() {
  local i
  tcp=(rank 0 tcp-serve "$2")
  for ((i = 1; i < $1; i++)); do tcp+=(rank "$i" tcp-send "$2"); done
}

# expect_no_netns PID: no namespace of run PID is left, and no qccl veth or
# bridge is in this (the root) namespace, where qcclrun never puts them.
expect_no_netns() {
  [ -n "$1" ] || fail "no qcclrun pid in the ranks' output"
  if ip netns list | grep -q "^qccl-$1-"; then
    fail "namespaces of run $1 left: $(ip netns list | grep "^qccl-$1-" | tr '\n' ' ')"
  fi
  if ip -o link show | grep -Eq ': (qccl[0-9]+(-sw)?|qbr)[@:]'; then
    fail "a qccl veth or bridge is in the root namespace"
  fi
  return 0
}

# expect_layout K H0 H1 ...: rank i ran on host Hi of K (hostname, QCCL_HOST_ID,
# local rank and size, interface and its address, MASTER_ADDR = rank 0's
# host), the ranks 1.. reached rank 0 over TCP from their host's address, and
# every host's link counters were reported.
expect_layout() {
  local k=$1 pid h i j lr lw line re
  shift
  local hosts=("$@")
  pid=$(run_pid)
  for ((i = 0; i < $#; i++)); do
    h=${hosts[$i]} lr=0 lw=0
    for ((j = 0; j < $#; j++)); do
      [ "${hosts[$j]}" = "$h" ] || continue
      ((j < i)) && lr=$((lr + 1))
      lw=$((lw + 1))
    done
    line=$(grep "^\[$i\] rank=" "$TMP/out")
    re="^\[$i\] rank=$i hostname=qccl-host$h hostid=qccl-host$h-$pid local_rank=$lr "
    re+="local_world=$lw addr=10\.77\.0\.$((hosts[0] + 1)) ifname=qccl$h "
    re+="ifaddr=10\.77\.0\.$((h + 1)) netns=1$"
    [[ $line =~ $re ]] || fail "rank $i: expected host $h (local $lr of $lw), got: $line"
    ((i == 0)) && continue
    grep -Eq "^\[$i\] sent 1000 bytes in [0-9]+ ms from 10\.77\.0\.$((h + 1))$" "$TMP/out" ||
      fail "rank $i did not reach rank 0 from 10.77.0.$((h + 1))"
  done
  [ "$(grep -c '^\[0\] served [0-9.]* 1000 bytes$' "$TMP/out")" -eq $(($# - 1)) ] ||
    fail "rank 0 did not get 1000 bytes from each other rank"
  for ((h = 0; h < k; h++)); do
    grep -Eq "^qcclrun: host $h \(10\.77\.0\.$((h + 1))\) sent [0-9]+ bytes, received [0-9]+ bytes on its link$" \
      "$TMP/err" || fail "no link counters for host $h"
  done
  expect_no_netns "$pid"
}

case_nodes_env() {
  need_netns
  tcp_args 4 1000
  run -n 4 --nodes 2 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  skip_without_netns
  expect_rc 0
  expect_layout 2 0 0 1 1
  tcp_args 5 1000
  run -n 5 --nodes 3 --placement 0,1,0,1,2 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 3 0 1 0 1 2
  # Uneven 2+3 from a list alone; blocks with a remainder (3+2); rank 0 on host 1.
  tcp_args 5 1000
  run -n 5 --placement 0,0,1,1,1 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 0 0 1 1 1
  tcp_args 5 1000
  run -n 5 --nodes 2 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 0 0 0 1 1
  tcp_args 3 1000
  run -n 3 --nodes 2 --placement=1,0,1 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 1 0 1
}

# json_field HOST FIELD: a number from the --link-stats file $TMP/stats.json.
json_field() {
  grep "\"host\": $1," "$TMP/stats.json" | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p"
}

case_nodes_link() {
  local bytes=4194304 t tx1 rx0
  need_netns
  run -n 2 --nodes 2 --link 100mbit --link-stats "$TMP/stats.json" --timeout 25 -- \
    "$FAKE" net rank 0 tcp-serve $bytes rank 1 tcp-send $bytes
  skip_without_netns
  expect_rc 0
  t=$(sed -n "s/^\[1\] sent $bytes bytes in \([0-9]*\) ms from 10\.77\.0\.2$/\1/p" "$TMP/out")
  [ -n "$t" ] || fail "no transfer time from rank 1"
  echo "  4 MiB from host 1 to host 0 at --link 100mbit: $t ms, $((bytes * 8 / t / 1000)) Mbit/s"
  # Even with a full 512 KiB bucket on the way, 100 Mbit/s needs 294 ms.
  ((t >= 280)) || fail "took $t ms: the link is not throttled to 100 Mbit/s"
  [ -s "$TMP/stats.json" ] || fail "no --link-stats file"
  grep -q '"netns": 1,' "$TMP/stats.json" || fail "--link-stats lacks netns 1"
  grep -q '"link": "100mbit",' "$TMP/stats.json" || fail "--link-stats lacks the rate"
  tx1=$(json_field 1 tx_bytes)
  rx0=$(json_field 0 rx_bytes)
  [[ -n $tx1 && -n $rx0 ]] || fail "--link-stats lacks the counters: $(cat "$TMP/stats.json")"
  ((tx1 >= bytes && rx0 >= bytes)) || fail "counters below $bytes: host 1 sent $tx1, host 0 got $rx0"
  ((tx1 < bytes + bytes / 10)) || fail "host 1 sent $tx1 bytes for $bytes: overhead over 10%"
  expect_err "qcclrun: host 1 (10.77.0.2) sent $tx1 bytes, received"
  expect_err "qcclrun: host 0 (10.77.0.1) sent $(json_field 0 tx_bytes) bytes, received $rx0 bytes"
  expect_no_netns "$(run_pid)"
  # Above 1 Gbit/s the bucket is 4mb; tc must take it.
  tcp_args 2 1000
  run -n 2 --nodes 2 --link 10gbit --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 0 1
}

case_nodes_cleanup() {
  local qpid i
  need_netns
  # A rank crashes: the others are stopped, the hosts removed, counters reported.
  run -n 4 --nodes 2 --grace 0.5 --timeout 25 -- "$FAKE" net rank 3 sigkill hang
  skip_without_netns
  expect_rc 137
  expect_err "qcclrun: rank 3 killed by signal SIGKILL"
  expect_err "qcclrun: host 1 (10.77.0.2) sent"
  expect_no_netns "$(run_pid)"
  run -n 2 --nodes 2 --timeout 1 -- "$FAKE" net hang
  expect_rc 124
  expect_err "qcclrun: host 0 (10.77.0.1) sent"
  expect_no_netns "$(run_pid)"
  # SIGTERM to qcclrun.
  echo "+ qcclrun -n 2 --nodes 2 -- fake_rank net pidfile hang (then SIGTERM)"
  "$QCCLRUN" -n 2 --nodes 2 -- "$FAKE" net pidfile "$TMP/pid.%r" hang >"$TMP/out" 2>"$TMP/err" &
  qpid=$!
  for ((i = 0; i < 200; i++)); do
    [[ -f $TMP/pid.0 && -f $TMP/pid.1 ]] && break
    sleep 0.05
  done
  kill -TERM "$qpid"
  wait "$qpid"
  rc=$?
  expect_rc 143
  expect_gone "$TMP"/pid.0 "$TMP"/pid.1
  expect_err "qcclrun: host 1 (10.77.0.2) sent"
  expect_no_netns "$qpid"
  # A second run right after works.
  tcp_args 2 1000
  run -n 2 --nodes 2 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 0 1
  # A command failing while the hosts are made: logged, all removed, no rank run, exit 1.
  mkdir "$TMP/bin" && printf '#!/bin/sh\nexit 2\n' >"$TMP/bin/tc" && chmod +x "$TMP/bin/tc"
  PATH="$TMP/bin:$PATH" run -n 2 --nodes 2 --link 1gbit -- "$FAKE" net
  expect_rc 1
  expect_err "command failed with status 2: tc -n qccl-"
  expect_err "removing what was made"
  [ -s "$TMP/out" ] && fail "a rank ran although the hosts could not be made"
  expect_no_netns "$(sed -n 's/.* tc -n qccl-\([0-9]*\)-h0 .*/\1/p' "$TMP/err")"
}

case_nodes_killed() {
  local i n
  need_netns
  echo "+ qcclrun -n 2 --nodes 2 -- fake_rank net pidfile hang (then SIGKILL)"
  "$QCCLRUN" -n 2 --nodes 2 -- "$FAKE" net pidfile "$TMP/pid.%r" hang >"$TMP/out" 2>"$TMP/err" &
  killed_qpid=$!
  for ((i = 0; i < 200; i++)); do
    [[ -f $TMP/pid.0 && -f $TMP/pid.1 ]] && break
    sleep 0.05
  done
  [[ -f $TMP/pid.0 && -f $TMP/pid.1 ]] || fail "ranks did not start"
  kill -KILL "$killed_qpid"
  wait "$killed_qpid"
  skip_without_netns
  n=$(ip netns list | grep -c "^qccl-$killed_qpid-")
  [ "$n" -eq 3 ] || fail "expected 3 leftover namespaces of the killed run, found $n"
  # Leftovers do not disturb a new run.
  tcp_args 2 1000
  run -n 2 --nodes 2 --timeout 25 -- "$FAKE" net "${tcp[@]}"
  expect_rc 0
  expect_layout 2 0 1
  run --cleanup
  expect_rc 0
  expect_err "removing namespace qccl-$killed_qpid-sw"
  expect_err "removing namespace qccl-$killed_qpid-h1"
  expect_no_netns "$killed_qpid"
  expect_gone "$TMP"/pid.0 "$TMP"/pid.1 # the orphaned ranks in them were killed
  killed_qpid=
  run --cleanup
  expect_rc 0
  usage_case 2 "--cleanup" --cleanup -n 2 -- "$FAKE"
}

case_nodes_fallback() {
  local as=() i h lr line re hosts=(0 0 1 1) self
  unset QCCL_SOCKET_IFNAME
  if [ "$(id -u)" -eq 0 ]; then # run qcclrun as nobody
    command -v setpriv >/dev/null || {
      echo "SKIP: root, and no setpriv to drop it"
      exit 77
    }
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
    "${as[@]}" test -x "$QCCLRUN" -a -x "$FAKE" || {
      echo "SKIP: user nobody cannot run $QCCLRUN"
      exit 77
    }
  fi
  chmod 711 "$TMP" && mkdir -m 777 "$TMP/nobody" # nobody writes --link-stats there
  self=$(uname -n)
  echo "+ ${as[*]} qcclrun -n 4 --nodes 2 --link 100mbit ... -- fake_rank net (tcp)"
  tcp_args 4 1000
  "${as[@]}" "$QCCLRUN" -n 4 --nodes 2 --link 100mbit --link-stats "$TMP/nobody/stats.json" \
    --timeout 25 -- "$FAKE" net "${tcp[@]}" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  expect_rc 0
  expect_err "not root, so no network namespaces"
  expect_err "QCCL_HOST_ID split into 2 simulated hosts; --link is ignored (QCCLRUN_NETNS=0)"
  for i in 0 1 2 3; do
    h=${hosts[$i]} lr=$((i % 2))
    line=$(grep "^\[$i\] rank=" "$TMP/out")
    re="^\[$i\] rank=$i hostname=$self hostid=qccl-host$h-[0-9]+ local_rank=$lr local_world=2 "
    re+="addr=127\.0\.0\.1 ifname=\(unset\) ifaddr=\(none\) netns=0$"
    [[ $line =~ $re ]] || fail "rank $i: expected host $h without namespaces, got: $line"
  done
  [ "$(grep -c '^\[0\] served 127\.0\.0\.1 1000 bytes$' "$TMP/out")" -eq 3 ] ||
    fail "rank 0 did not get 1000 bytes from each other rank over 127.0.0.1"
  grep -q '"netns": 0,' "$TMP/nobody/stats.json" || fail "--link-stats lacks netns 0"
  grep -q "qcclrun: host 0" "$TMP/err" && fail "link counters reported without namespaces"
  echo "+ ${as[*]} qcclrun --cleanup"
  "${as[@]}" "$QCCLRUN" --cleanup >"$TMP/out" 2>"$TMP/err"
  rc=$?
  expect_rc 1
  expect_err "not root"
}

case_nodes_usage() {
  usage_case 2 "'0'" -n 2 --nodes 0 -- "$FAKE"
  usage_case 2 "'255'" -n 2 --nodes 255 -- "$FAKE"
  usage_case 2 "'x'" -n 2 --nodes x -- "$FAKE"
  usage_case 2 "netem" -n 2 --nodes 2 --link 100mbit,10ms -- "$FAKE"
  usage_case 2 "'fast'" -n 2 --nodes 2 --link fast -- "$FAKE"
  usage_case 2 "'100'" -n 2 --nodes 2 --link 100 -- "$FAKE"
  usage_case 2 "--link needs --nodes" -n 2 --link 1gbit -- "$FAKE"
  usage_case 2 "--link-stats needs --nodes" -n 2 --link-stats "$TMP/s.json" -- "$FAKE"
  usage_case 2 "each of the 3 ranks" -n 3 --placement 0,1 -- "$FAKE"
  usage_case 2 "each of the 2 ranks" -n 2 --placement 0,1,0 -- "$FAKE"
  usage_case 2 "0..1" -n 2 --nodes 2 --placement 0,2 -- "$FAKE"
  usage_case 2 "'0,,1'" -n 3 --placement 0,,1 -- "$FAKE"
  usage_case 2 "'a,b'" -n 2 --placement a,b -- "$FAKE"
  usage_case 2 "'0,1,'" -n 2 --placement 0,1, -- "$FAKE"
  usage_case 2 "--cleanup" --cleanup --nodes 2
  usage_case 0 "" --help
  for f in --nodes --link --placement --link-stats --cleanup netem; do
    grep -q -- "$f" "$TMP/out" || fail "--help does not mention $f"
  done
}

case $case_name in
  env | prefix | no_prefix | exit_codes | grace | grace_kill | timeout | usage | shm | zombie | \
    signals | leftover | start_fail | nodes_env | nodes_link | nodes_cleanup | nodes_killed | \
    nodes_fallback | nodes_usage)
    "case_$case_name"
    echo "PASS ($case_name)"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
