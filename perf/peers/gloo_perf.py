#!/usr/bin/env python3
"""gloo_perf.py - the PyTorch gloo peer of qccl-perf.

Same flags, inputs, check and table as qccl-perf (perf/perf_driver.c), with
torch.distributed's gloo backend (TCP over loopback) underneath:

    torchrun --nproc-per-node 2 perf/peers/gloo_perf.py allreduce -b 1K -e 256M -f 4
    python3 perf/peers/gloo_perf.py --np 2 allreduce ...   (multiprocessing spawn)

Each collective is what a PyTorch user writes for NCCL's semantics: the
tensor API is in place, so out of place first copies the send tensor into the
receive tensor (allreduce, reduce, broadcast on root), which the timed call
includes. sendrecv is batch_isend_irecv around the ring (out of place only: gloo
cannot receive into the tensor it is sending). Collectives, types or
ops this torch's gloo lacks (older versions have no reduce_scatter; uint32,
uint64 and fp8 are refused) are skipped with a '# skipped' line.

The inputs are perf_data.c's: splitmix64 from (seed, rank, index), mapped to
k/16 (floats) or small integers, so -c compares with the same reference.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
TYPES = {  # name: (torch dtype, size, is_float, is_signed, precision)
    "int8": (torch.int8, 1, False, True, 0),
    "uint8": (torch.uint8, 1, False, False, 0),
    "int32": (torch.int32, 4, False, True, 0),
    "int64": (torch.int64, 8, False, True, 0),
    "half": (torch.float16, 2, True, True, 11),
    "float": (torch.float32, 4, True, True, 24),
    "double": (torch.float64, 8, True, True, 53),
    "bfloat16": (torch.bfloat16, 2, True, True, 8),
}
UNSUPPORTED_TYPES = ("uint32", "uint64", "f8e4m3", "f8e5m2")
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
       "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}
FACTORS = {"allreduce": lambda n: 2.0 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
           "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "gather": lambda n: (n - 1) / n,
           "scatter": lambda n: (n - 1) / n, "sendrecv": lambda n: 1.0}
HAS_OP = ("allreduce", "reducescatter", "reduce")
HAS_ROOT = ("broadcast", "reduce", "gather", "scatter")
# no in-place form: alltoall (as in qccl); sendrecv, because gloo's irecv into
# the tensor being sent is undefined (it corrupts the data on this torch)
NO_INPLACE = ("alltoall", "sendrecv")


# ---- inputs and reference (perf_data.c's, vectorized) ----

def _mix(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def perf_input(seed, rank, idx, tname, op):
    """rank's input at indices idx (an int64 array), as float64 values."""
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed) + GOLDEN * np.uint64(rank + 1))
        h = _mix(key + GOLDEN * (idx.astype(np.uint64) + np.uint64(1)))
    _, _, is_float, signed, _ = TYPES[tname]
    if is_float:
        if op == "prod":
            return np.array([-2.0, -0.5, 0.5, 2.0])[(h >> np.uint64(62)).astype(np.int64)]
        return ((h >> np.uint64(59)).astype(np.int64) - 16) / 16.0
    if signed:
        if op == "prod":
            return np.array([-2.0, -1.0, 1.0, 2.0])[(h >> np.uint64(62)).astype(np.int64)]
        return ((h >> np.uint64(60)).astype(np.int64) - 8).astype(np.float64)
    if op == "prod":
        return (1 + (h >> np.uint64(63)).astype(np.int64)).astype(np.float64)
    return (h >> np.uint64(59)).astype(np.float64)


def to_tensor(values, tname):
    return torch.from_numpy(values).to(TYPES[tname][0])


def wrap_int(v, tname):
    bits = TYPES[tname][1] * 8
    v = np.mod(v.astype(np.int64), 1 << bits) if bits < 64 else v.astype(np.int64)
    if TYPES[tname][3] and bits < 64:
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v


CHUNK = 1 << 20  # elements per numpy step: the temporaries stay in cache


def fill(t, tname, op, seed, rank):
    """Writes rank's inputs into tensor t, chunk by chunk."""
    for i0 in range(0, t.numel(), CHUNK):
        i1 = min(i0 + CHUNK, t.numel())
        idx = np.arange(i0, i1, dtype=np.int64)
        t[i0:i1].copy_(to_tensor(perf_input(seed, rank, idx, tname, op), tname))


