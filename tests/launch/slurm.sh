#!/usr/bin/env bash
# slurm.sh - a real Slurm on this machine, started and torn down by the test:
# munged, slurmctld and slurmd (Debian's slurm-wlm and munge) with their
# configuration, key, state and sockets in a temporary folder, on free
# ports, the local host as the only node (CPUs=4 whatever the machine has:
# SlurmdParameters=config_overrides), no cgroups (proctrack/linuxproc,
# task/none). Then, with no qccl variable set:
#   srun --mpi=pmix -n 4 FIRST          the README's program, through PMIx
#   srun --mpi=pmix -n N MR_PROG...     multi-rank checks (tests/mr programs)
#   srun --mpi=none -n 2 FIRST          no PMIx, no QCCL_COMM_ID: every rank
#                                       fails, naming QCCL_COMM_ID
#   srun --mpi=none -n 3 FIRST          with QCCL_COMM_ID: works, and warns
#                                       that its secret is derived
#   ... with QCCL_SECRET_FILE           works, no warning
#   srun --mpi=pmi2 -n 2 FIRST          PMI-2 is not PMIx: as --mpi=none
#
#   usage: slurm.sh FIRST [N:MR_PROG ...]
# Exit 0 when every case held, 1 otherwise, 77 when Slurm or munge is not
# installed or this is not root (slurmd must start tasks as their user).
set -uo pipefail
first=$1
shift

for c in munged slurmctld slurmd srun sinfo; do
  command -v $c >/dev/null || { echo "SKIP: $c not found (tools/setup.sh installs slurm-wlm and munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }

# nothing of qccl's, and no launcher variables from whoever started us
for v in $(compgen -v QCCL_) $(compgen -v SLURM_) $(compgen -v PMIX_) $(compgen -v OMPI_); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT

tmp=$(mktemp -d /tmp/qccl-slurm.XXXXXX)
# The daemons run in sessions of their own (setsid), so that a signal to
# this test's process group reaches only this script, whose exit stops, in
# order: the srun in flight, every job of this cluster (scancel, while
# slurmd can still end its steps), slurmd, slurmctld, munged.
daemons=()
cur=""
stop_pid() { # stop_pid PID: SIGTERM, up to 5 s, then SIGKILL
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null
}
cleanup() {
  local i
  [ -z "$cur" ] || stop_pid "$cur"
  if [ ${#daemons[@]} -ge 2 ]; then
    scancel --quiet --full --signal=KILL --user="$(id -un)" 2>/dev/null
    for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do stop_pid "${daemons[$i]}"; wait "${daemons[$i]}" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)

# munge: a fresh key and a private socket
mkdir -p "$tmp/munge" && chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom > "$tmp/munge/munge.key" && chmod 400 "$tmp/munge/munge.key"
setsid munged -F --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
  --seed-file="$tmp/munge/munged.seed" 2>"$tmp/munge/stderr" &
daemons+=($!)

mkdir -p "$tmp/state" "$tmp/spool" "$tmp/tmpfs"
ctld_port=$(free_port)
d_port=$(free_port)
cat > "$tmp/slurm.conf" <<CONF
ClusterName=qccltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
TmpFS=$tmp/tmpfs
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=qccl Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$tmp/slurm.conf

for _ in $(seq 50); do [ -S "$tmp/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/munge/munge.sock" ] || { echo "FAIL: munged did not start"; cat "$tmp/munge/"*.log "$tmp/munge/stderr"; exit 1; }
setsid slurmctld -D -i -f "$SLURM_CONF" > "$tmp/slurmctld.out" 2>&1 &
daemons+=($!)
setsid slurmd -D -f "$SLURM_CONF" -N "$host" > "$tmp/slurmd.out" 2>&1 &
daemons+=($!)
t0=$(date +%s.%N)
state=""
for _ in $(seq 300); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -n 1)
  case $state in idle*) break ;; esac
  sleep 0.1
done
case $state in
  idle*) echo "slurm up in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s: node $host $state" ;;
  *) echo "FAIL: the node did not become idle (state '$state')"
     tail -n 20 "$tmp/slurmctld.log" "$tmp/slurmd.log" "$tmp/slurmctld.out" "$tmp/slurmd.out"
     exit 1 ;;
esac
echo "srun --mpi=list:"; srun --mpi=list 2>&1 | sed 's/^/  /'

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  echo "--- slurmd.log (last lines)"; tail -n 15 "$tmp/slurmd.log" 2>/dev/null | sed 's/^/   | /'
}

