"""Finding libqccl.so and declaring its C API for ctypes.

The library is looked for, in order: the file named by QCCL_LIBRARY; a copy
installed inside this package (pip install ./python copies the one Meson
built); ../build/src/libqccl.so* relative to this package's folder in a
checkout (use from the build tree, nothing installed); then the system's
libqccl.so.1 (ninja -C build install). Every function gets its argtypes and
restype here, so a wrong argument is a TypeError in Python, not a crash in C.
ctypes releases the GIL for the duration of each call: a blocking collective
does not stop other Python threads.
"""
import ctypes
import ctypes.util
import os

from ._errors import QcclError

UNIQUE_ID_BYTES = 128
CONFIG_MAGIC = 0x71CC1C0F
QUANT_SPEC_MAGIC = 0x71C0DE01
RSQ_CONFIG_MAGIC = 0x71C0DE02
STAT_NUM_COLLS = 16
CONFIG_UNDEF_INT = -(2**31)


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("commName", ctypes.c_char_p),
        ("timeoutSec", ctypes.c_int),
    ]


class QuantSpecStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("bits", ctypes.c_int),
        ("block", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("rounding", ctypes.c_int),
        ("rotate", ctypes.c_int),
        ("seed", ctypes.c_ulonglong),
        ("rank", ctypes.c_int),
    ]


class RsqConfigStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("intra", QuantSpecStruct),
        ("inter", QuantSpecStruct),
        ("errorFeedback", ctypes.c_int),
        ("residual", ctypes.c_void_p),
        ("residualCount", ctypes.c_size_t),
        ("residualTag", ctypes.c_int),
    ]


class StatCountersStruct(ctypes.Structure):
    _fields_ = [
        ("calls", ctypes.c_uint64),
        ("bytesIntra", ctypes.c_uint64),
        ("bytesInter", ctypes.c_uint64),
    ]


class StatsStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("coll", StatCountersStruct * STAT_NUM_COLLS),
        ("total", StatCountersStruct),
    ]


def _candidates():
    env = os.environ.get("QCCL_LIBRARY")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libqccl.so")]
    repo = os.path.dirname(os.path.dirname(here))  # python/qccl -> repo root
    for name in ("libqccl.so", "libqccl.so.1"):
        out.append(os.path.join(repo, "build", "src", name))
    out.append("libqccl.so.1")
    found = ctypes.util.find_library("qccl")
    if found:
        out.append(found)
    return out, False


def _load():
    paths, explicit = _candidates()
    errors = []
    for p in paths:
        if os.path.sep in p and not os.path.exists(p):
            if explicit:
                raise OSError("QCCL_LIBRARY=%s: no such file" % p)
            continue
        try:
            return ctypes.CDLL(p), p
        except OSError as e:
            if explicit:
                raise OSError("QCCL_LIBRARY=%s: %s" % (p, e)) from e
            errors.append("%s: %s" % (p, e))
    raise OSError(
        "libqccl.so not found: set QCCL_LIBRARY, build the checkout (meson setup build && "
        "ninja -C build), or install the library. Tried: " + "; ".join(errors or paths)
    )


lib, path = _load()

_P = ctypes.c_void_p
_I = ctypes.c_int
_Z = ctypes.c_size_t
_R = ctypes.c_int  # qcclResult_t
_PP = ctypes.POINTER(ctypes.c_void_p)