def expected(coll, j, c, tname, op, rank, n, root, seed):
    """(reference values, sum of |inputs| or None) for output elements j."""
    p = max(c["param"], 1)
    is_float = TYPES[tname][2]
    if coll in ("allreduce", "reduce", "reducescatter"):
        idx = rank * p + j if coll == "reducescatter" else j
        # every input value (k/16, powers of two, small integers) is exact in
        # the types gloo offers, so no rounding to the type is needed here
        vals = [perf_input(seed, r, idx, tname, op) for r in range(n)]
        reduce = {"sum": np.sum, "avg": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
        want = reduce[op](vals, axis=0)
        if not is_float:
            return wrap_int(want, tname), None
        mag = np.sum(np.abs(vals), axis=0)
        return (want / n, mag / n) if op == "avg" else (want, mag)
    if coll in ("allgather", "gather"):
        srcs, idx = j // p, j % p
    elif coll == "alltoall":
        srcs, idx = j // p, rank * p + j % p
    elif coll == "broadcast":
        srcs, idx = np.full(len(j), root), j
    elif coll == "scatter":
        srcs, idx = np.full(len(j), root), rank * p + j
    else:  # sendrecv
        srcs, idx = np.full(len(j), (rank + n - 1) % n), j
    want = np.empty(len(j))
    for r in np.unique(srcs):
        sel = srcs == r
        want[sel] = perf_input(seed, int(r), idx[sel], tname, op)
    return want, None


def check(coll, out, c, tname, op, rank, n, root, seed):
    """(wrong elements, first wrong (index, got, expected)) of this rank's output."""
    is_float = TYPES[tname][2]
    eps_acc = 2.0 ** -52 if tname == "double" else 2.0 ** -23
    rel = 2.0 ** (1 - TYPES[tname][4]) + n * eps_acc
    nbad, first = 0, None
    for j0 in range(0, c["check"], CHUNK):
        j = np.arange(j0, min(j0 + CHUNK, c["check"]), dtype=np.int64)
        o = out[j0:j0 + len(j)]
        got = o.to(torch.float64).numpy() if is_float else o.to(torch.int64).numpy()
        want, mag = expected(coll, j, c, tname, op, rank, n, root, seed)
        if mag is not None and op in ("sum", "avg"):
            bad = ~(np.abs(got - want) <= rel * mag + 2.0 ** -24)
        else:
            bad = got != want
        k = int(np.count_nonzero(bad))
        if k and first is None:
            i = int(np.argmax(bad))
            first = (j0 + i, float(got[i]), float(want[i]))
        nbad += k
    return nbad, first


# ---- the collectives: counts and calls ----

def counts(coll, count, n, rank, root):
    b = count // n
    if coll in ("allreduce", "broadcast", "sendrecv"):
        return dict(send=count, recv=count, param=count, soff=0, roff=0, check=count)
    if coll == "reduce":
        return dict(send=count, recv=count, param=count, soff=0, roff=0,
                    check=count if rank == root else 0)
    if coll == "allgather":
        return dict(send=b, recv=b * n, param=b, soff=b, roff=0, check=b * n)
    if coll == "gather":
        return dict(send=b, recv=b * n, param=b, soff=b, roff=0,
                    check=b * n if rank == root else 0)
    if coll in ("reducescatter", "scatter"):
        return dict(send=b * n, recv=b, param=b, soff=0, roff=b, check=b)
    return dict(send=b * n, recv=b * n, param=b, soff=0, roff=0, check=b * n)  # alltoall


def make_call(coll, send, recv, c, op, root, rank, n):
    """A closure that runs the collective once (NCCL semantics)."""
    p = c["param"]
    same = send.data_ptr() == recv.data_ptr()  # in place
    if coll == "allreduce":
        def f():
            if not same:
                recv.copy_(send)
            dist.all_reduce(recv, op=OPS[op])
    elif coll == "allgather":
        def f():
            dist.all_gather_into_tensor(recv, send)
    elif coll == "reducescatter":
        def f():
            dist.reduce_scatter_tensor(recv, send, op=OPS[op])
    elif coll == "alltoall":
        def f():
            dist.all_to_all_single(recv, send)
    elif coll == "broadcast":
        def f():
            if rank == root and not same:
                recv.copy_(send)
            dist.broadcast(recv, src=root)
    elif coll == "reduce":
        def f():
            if not same:
                recv.copy_(send)
            dist.reduce(recv, dst=root, op=OPS[op])
    elif coll == "gather":
        views = [recv[i * p:(i + 1) * p] for i in range(n)] if rank == root else None
        def f():
            dist.gather(send, views, dst=root)
    elif coll == "scatter":
        views = [send[i * p:(i + 1) * p] for i in range(n)] if rank == root else None
        def f():
            dist.scatter(recv, views, src=root)
    else:  # sendrecv: the ring shift
        nxt, prv = (rank + 1) % n, (rank + n - 1) % n
        def f():
            ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
    return f


def supported(coll):
    need = {"allgather": "all_gather_into_tensor", "reducescatter": "reduce_scatter_tensor",
            "alltoall": "all_to_all_single", "sendrecv": "batch_isend_irecv"}
    return coll not in need or hasattr(dist, need[coll])


# ---- the driver ----

def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.rstrip("Bb")
    if s and s[-1].upper() in mul:
        return int(s[:-1], 0) * mul[s[-1].upper()]
    return int(s, 0)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="gloo_perf.py", description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=0, help="spawn this many ranks (no torchrun)")
    ap.add_argument("collective", choices=sorted(FACTORS))
    ap.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20)
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20)
    ap.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("-c", "--check", type=int, default=1)
    ap.add_argument("-o", "--op", default="sum")
    ap.add_argument("-d", "--datatype", default="float")
    ap.add_argument("-r", "--root", type=int, default=0)
    ap.add_argument("-a", "--average", type=int, default=1, choices=(0, 1, 2, 3))
    ap.add_argument("-z", "--blocking", type=int, default=1, choices=(0, 1))
    ap.add_argument("-T", "--timeout", type=int, default=0)
    ap.add_argument("-J", "--output_file")
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=0x5EED)
    ap.add_argument("--no-header", action="store_true")
    return ap.parse_args(argv)


