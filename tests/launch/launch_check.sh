#!/usr/bin/env bash
# launch_check.sh - runs a launcher command with no qccl variable and no
# inherited launcher variables in its environment, and judges its output:
#   launch_check.sh first N CMD...   CMD must exit 0 and print, for every
#                                    rank r < N, the line "rank r of N: m"
#                                    of the README's first program (m the
#                                    mean of 0..N-1), possibly after a
#                                    qcclrun "[i] " prefix; no warning
#   launch_check.sh error WORDS CMD... CMD must fail, and its output name
#                                    every word of WORDS (comma separated)
#   launch_check.sh pass TEXT CMD...   CMD must exit 0 and print TEXT
# Extra variables for the ranks go in CMD (e.g. through `env` or -x); in CMD
# @PORT@ becomes a free TCP port of 127.0.0.1 and @SECRET_FILE@ a fresh
# secret file (mode 0600).
# Exit 77 when the launcher (CMD's first word) is not installed.
set -uo pipefail
mode=$1
arg=$2
shift 2
command -v "$1" >/dev/null || { echo "SKIP: $1 not found"; exit 77; }
for v in $(compgen -v QCCL_) $(compgen -v SLURM_) $(compgen -v PMIX_) $(compgen -v OMPI_); do
  unset "$v"
done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID
out=$(mktemp)
secret=$(mktemp)
trap 'rm -f "$out" "$secret"' EXIT
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$secret"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cmd=()
for a in "$@"; do
  a=${a//@PORT@/$port}
  cmd+=("${a//@SECRET_FILE@/$secret}")
done
echo "+ ${cmd[*]}"
"${cmd[@]}" > "$out" 2>&1
rc=$?
sed 's/^/  | /' "$out"
echo "exit $rc"
case $mode in
  first)
    [ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
    want=$(python3 -c "print('%g' % (($arg - 1) / 2))")
    for r in $(seq 0 $((arg - 1))); do
      grep -Eq "^(\[[0-9]+\] )?rank $r of $arg: $want\$" "$out" ||
        { echo "FAIL: no line 'rank $r of $arg: $want'"; exit 1; }
    done
    [ "$(grep -c "^rank \|\] rank " "$out")" -eq "$arg" ] || { echo "FAIL: not exactly $arg rank lines"; exit 1; }
    if grep -qi "qccl: warning" "$out"; then echo "FAIL: a warning"; exit 1; fi
    echo "ok: $arg ranks, each $want"
    ;;
  error)
    [ "$rc" -ne 0 ] || { echo "FAIL: succeeded"; exit 1; }
    IFS=, read -ra words <<< "$arg"
    for w in "${words[@]}"; do
      grep -q -- "$w" "$out" || { echo "FAIL: the output does not name $w"; exit 1; }
    done
    echo "ok: failed, naming ${words[*]}"
    ;;
  pass)
    [ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
    grep -qF -- "$arg" "$out" || { echo "FAIL: no '$arg' in the output"; exit 1; }
    echo "ok: $arg"
    ;;
  *) echo "usage: launch_check.sh first N CMD... | error WORDS CMD... | pass TEXT CMD..."; exit 2 ;;
esac