_PROTOS = {
    "qcclGetVersion": [ctypes.POINTER(_I)],
    "qcclGetUniqueId": [ctypes.POINTER(UniqueIdStruct)],
    "qcclCommInitRank": [_PP, _I, UniqueIdStruct, _I],
    "qcclCommInitRankConfig": [_PP, _I, UniqueIdStruct, _I, ctypes.POINTER(ConfigStruct)],
    "qcclCommInitFromEnv": [_PP],
    "qcclCommSplit": [_P, _I, _I, _PP, ctypes.POINTER(ConfigStruct)],
    "qcclCommFinalize": [_P],
    "qcclCommDestroy": [_P],
    "qcclCommAbort": [_P],
    "qcclCommGetAsyncError": [_P, ctypes.POINTER(_R)],
    "qcclCommCount": [_P, ctypes.POINTER(_I)],
    "qcclCommUserRank": [_P, ctypes.POINTER(_I)],
    "qcclAllReduce": [_P, _P, _Z, _I, _I, _P, _P],
    "qcclBroadcast": [_P, _P, _Z, _I, _I, _P, _P],
    "qcclReduce": [_P, _P, _Z, _I, _I, _I, _P, _P],
    "qcclAllGather": [_P, _P, _Z, _I, _P, _P],
    "qcclReduceScatter": [_P, _P, _Z, _I, _I, _P, _P],
    "qcclAlltoAll": [_P, _P, _Z, _I, _P, _P],
    "qcclGather": [_P, _P, _Z, _I, _I, _P, _P],
    "qcclScatter": [_P, _P, _Z, _I, _I, _P, _P],
    "qcclSend": [_P, _Z, _I, _I, _P, _P],
    "qcclRecv": [_P, _Z, _I, _I, _P, _P],
    "qcclBarrier": [_P, _P],
    "qcclGroupStart": [],
    "qcclGroupEnd": [],
    "qcclStreamCreate": [_PP],
    "qcclStreamDestroy": [_P],
    "qcclStreamSynchronize": [_P],
    "qcclStreamQuery": [_P],
    "qcclEventCreate": [_PP],
    "qcclEventRecord": [_P, _P],
    "qcclEventQuery": [_P],
    "qcclEventSynchronize": [_P],
    "qcclStreamWaitEvent": [_P, _P],
    "qcclEventDestroy": [_P],
    "qcclCommNodeInfo": [_P, ctypes.POINTER(_I), ctypes.POINTER(_I), ctypes.POINTER(_I),
                         ctypes.POINTER(_I)],
    "qcclCommPeerNode": [_P, _I, ctypes.POINTER(_I), ctypes.POINTER(_I)],
    "qcclCommNodeSize": [_P, _I, ctypes.POINTER(_I)],
    "qcclCommSplitNode": [_P, ctypes.POINTER(ConfigStruct), _PP],
    "qcclCommSplitRail": [_P, ctypes.POINTER(ConfigStruct), _PP],
    "qcclCommSplitLeaders": [_P, ctypes.POINTER(ConfigStruct), _PP],
    "qcclMemAlloc": [_PP, _Z],
    "qcclMemFree": [_P],
    "qcclCommGetStats": [_P, ctypes.POINTER(StatsStruct)],
    "qcclCommResetStats": [_P],
    "qcclQuantSize": [_Z, ctypes.POINTER(QuantSpecStruct), ctypes.POINTER(_Z)],
    "qcclQuantize": [_P, _Z, _I, ctypes.POINTER(QuantSpecStruct), _P],
    "qcclDequantize": [_P, _Z, _I, ctypes.POINTER(QuantSpecStruct), _P],
    "qcclQuantErrorBound": [_P, _Z, ctypes.POINTER(QuantSpecStruct), _P,
                            ctypes.POINTER(ctypes.c_float)],
    "qcclAllGatherQ": [_P, _P, _Z, _I, ctypes.POINTER(QuantSpecStruct), _P, _P],
    "qcclSecondaryCreate": [_P, _Z, _I, ctypes.POINTER(QuantSpecStruct), _PP],
    "qcclAllGatherQSecondary": [_P, _P, _Z, _I, ctypes.POINTER(QuantSpecStruct), _P,
                                ctypes.c_ulonglong, _P, _P],
    "qcclSecondaryAllGather": [_P, _P, ctypes.c_ulonglong, _P],
    "qcclSecondaryInvalidate": [_P],
    "qcclSecondaryDestroy": [_P],
    "qcclReduceScatterQ": [_P, _P, _Z, _I, _I, ctypes.POINTER(RsqConfigStruct), _P, _P],
    "qcclReduceScatterQResidualCount": [_P, _Z, ctypes.POINTER(RsqConfigStruct),
                                        ctypes.POINTER(_Z)],
    "qcclAllReduceQ": [_P, _P, _Z, _I, _I, ctypes.POINTER(RsqConfigStruct), _P, _P],
    "qcclCommSetPolicy": [_P, _I, ctypes.POINTER(QuantSpecStruct), _Z],
}

missing = []
for _name, _args in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        missing.append(_name)
        continue
    _f.argtypes = _args
    _f.restype = _R

lib.qcclGetErrorString.argtypes = [_R]
lib.qcclGetErrorString.restype = ctypes.c_char_p
lib.qcclGetLastError.argtypes = [_P]
lib.qcclGetLastError.restype = ctypes.c_char_p


def has(name):
    """True if the loaded library exports `name` (older builds lack some)."""
    return name not in missing


def fn(name):
    if name in missing:
        raise QcclError(5, "%s is not in %s (a library older than this package)" % (name, path))
    return getattr(lib, name)


def last_error(handle=None):
    msg = lib.qcclGetLastError(handle)
    return msg.decode("utf-8", "replace") if msg else ""


def check(result, handle=None, what=None):
    """Raises QcclError for a failed result, with qcclGetLastError's message
    (of the communicator `handle`, else of this thread)."""
    if result == 0:
        return
    msg = last_error(handle)
    if not msg and handle is not None:
        msg = last_error(None)
    if not msg:
        msg = lib.qcclGetErrorString(result).decode()
    if what:
        msg = "%s: %s" % (what, msg)
    raise QcclError(result, msg)


def call(name, *args, handle=None):
    check(fn(name)(*args), handle, None)


def version():
    v = ctypes.c_int()
    check(lib.qcclGetVersion(ctypes.byref(v)))
    return v.value
