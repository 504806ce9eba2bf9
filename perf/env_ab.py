#!/usr/bin/env python3
"""env_ab.py - one build, two or more settings of one environment variable,
interleaved: how a threshold's value was chosen.

For every round, every rank count and every value of the variable (in that
order, so a slow minute of the machine hits every value alike), runs
`qcclrun -n W -- qccl-perf COLL -b MIN -e MAX ...` with VAR=value and keeps
the median call time of every size (out of place); prints per rank count
and size the median over the rounds for each value, and each value's time
over the first one's.

    perf/env_ab.py --var QCCL_ALLREDUCE_ONESHOT_BYTES --values 0,1048576 \\
        --ranks 2,4,8 --coll allreduce -b 1K -e 256K --rounds 5
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--var", required=True, help="the environment variable")
    ap.add_argument("--values", required=True, help="comma list of its values")
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--coll", default="allreduce")
    ap.add_argument("-b", "--minbytes", default="1K")
    ap.add_argument("-e", "--maxbytes", default="256K")
    ap.add_argument("-f", "--stepfactor", default="2")
    ap.add_argument("-n", "--iters", default="", help="calls per size (default: 3000 for up "
                    "to 4 ranks, 1000 beyond)")
    ap.add_argument("-d", "--datatype", default="float")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--register", default="0", help="qccl-perf -R")
    a = ap.parse_args()
    values = a.values.split(",")
    ranks = [int(x) for x in a.ranks.split(",")]
    run = os.path.join(a.build, "tools", "qcclrun")
    perf = os.path.join(a.build, "perf", "qccl-perf")
    times = collections.defaultdict(list)
    tmp = tempfile.mkdtemp(prefix="env_ab-")
    for rnd in range(a.rounds):
        for w in ranks:
            for v in values:
                iters = a.iters or ("3000" if w <= 4 else "1000")
                env = dict(os.environ, **{a.var: v})
                jpath = os.path.join(tmp, "run.json")
                cmd = [run, "-n", str(w), "--", perf, a.coll, "-b", a.minbytes, "-e", a.maxbytes,
                       "-f", a.stepfactor, "-n", iters, "-w", "100", "-c", "0", "-d", a.datatype,
                       "-R", a.register, "-J", jpath]
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    sys.stderr.write(p.stdout[-2000:] + p.stderr[-2000:])
                    sys.exit(f"env_ab: {' '.join(cmd)} with {a.var}={v} failed")
                with open(jpath) as f:  # qccl-perf's JSON, as compare.py reads it
                    for row in json.load(f)["rows"]:
                        times[(w, row["size"], v)].append(row["out_of_place"]["median_us"])
        # the table so far after every round, so that a run cut short
        # still leaves its figures (on stderr; the final one on stdout)
        print(f"env_ab: round {rnd + 1} of {a.rounds} done", file=sys.stderr)
        if rnd + 1 < a.rounds:
            table(a, values, ranks, times, rnd + 1, sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    table(a, values, ranks, times, a.rounds, sys.stdout)


def table(a, values, ranks, times, rounds, out):
    """Prints the median call time of every rank count, size and value."""
    print(f"# {a.coll} ({a.datatype}), median call time (us) of {rounds} interleaved rounds, "
          f"{a.var} = " + " / ".join(values), file=out)
    for w in ranks:
        print(f"# {w} ranks", file=out)
        print("%10s" % "bytes" + "".join("%12s" % v for v in values) +
              "".join("%12s" % f"{v}/{values[0]}" for v in values[1:]), file=out)
        for s in sorted({k[1] for k in times if k[0] == w}):
            if any(not times[(w, s, v)] for v in values):
                continue
            med = [statistics.median(times[(w, s, v)]) for v in values]
            print("%10d" % s + "".join("%12.2f" % m for m in med) +
                  "".join("%12.2f" % (m / med[0]) for m in med[1:]), file=out)
    out.flush()


if __name__ == "__main__":
    main()
