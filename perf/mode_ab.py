#!/usr/bin/env python3
"""mode_ab.py - builds, settings and peers side by side, paired run by run
and split by the host's mode.

Some guests change mode while they run: the two vCPUs share a cache for
minutes, then sit apart for seconds (a cache line's round trip 60-90 ns,
then 300-380; docs/PERF.md, "A crash the AMD guest found, and the guest's
two modes"), and a copy's speed changes with it. A comparison whose runs
fall in different modes compares the modes. So for as long as --secs says,
pass after pass, this runs every variant once as a fresh process
(`qcclrun -n N -- qccl-perf COLL -b B -e E -f F -n 10 -w 2 -c 1 -J`, or a
peer's mpirun and perf program from perf/compare.py's recipes, with the
same flags), in an order rotated by one each pass, and reads the mode
(`qccl-handoff -s 4096 -n 16`) before and after each run; a run is kept
only where both readings agree (below --shared-ns: a shared cache; above
--apart-ns: none). Then, for each --ratio A/B, per mode and size: the
median call time (out of place, us) of A and of B over the passes where
both were kept in the same mode, and the median of the per-pass ratios A/B
(below 1: A faster), with the number of pairs.

Variants: NAME=BUILD[:VAR=VALUE[,VAR=VALUE...]] (a qccl build folder,
relative to the current one or whole, and the environment of its ranks),
or one of mpi, mpich, impi, oneccl (built by compare.py into
BUILD/peers; --peers-build says which build).

    perf/mode_ab.py --ranks 8 --coll alltoall -b 512K -e 8M --secs 300 \\
        --variant new=build --variant base=/tmp/base/build \\
        --variant forced=build:QCCL_CMA_MIN_BYTES=65536 --variant mpi \\
        --ratio new/base --ratio new/mpi --out /tmp/a2a8.jsonl

A run that fails (its exit status, as rc on stderr) is left out of the
pairs and makes the script exit 1 after the ratios are printed.

The raw runs go to --out (overwritten; one JSON line per kept size: pass,
mode, round trip, variant, size, median_us), and --from reads such a file
again for other ratios without running anything.
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the peers' recipes and environment)

PEERS = ("mpi", "mpich", "impi", "oneccl")


def parse_variant(spec):
    if spec in PEERS:
        return {"name": spec, "peer": spec}
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        sys.exit(f"mode_ab: --variant {spec}: NAME=BUILD[:VAR=VALUE,...] or one of "
                 f"{', '.join(PEERS)}")
    build, _, envs = rest.partition(":")
    env = {}
    for kv in filter(None, envs.split(",")):
        k, eq, v = kv.partition("=")
        if not eq or not k:
            sys.exit(f"mode_ab: --variant {spec}: '{kv}' is not VAR=VALUE")
        env[k] = v
    build = os.path.abspath(build)
    for tool in ("tools/qcclrun", "perf/qccl-perf"):
        if not os.access(os.path.join(build, tool), os.X_OK):
            sys.exit(f"mode_ab: --variant {spec}: no {tool} in {build} (ninja -C {build})")
    return {"name": name, "build": build, "env": env}


def round_trip_ns(handoff):
    """The mode: a cache line's round trip between the two first CPUs, ns."""
    p = subprocess.run([handoff, "-s", "4096", "-n", "16"], capture_output=True, text=True,
                       timeout=60)
    for line in p.stdout.splitlines():
        w = line.split()
        if len(w) >= 3 and w[0] == "round" and w[1] == "trip":
            return int(w[2])
    return None


def command(v, a, jpath):
    flags = ["-b", a.b, "-e", a.e, "-f", str(a.f), "-n", str(a.iters), "-w", str(a.warmup),
             "-c", "1"] + (["-O", str(a.offset)] if a.offset else []) + ["-J", jpath]
    if "peer" in v:
        ns = argparse.Namespace(peers_venv=a.peers_venv, check=1, peer_check=1, timeout=a.timeout)
        tools = {f"{v['peer']}-perf": os.path.join(a.peers_build, "peers", f"{v['peer']}-perf")}
        cmd = compare.lib_cmd(v["peer"], tools, a.coll, a.ranks, flags[:-2], jpath, ns)
        return cmd, compare.lib_env(v["peer"], ns)
    cmd = [os.path.join(v["build"], "tools", "qcclrun"), "-n", str(a.ranks), "--no-prefix",
           "--timeout", str(a.timeout), "--", os.path.join(v["build"], "perf", "qccl-perf"),
           a.coll] + flags
    return cmd, dict(os.environ, **v["env"])


def mode_of(r0, r1, a):
    if r0 is None or r1 is None:
        return None
    if r0 < a.shared_ns and r1 < a.shared_ns:
        return "shared"
    if r0 > a.apart_ns and r1 > a.apart_ns:
        return "apart"
    return None