def fmt_time(us):
    return f"{us:.0f}" if us >= 1e4 else f"{us:.2f}"


def combine(vals, how, rank, n):
    t = torch.tensor(vals, dtype=torch.float64)
    if how == 0 and rank != 0:
        t.zero_()
    op = {2: dist.ReduceOp.MIN, 3: dist.ReduceOp.MAX}.get(how, dist.ReduceOp.SUM)
    dist.all_reduce(t, op=op)
    if how == 1:
        t /= n
    return t.tolist()


def time_calls(f, a):
    for _ in range(a.warmup_iters):
        f()
    dist.barrier()
    times = []
    start = time.perf_counter()
    for _ in range(a.iters):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    return total / a.iters * 1e6, statistics.median(times) * 1e6


def run_size(a, coll, size, tname, op, rank, n, sendbuf, recvbuf, state):
    ts = TYPES[tname][1]
    dtype = TYPES[tname][0]
    signal.alarm(a.timeout)  # 0: none; the default action ends the rank
    c = counts(coll, size // ts, n, rank, a.root)
    maxc = max(c["send"], c["recv"])
    res = []
    for ip in (0, 1):
        if ip and coll in NO_INPLACE:
            res.append(None)
            continue
        rv = recvbuf[:maxc * ts].view(dtype)
        send = rv[c["soff"] * rank:c["soff"] * rank + c["send"]] if ip else \
            sendbuf[:c["send"] * ts].view(dtype)
        recv = rv[c["roff"] * rank:c["roff"] * rank + c["recv"]] if ip else rv[:c["recv"]]
        fill(send, tname, op, a.seed, rank)
        f = make_call(coll, send, recv, c, op, a.root, rank, n)
        mean_us, med_us = time_calls(f, a)
        wrong = 0
        if a.check:
            rv.fill_(float("nan") if TYPES[tname][2] else -91)
            fill(send, tname, op, a.seed, rank)
            f()
            wrong, first = check(coll, recv[:c["check"]], c, tname, op, rank, n, a.root, a.seed)
            if wrong:
                state["local_wrong"] = True
                print(f"gloo-perf: rank {rank}: {coll} {maxc * ts} B {tname} {op} "
                      f"{'in-place' if ip else 'out-of-place'}: {wrong} wrong values; first at "
                      f"element {first[0]}: got {first[1]:.9g}, expected {first[2]:.9g} "
                      f"(seed {a.seed:#x})", file=sys.stderr, flush=True)
        res.append([mean_us, med_us, wrong])
    vals = []
    for r in res:
        vals += r[:2] if r else [0.0, 0.0]
    vals = combine(vals, a.average, rank, n)
    wr = torch.tensor([r[2] if r else 0 for r in res], dtype=torch.int64)
    dist.all_reduce(wr)  # summed over ranks
    signal.alarm(0)
    return maxc * ts, maxc, vals, wr.tolist(), res


def main_rank(a):
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    coll = a.collective
    factor = FACTORS[coll](n)
    types = list(TYPES) + list(UNSUPPORTED_TYPES) if a.datatype == "all" else [a.datatype]
    ops = list(OPS) if a.op == "all" else [a.op]
    out = sys.stdout if rank == 0 else open(os.devnull, "w")
    if not a.no_header:
        step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.stepbytes}(bytes)"
        print(f"# gloo-perf {coll}: gloo (torch {torch.__version__}), {n} ranks", file=out)
        print(f"#  minBytes {a.minbytes} maxBytes {a.maxbytes} step: {step} warmup iters: "
              f"{a.warmup_iters} iters: {a.iters} validation: {1 if a.check else 0} average: "
              f"{a.average} blocking: {a.blocking} timeout: {a.timeout}", file=out)
        print(f"#  seed {a.seed:#x}; check: perf_data.c's reference", file=out)
        print("#  time: mean per call (nccl-tests); median: median of the per-call times",
              file=out)
    print("#\n#%75s%38s" % ("out-of-place", "in-place"), file=out)
    hdr = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %8s  %8s"
    print(hdr % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                 "time", "algbw", "busbw", "#wrong", "median", "median"), file=out)
    print(hdr % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                 "(GB/s)", "(GB/s)", "", "oop(us)", "ip(us)"), file=out, flush=True)
    state = {"local_wrong": False}
    rows, bws, wrong_total = [], [], 0
    maxb = a.maxbytes
    sendbuf = torch.zeros(maxb + 64, dtype=torch.uint8)
    recvbuf = torch.zeros(maxb + 64, dtype=torch.uint8)
    for tname in types:
        for op in ops if coll in HAS_OP else ["sum"]:
            opname = op if coll in HAS_OP else "none"
            if tname in UNSUPPORTED_TYPES or not supported(coll):
                what = tname if supported(coll) else coll
                print(f"# skipped: {coll} {tname} {opname}: {what} is not offered by torch "
                      f"{torch.__version__}'s gloo", file=out)
                continue
            if op == "avg" and not TYPES[tname][2]:
                continue
            size = a.minbytes
            while size <= maxb:
                nbytes, cnt, v, wr, res = run_size(a, coll, size, tname, op, rank, n, sendbuf,
                                                   recvbuf, state)
                wrong_total += sum(wr)
                root = a.root if coll in HAS_ROOT else -1
                line = "%12d  %12d  %8s  %6s  %6d" % (nbytes, cnt, tname, opname, root)
                row = dict(size=nbytes, count=cnt, type=tname, redop=opname, root=root)
                for ip in (0, 1):
                    key = "in_place" if ip else "out_of_place"
                    if res[ip] is None:
                        line += "  %7s  %6s  %6s  %6s" % (("N/A",) * 4)
                        row[key] = None
                        continue
                    mean_us, med_us = v[2 * ip], v[2 * ip + 1]
                    algbw = nbytes / 1e9 / (mean_us * 1e-6) if mean_us > 0 else 0.0
                    algbw_med = nbytes / 1e9 / (med_us * 1e-6) if med_us > 0 else 0.0
                    line += "  %7s  %6.2f  %6.2f  %6s" % (fmt_time(mean_us), algbw,
                                                          algbw * factor,
                                                          wr[ip] if a.check else "N/A")
                    bws.append(algbw * factor)
                    row[key] = dict(time_us=mean_us, median_us=med_us, algbw=algbw,
                                    busbw=algbw * factor, algbw_median=algbw_med,
                                    busbw_median=algbw_med * factor,
                                    wrong=wr[ip] if a.check else None)
                for ip in (0, 1):
                    line += "  %8s" % (fmt_time(v[2 * ip + 1]) if res[ip] else "N/A")
                print(line, file=out, flush=True)
                rows.append(row)
                size = size * a.stepfactor if a.stepfactor > 1 else size + a.stepbytes
                if a.stepfactor <= 1 and a.stepbytes == 0:
                    break
    avg_bw = sum(bws) / len(bws) if bws else 0.0
    print(f"# Out of bounds values : {wrong_total} {'FAILED' if wrong_total else 'OK'}", file=out)
    print(f"# Avg bus bandwidth    : {avg_bw:g} \n#", file=out, flush=True)
    if rank == 0 and a.output_file:
        with open(a.output_file, "w") as jf:
            json.dump(dict(tool="gloo-perf", backend="gloo", version=torch.__version__,
                           collective=coll, nranks=n, iters=a.iters, warmup=a.warmup_iters,
                           check=1 if a.check else 0, average=a.average, seed=a.seed,
                           bus_factor=factor, rows=rows, wrong=wrong_total, avg_busbw=avg_bw,
                           ok=wrong_total == 0), jf, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if wrong_total or state["local_wrong"] else 0


def _spawned(rank, n, port, argv):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    sys.exit(main_rank(parse_args(argv)))


def main():
    a = parse_args(sys.argv[1:])
    torch.set_num_threads(1)
    if a.np > 0 and "RANK" not in os.environ:
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_spawned, args=(a.np, port, sys.argv[1:]), nprocs=a.np, join=True)
        return 0
    return main_rank(a)


if __name__ == "__main__":
    sys.exit(main())
