"""Enumerations of qccl.h and the mapping from NumPy / torch element types
to qcclDataType_t."""
import enum


class DataType(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8E4M3 = 10
    FLOAT8E5M2 = 11


ELEMENT_BYTES = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
    DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4,
    DataType.FLOAT64: 8, DataType.BFLOAT16: 2, DataType.FLOAT8E4M3: 1, DataType.FLOAT8E5M2: 1,
}


class RedOp(enum.IntEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class StatColl(enum.IntEnum):
    """qcclStatColl_t: the slots of the traffic counters."""

    ALL_REDUCE = 0
    BROADCAST = 1
    REDUCE = 2
    ALL_GATHER = 3
    REDUCE_SCATTER = 4
    ALL_TO_ALL = 5
    GATHER = 6
    SCATTER = 7
    SEND_RECV = 8
    BARRIER = 9
    ALL_GATHER_Q = 10
    REDUCE_SCATTER_Q = 11
    ALL_REDUCE_Q = 12
    NODE_ALL_GATHER = 13


_OP_NAMES = {
    "sum": RedOp.SUM, "prod": RedOp.PROD, "product": RedOp.PROD, "max": RedOp.MAX,
    "min": RedOp.MIN, "avg": RedOp.AVG, "mean": RedOp.AVG,
}

_COLL_NAMES = {
    "allreduce": StatColl.ALL_REDUCE, "all_reduce": StatColl.ALL_REDUCE,
    "allgather": StatColl.ALL_GATHER, "all_gather": StatColl.ALL_GATHER,
    "reducescatter": StatColl.REDUCE_SCATTER, "reduce_scatter": StatColl.REDUCE_SCATTER,
}


def red_op(op, argname="op"):
    if isinstance(op, RedOp):
        return op
    if isinstance(op, str) and op.lower() in _OP_NAMES:
        return _OP_NAMES[op.lower()]
    if isinstance(op, int) and not isinstance(op, bool) and 0 <= op <= 4:
        return RedOp(op)
    raise ValueError("%s: unknown reduction %r (sum, prod, max, min, avg)" % (argname, op))


def stat_coll(c, argname="collective"):
    if isinstance(c, StatColl):
        return c
    if isinstance(c, str) and c.lower() in _COLL_NAMES:
        return _COLL_NAMES[c.lower()]
    if isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 16:
        return StatColl(c)
    raise ValueError("%s: unknown collective %r (allgather, reducescatter, allreduce)"
                     % (argname, c))


# NumPy dtype names (ml_dtypes provides bfloat16 and the fp8 formats)
_NUMPY = {
    "int8": DataType.INT8, "uint8": DataType.UINT8, "int32": DataType.INT32,
    "uint32": DataType.UINT32, "int64": DataType.INT64, "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16, "float32": DataType.FLOAT32, "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16, "float8_e4m3fn": DataType.FLOAT8E4M3,
    "float8_e5m2": DataType.FLOAT8E5M2, "bool": DataType.UINT8,
}

# torch dtype names as str(torch.dtype) without the "torch." prefix
_TORCH = dict(_NUMPY)


def numpy_dtype_name(dt):
    """The numpy dtype name for a DataType (bfloat16 needs ml_dtypes)."""
    for k, v in _NUMPY.items():
        if v == dt and k != "bool":
            return k
    raise ValueError(dt)


def from_numpy_dtype(dtype, argname):
    t = _NUMPY.get(dtype.name)
    if t is None:
        raise TypeError("%s: element type %s has no qccl data type" % (argname, dtype))
    return t


def from_torch_dtype(dtype, argname):
    t = _TORCH.get(str(dtype).replace("torch.", ""))
    if t is None:
        raise TypeError("%s: element type %s has no qccl data type" % (argname, dtype))
    return t


def to_torch_dtype(dt):
    import torch
    names = {DataType.FLOAT8E4M3: "float8_e4m3fn", DataType.FLOAT8E5M2: "float8_e5m2"}
    return getattr(torch, names.get(dt, numpy_dtype_name(dt)))
