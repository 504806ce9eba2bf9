"""The block-quantization codec (wire format v1, docs/QUANT.md) and the
specs of the quantized collectives.

QuantSpec mirrors qcclQuantSpec_t: bits (8 or 4), block (power of two,
32..4096), asymmetric, stochastic rounding, rotation, seed, rank. The codec
functions are pure and need no communicator:

    q = qccl.quantize(x, spec)                  # numpy uint8 array, quant_size bytes
    y = qccl.dequantize(q, x.size, spec, "float32")
    bound = qccl.error_bound(q, x.size, spec)   # max |x - y| allowed
"""
import ctypes

from . import _lib
from ._buffers import buf, _is_torch
from ._types import DataType, from_numpy_dtype, from_torch_dtype

_RSQ_DEFAULT_INTER_BITS = 4


class QuantSpec:
    """A quantization spec (qcclQuantSpec_t). Defaults: QCCL_QUANT_SPEC_INITIALIZER."""

    def __init__(self, bits=8, block=256, asymmetric=False, stochastic=False, rotate=False,
                 seed=0, rank=0):
        self.bits = bits
        self.block = block
        self.asymmetric = asymmetric
        self.stochastic = stochastic
        self.rotate = rotate
        self.seed = seed
        self.rank = rank

    def _struct(self):
        s = _lib.QuantSpecStruct()
        s.size = ctypes.sizeof(_lib.QuantSpecStruct)
        s.magic = _lib.QUANT_SPEC_MAGIC
        s.version = 1
        s.bits = int(self.bits)
        s.block = int(self.block)
        s.mode = 1 if self.asymmetric else 0
        s.rounding = 1 if self.stochastic else 0
        s.rotate = 1 if self.rotate else 0
        s.seed = int(self.seed)
        s.rank = int(self.rank)
        return s

    def __repr__(self):
        return ("QuantSpec(bits=%d, block=%d, asymmetric=%s, stochastic=%s, rotate=%s, seed=%d)"
                % (self.bits, self.block, self.asymmetric, self.stochastic, self.rotate,
                   self.seed))


def spec_of(spec, argname="spec"):
    """A QuantSpec from a QuantSpec, an int (bits) or None (None stays None)."""
    if spec is None or isinstance(spec, QuantSpec):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        return QuantSpec(bits=spec)
    raise TypeError("%s: expected a qccl.QuantSpec or a number of bits, got %r" % (argname, spec))


class ReduceScatterQConfig:
    """qcclReduceScatterQConfig_t: the two hops of qgZ (intra: inside the node,
    default int8; inter: between nodes, default int4) and error feedback.
    residual: a caller-owned float32 buffer (residual_count(...) elements) or
    None for a communicator-owned one chosen by residual_tag."""

    def __init__(self, intra=None, inter=None, error_feedback=False, residual=None,
                 residual_tag=0):
        self.intra = spec_of(intra, "intra") or QuantSpec(bits=8)
        self.inter = spec_of(inter, "inter") or QuantSpec(bits=_RSQ_DEFAULT_INTER_BITS)
        self.error_feedback = error_feedback
        self.residual = residual
        self.residual_tag = residual_tag

    def _struct(self):
        c = _lib.RsqConfigStruct()
        c.size = ctypes.sizeof(_lib.RsqConfigStruct)
        c.magic = _lib.RSQ_CONFIG_MAGIC
        c.version = 1
        c.intra = self.intra._struct()
        c.inter = self.inter._struct()
        c.errorFeedback = 1 if self.error_feedback else 0
        if self.residual is not None:
            b = buf(self.residual, "residual", writable=True)
            if b.dtype != DataType.FLOAT32:
                raise TypeError("residual: must be float32")
            c.residual = b.ptr
            c.residualCount = b.count
        c.residualTag = int(self.residual_tag)
        return c


