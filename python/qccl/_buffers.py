"""Turning NumPy arrays and torch CPU tensors into (pointer, elements, type).

A buffer must be contiguous in memory (C order for NumPy, is_contiguous()
for torch) and in host memory; a receive buffer must be writable. Anything
else is refused with an error naming the argument, never copied silently:
the caller knows whether a copy is acceptable (qccl.torch copies where
torch's semantics need it).
"""
from ._types import ELEMENT_BYTES, from_numpy_dtype, from_torch_dtype


class Buf:
    __slots__ = ("ptr", "count", "dtype", "obj")

    def __init__(self, ptr, count, dtype, obj):
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.obj = obj

    @property
    def nbytes(self):
        return self.count * ELEMENT_BYTES[self.dtype]


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def buf(obj, argname, writable=False):
    if _is_torch(obj):
        if obj.device.type != "cpu":
            raise ValueError("%s: a %s tensor; this version of qccl takes CPU tensors"
                             % (argname, obj.device.type))
        if not obj.is_contiguous():
            raise ValueError("%s: tensor is not contiguous" % argname)
        dt = from_torch_dtype(obj.dtype, argname)
        n = obj.numel()
        return Buf(obj.data_ptr() if n else None, n, dt, obj)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None and isinstance(obj, np.ndarray):
        if not obj.flags["C_CONTIGUOUS"]:
            raise ValueError("%s: array is not C-contiguous (use numpy.ascontiguousarray)"
                             % argname)
        if writable and not obj.flags["WRITEABLE"]:
            raise ValueError("%s: array is read-only" % argname)
        dt = from_numpy_dtype(obj.dtype, argname)
        return Buf(obj.ctypes.data if obj.size else None, obj.size, dt, obj)
    raise TypeError("%s: expected a numpy.ndarray or a torch CPU tensor, got %s"
                    % (argname, type(obj).__name__))


def empty_like(obj, count):
    """A new contiguous 1-D buffer of the same kind and type with `count` elements."""
    if _is_torch(obj):
        import torch
        return torch.empty(count, dtype=obj.dtype)
    import numpy as np
    return np.empty(count, dtype=obj.dtype)