def run_passes(a, variants, out):
    handoff = os.path.join(a.peers_build, "perf", "qccl-handoff")
    end = time.time() + a.secs
    tmp = tempfile.mkdtemp(prefix="mode_ab.")
    try:
        return passes_until(a, variants, out, handoff, end, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def passes_until(a, variants, out, handoff, end, tmp):
    """(passes run, runs that failed)"""
    passes = failed = 0
    while time.time() < end:
        k = passes % len(variants)
        for v in variants[k:] + variants[:k]:
            jpath = os.path.join(tmp, "run.json")
            if os.path.exists(jpath):
                os.unlink(jpath)
            cmd, env = command(v, a, jpath)
            r0 = round_trip_ns(handoff)
            try:
                rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, timeout=a.timeout + 30).returncode
            except subprocess.TimeoutExpired:
                rc = 124
            r1 = round_trip_ns(handoff)
            mode = mode_of(r0, r1, a)
            rows = compare.load_rows(jpath) if rc == 0 else None
            if rc != 0:
                failed += 1
                print(f"mode_ab: pass {passes}, {v['name']}: rc {rc}", file=sys.stderr)
            if mode is None or rows is None:
                continue
            for size, row in sorted(rows.items()):
                oop = row.get("out_of_place")
                if oop and oop.get("median_us") is not None:
                    out.write(json.dumps({"pass": passes, "mode": mode, "rt_ns": max(r0, r1),
                                          "variant": v["name"], "size": size,
                                          "median_us": oop["median_us"]}) + "\n")
            out.flush()
        passes += 1
    return passes, failed


def ratios(records, pairs):
    by = collections.defaultdict(dict)  # (pass, size) -> variant -> (mode, us)
    for r in records:
        by[(r["pass"], r["size"])][r["variant"]] = (r["mode"], r["median_us"])
    for pa, pb in pairs:
        cells = collections.defaultdict(list)
        for (_, size), m in by.items():
            if pa in m and pb in m and m[pa][0] == m[pb][0]:
                cells[(m[pa][0], size)].append((m[pa][1], m[pb][1]))
        print(f"{pa} / {pb}: time (us) and the median of per-pass ratios")
        if not cells:
            print("  no pairs: no pass kept both in one mode (a round trip between the "
                  "thresholds, one CPU, or a failed run)")
        for (mode, size), v in sorted(cells.items()):
            ta = statistics.median(x for x, _ in v)
            tb = statistics.median(y for _, y in v)
            q = statistics.median(x / y for x, y in v if y > 0)
            print(f"  {mode:6} {size:>10}  {pa} {ta:10.2f}  {pb} {tb:10.2f}  ratio {q:.2f}"
                  f"  ({len(v)} pairs)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--coll", default="alltoall")
    ap.add_argument("-b", default="256K")
    ap.add_argument("-e", default="8M")
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("-O", "--offset", type=int, default=0,
                    help="buffers this many bytes past a page (qccl-perf -O)")
    ap.add_argument("--secs", type=float, default=300, help="how long to run passes")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--ratio", action="append", default=[], help="A/B, two variants' names")
    ap.add_argument("--out", help="the raw runs, JSON lines (default: a temporary file)")
    ap.add_argument("--from", dest="src", help="no runs: the ratios of an --out file")
    ap.add_argument("--peers-build", default="build",
                    help="the build with the peers (BUILD/peers) and qccl-handoff")
    ap.add_argument("--peers-venv", default=None, help="default <peers-build>/peers-venv")
    ap.add_argument("--shared-ns", type=int, default=200)
    ap.add_argument("--apart-ns", type=int, default=250)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    a = ap.parse_args()
    pairs = []
    for r in a.ratio:
        pa, sep, pb = r.partition("/")
        if not sep or not pa or not pb:
            sys.exit(f"mode_ab: --ratio {r}: A/B")
        pairs.append((pa, pb))
    if a.src:
        with open(a.src) as f:
            ratios([json.loads(line) for line in f if line.strip()], pairs)
        return 0
    if a.ranks < 1 or a.secs <= 0 or not a.variant:
        sys.exit("mode_ab: --ranks >= 1, --secs > 0 and at least one --variant")
    a.peers_build = os.path.abspath(a.peers_build)
    a.peers_venv = os.path.abspath(a.peers_venv or os.path.join(a.peers_build, "peers-venv"))
    variants = [parse_variant(s) for s in a.variant]
    names = [v["name"] for v in variants]
    for pa, pb in pairs:
        for n in (pa, pb):
            if n not in names:
                sys.exit(f"mode_ab: --ratio {pa}/{pb}: no variant named {n}")
    path = a.out or tempfile.mkstemp(prefix="mode_ab.", suffix=".jsonl")[1]
    with open(path, "w") as out:
        n, failed = run_passes(a, variants, out)
    print(f"mode_ab: {n} passes, {failed} failed runs, runs in {path}")
    with open(path) as f:
        ratios([json.loads(line) for line in f if line.strip()], pairs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