def rsq_config_of(cfg, argname="config"):
    if cfg is None or isinstance(cfg, ReduceScatterQConfig):
        return cfg
    if isinstance(cfg, (QuantSpec, int)):
        return ReduceScatterQConfig(inter=cfg)
    raise TypeError("%s: expected a qccl.ReduceScatterQConfig, got %r" % (argname, cfg))


def _dtype_arg(dtype, like):
    if dtype is None:
        return like
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, str):
        try:
            return DataType[dtype.upper()]
        except KeyError:
            pass
    if type(dtype).__module__ == "torch":
        return from_torch_dtype(dtype, "dtype")
    import numpy as np
    return from_numpy_dtype(np.dtype(dtype), "dtype")


def quant_size(count, spec=None):
    """Bytes of the quantized chunk of `count` elements under spec."""
    s = (spec_of(spec) or QuantSpec())._struct()
    out = ctypes.c_size_t()
    _lib.check(_lib.fn("qcclQuantSize")(int(count), ctypes.byref(s), ctypes.byref(out)))
    return out.value


def quantize(x, spec=None, out=None):
    """Quantizes x (float32, float16 or bfloat16; NumPy or torch) into a new
    uint8 array (or `out`, of quant_size bytes). Returns the chunk."""
    spec = spec_of(spec) or QuantSpec()
    src = buf(x, "x")
    n = quant_size(src.count, spec)
    if out is None:
        if _is_torch(x):
            import torch
            out = torch.empty(n, dtype=torch.uint8)
        else:
            import numpy as np
            out = np.empty(n, dtype=np.uint8)
    dst = buf(out, "out", writable=True)
    if dst.nbytes < n:
        raise ValueError("out: %d bytes, the chunk needs %d" % (dst.nbytes, n))
    s = spec._struct()
    _lib.check(_lib.fn("qcclQuantize")(src.ptr, src.count, int(src.dtype), ctypes.byref(s),
                                       dst.ptr))
    return out


def dequantize(chunk, count, spec=None, dtype="float32", out=None):
    """Dequantizes a chunk of `count` elements into a new array of dtype (or
    `out`). The result is a torch tensor if chunk is one, else NumPy."""
    spec = spec_of(spec) or QuantSpec()
    src = buf(chunk, "chunk")
    need = quant_size(count, spec)
    if src.nbytes < need:
        raise ValueError("chunk: %d bytes, %d elements need %d" % (src.nbytes, count, need))
    if out is None:
        dt = _dtype_arg(dtype, DataType.FLOAT32)
        if _is_torch(chunk):
            import torch
            from ._types import to_torch_dtype
            out = torch.empty(count, dtype=to_torch_dtype(dt))
        else:
            import numpy as np
            from ._types import numpy_dtype_name
            try:
                npdt = np.dtype(numpy_dtype_name(dt))
            except TypeError:
                import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
                npdt = np.dtype(numpy_dtype_name(dt))
            out = np.empty(count, dtype=npdt)
    dst = buf(out, "out", writable=True)
    if dst.count < count:
        raise ValueError("out: %d elements, need %d" % (dst.count, count))
    s = spec._struct()
    _lib.check(_lib.fn("qcclDequantize")(src.ptr, int(count), int(dst.dtype), ctypes.byref(s),
                                         dst.ptr))
    return out


def error_bound(chunk, count, spec=None, per_block=False):
    """The a-priori bound of |x - dequantize(quantize(x))| for this chunk: the
    largest over its blocks, or (max, per-block NumPy float32 array)."""
    spec = spec_of(spec) or QuantSpec()
    src = buf(chunk, "chunk")
    s = spec._struct()
    mx = ctypes.c_float()
    blocks = None
    ptr = None
    if per_block:
        import numpy as np
        nb = (int(count) + spec.block - 1) // spec.block
        blocks = np.empty(nb, dtype=np.float32)
        ptr = blocks.ctypes.data
    _lib.check(_lib.fn("qcclQuantErrorBound")(src.ptr, int(count), ctypes.byref(s), ptr,
                                              ctypes.byref(mx)))
    return (mx.value, blocks) if per_block else mx.value
