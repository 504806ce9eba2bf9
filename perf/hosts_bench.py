#!/usr/bin/env python3
"""hosts_bench.py - collectives across simulated hosts: qccl's two-level
algorithms against its flat ones and against Open MPI, over the same
throttled links (issue 6's benchmark).

For each link rate, each collective and each library it runs one size sweep
on 2 hosts x 2 ranks (qcclrun --nodes 2 --link RATE; Open MPI through
tests/multinode/mpirun_hosts.sh, i.e. mpirun across the same kind of network
namespaces, `--mca btl tcp,self`), and prints a markdown table: the median
time per size for qccl hier, qccl flat and Open MPI, the link-bound time
(the bytes each host must send over its link, at the nominal rate), and the
ratios. As root only (namespaces, tc).

    sudo perf/hosts_bench.py --links 1gbit,10gbit -b 1M -e 256M -f 4

The link-bound bytes per host, for S = the size in qccl-perf's sense
(nccl-tests': the whole buffer of AllReduce, the gathered result of
AllGather), N hosts: AllReduce 2(N-1)/N S, AllGather (N-1)/N S.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATES = {"mbit": 1e6, "gbit": 1e9}


def rate_bytes(rate):
    for unit, mul in RATES.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * mul / 8
    raise SystemExit("link rate must end in mbit or gbit: " + rate)


def link_bytes(coll, size, nhosts):
    if coll == "allreduce":
        return 2.0 * (nhosts - 1) / nhosts * size
    if coll == "allgather":
        return (nhosts - 1) / nhosts * size
    raise SystemExit("no link bound for " + coll)


def run(cmd, env, log, timeout):
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write("# timed out\n")
            return 124


def rows(path):
    try:
        with open(path) as f:
            return {r["size"]: r["out_of_place"]["median_us"] for r in json.load(f)["rows"]}
    except (OSError, ValueError, KeyError):
        return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--links", default="1gbit,10gbit")
    ap.add_argument("--colls", default="allreduce,allgather")
    ap.add_argument("--libs", default="hier,flat,mpi")
    ap.add_argument("-b", "--minbytes", default="1M")
    ap.add_argument("-e", "--maxbytes", default="256M")
    ap.add_argument("-f", "--stepfactor", default="4")
    ap.add_argument("-n", "--iters", default="5")
    ap.add_argument("-w", "--warmup", default="1")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--outdir")
    a = ap.parse_args()
    out = a.outdir or tempfile.mkdtemp(prefix="qccl-hosts-bench-")
    os.makedirs(out, exist_ok=True)
    qcclrun = os.path.join(a.build, "tools", "qcclrun")
    perf = os.path.join(a.build, "perf", "qccl-perf")
    libs = a.libs.split(",")
    mpi = None
    if "mpi" in libs:
        if shutil.which("mpicc") and shutil.which("mpirun"):
            mpi = os.path.join(out, "mpi-perf")
            src = ["perf/peers/mpi_perf.c", "perf/perf_args.c", "perf/perf_colls.c",
                   "perf/perf_data.c", "perf/perf_driver.c"]
            subprocess.run(["mpicc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Iinclude", "-Iperf"] +
                           src + ["-lm", "-o", mpi], check=True, cwd=ROOT)
        else:
            print("no mpicc/mpirun: Open MPI skipped", file=sys.stderr)
            libs.remove("mpi")
    sweep = ["-b", a.minbytes, "-e", a.maxbytes, "-f", a.stepfactor, "-n", a.iters, "-w",
             a.warmup, "-c", "0"]
    print(f"# hosts_bench.py {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"2 hosts x 2 ranks, logs in {out}\n")
    for link in a.links.split(","):
        for coll in a.colls.split(","):
            res = {}
            for lib in libs:
                tag = f"{link}-{coll}-{lib}"
                js = os.path.join(out, tag + ".json")
                env = dict(os.environ)
                if lib == "mpi":
                    env["MPIRUN_HOSTS_LINK"] = link
                    env["MPIRUN_HOSTS_TIMEOUT"] = str(a.timeout)
                    cmd = ["bash", "tests/multinode/mpirun_hosts.sh", qcclrun, mpi, coll] + sweep
                    cmd += ["-J", js]
                else:
                    env["QCCL_ALGO"] = f"{coll}:{lib}"
                    cmd = [qcclrun, "-n", "4", "--nodes", "2", "--link", link, "--timeout",
                           str(a.timeout), "--", perf, coll] + sweep + ["-J", js]
                rc = run(cmd, env, os.path.join(out, tag + ".log"), a.timeout + 60)
                if rc != 0:
                    print(f"<!-- {tag}: exit {rc}, see {out}/{tag}.log -->")
                res[lib] = rows(js)
            sizes = sorted(set().union(*[r.keys() for r in res.values()]))
            bw = rate_bytes(link)
            head = "| size | link bound ms |" + "".join(f" {l} ms |" for l in libs)
            head += "".join(f" {l} / bound |" for l in libs if l != "mpi")
            head += " mpi / hier |" if "mpi" in libs and "hier" in libs else ""
            print(f"### {coll}, link {link}\n\n{head}")
            print("|" + "---|" * (head.count("|") - 1))
            for s in sizes:
                bound = link_bytes(coll, s, 2) / bw * 1e3
                t = {l: res[l].get(s) for l in libs}
                line = f"| {s >> 20} MiB | {bound:.1f} |"
                line += "".join(f" {t[l] / 1e3:.1f} |" if t[l] else " - |" for l in libs)
                line += "".join(f" {t[l] / 1e3 / bound:.2f} |" if t[l] else " - |"
                                for l in libs if l != "mpi")
                if "mpi" in libs and "hier" in libs:
                    line += (f" {t['mpi'] / t['hier']:.2f} |" if t["mpi"] and t["hier"]
                             else " - |")
                print(line)
            print()
            sys.stdout.flush()


if __name__ == "__main__":
    main()
