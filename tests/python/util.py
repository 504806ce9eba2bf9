"""Shared helpers of the Python tests: a seed every rank agrees on, inputs
any rank can regenerate for any other (so each rank computes its own exact
reference without communicating), and the ranges that keep sums and
products exact in every element type."""
import os
import time

import numpy as np

INT_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64"]
FLOAT_TYPES = ["float16", "float32", "float64"]


def draw_seed():
    s = os.environ.get("QCCL_TEST_SEED")
    return int(s) if s else int(time.time_ns() % 1000000007)


def values(seed, rank, n, dtype, op="sum", salt=0):
    """n inputs of rank `rank` for op: small integers (exact sums and
    products in every type, bf16 included), wide ones for min / max."""
    rng = np.random.default_rng([seed, rank, salt])
    unsigned = dtype.startswith("uint")
    if op in ("min", "max"):
        lo, hi = (0, 200) if unsigned else (-100, 100)
        if dtype in ("float16", "bfloat16"):
            lo, hi = (0, 200) if unsigned else (-200, 200)
    elif op in ("prod", "product"):
        lo, hi = (0, 3) if unsigned else (-3, 3)
    else:
        lo, hi = (0, 8) if unsigned else (-8, 8)
    return rng.integers(lo, hi + 1, n).astype(np.float64)


def reduce_ref(arrays, op):
    a = np.stack(arrays)
    if op == "sum":
        return a.sum(0)
    if op in ("prod", "product"):
        return a.prod(0)
    if op == "max":
        return a.max(0)
    if op == "min":
        return a.min(0)
    if op in ("avg", "mean"):
        return a.sum(0) / len(arrays)
    raise ValueError(op)