# run_case NAME TIMEOUT SRUN-ARGS... : output in $tmp/NAME.out / .err, status in $rc
run_case() {
  local name=$1 t=$2
  shift 2
  echo "== $name: srun $*"
  local s
  s=$(date +%s.%N)
  # in the background, so that a signal to this script is handled at once
  timeout "$t" srun --kill-on-bad-exit=1 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" &
  cur=$!
  wait "$cur"
  rc=$?
  cur=""
  echo "   exit $rc after $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
}

# the README's first program prints "rank r of n: (n-1)/2" on every rank
check_first() {
  local name=$1 n=$2 r want
  want=$(python3 -c "print('%g' % (($n - 1) / 2))")
  for r in $(seq 0 $((n - 1))); do
    grep -qx "rank $r of $n: $want" "$tmp/$name.out" || { fail "$name: no line 'rank $r of $n: $want'"; sed 's/^/   | /' "$tmp/$name.out" "$tmp/$name.err"; return; }
  done
  echo "   ok: $n ranks, each $want"
}

if srun --mpi=list 2>&1 | grep -q pmix; then
  run_case pmix_first4 60 --mpi=pmix -n 4 "$first"
  [ $rc -eq 0 ] || fail "pmix_first4: exit $rc"
  check_first pmix_first4 4
  if grep -q "warning" "$tmp/pmix_first4.err"; then fail "pmix_first4: a warning under PMIx"; cat "$tmp/pmix_first4.err"; fi
  for spec in "$@"; do
    n=${spec%%:*}
    prog=${spec#*:}
    name="pmix_$(basename "$prog")_w$n"
    run_case "$name" 120 --mpi=pmix -n "$n" --export=ALL,QCCL_MR_QUICK=1 "$prog"
    # one rank 0, which saw W=n and passed
    if [ $rc -eq 0 ] && [ "$(grep -c ": W=$n seed=" "$tmp/$name.out")" -eq 1 ] &&
      [ "$(grep -c ": PASS: " "$tmp/$name.out")" -eq 1 ]; then
      echo "   ok: $(grep ": PASS: " "$tmp/$name.out")"
    else
      fail "$name: exit $rc, or not one 'W=$n' and one 'PASS' line"; tail -n 30 "$tmp/$name.out" "$tmp/$name.err"
    fi
  done
else
  fail "this Slurm has no PMIx plugin (srun --mpi=list); Debian 12's slurm-wlm has pmix and pmix_v4"
fi

# without PMIx: SLURM_* for the numbering, and no rendezvous address
run_case none_first2_nocommid 60 --mpi=none -n 2 "$first"
[ $rc -ne 0 ] || fail "none_first2_nocommid: succeeded without a rendezvous address"
n_named=$(grep -c "QCCL_COMM_ID" "$tmp/none_first2_nocommid.err")
if [ "$n_named" -ge 2 ] && grep -q "SLURM_PROCID" "$tmp/none_first2_nocommid.err"; then
  echo "   ok: both ranks name QCCL_COMM_ID: $(grep -m1 QCCL_COMM_ID "$tmp/none_first2_nocommid.err")"
else
  fail "none_first2_nocommid: the error does not name QCCL_COMM_ID and SLURM_PROCID on both ranks"; cat "$tmp/none_first2_nocommid.err"
fi

port=$(free_port)
run_case none_first3_commid 60 --mpi=none -n 3 --export=ALL,QCCL_COMM_ID=127.0.0.1:$port "$first"
[ $rc -eq 0 ] || fail "none_first3_commid: exit $rc"
check_first none_first3_commid 3
if [ "$(grep -c "secret is derived from public values" "$tmp/none_first3_commid.err")" -eq 1 ]; then
  echo "   ok: one warning (rank 0) about the derived secret"
else
  fail "none_first3_commid: expected one warning about the derived secret"; cat "$tmp/none_first3_commid.err"
fi

# srun's PMI-2 plugin is no PMIx: the same as --mpi=none for qccl
port=$(free_port)
run_case pmi2_first2_commid 60 --mpi=pmi2 -n 2 --export=ALL,QCCL_COMM_ID=127.0.0.1:$port "$first"
[ $rc -eq 0 ] || fail "pmi2_first2_commid: exit $rc"
check_first pmi2_first2_commid 2

head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret" && chmod 600 "$tmp/secret"
port=$(free_port)
run_case none_first3_secretfile 60 --mpi=none -n 3 \
  --export=ALL,QCCL_COMM_ID=127.0.0.1:$port,QCCL_SECRET_FILE=$tmp/secret "$first"
[ $rc -eq 0 ] || fail "none_first3_secretfile: exit $rc"
check_first none_first3_secretfile 3
if grep -q "warning" "$tmp/none_first3_secretfile.err"; then fail "none_first3_secretfile: a warning"; cat "$tmp/none_first3_secretfile.err"; fi

echo "slurm: $failures failure(s)"
[ $failures -eq 0 ]
